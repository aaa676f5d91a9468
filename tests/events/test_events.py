"""Agent events: subscription patterns, order, envelope, payload models, isolation, delivery."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentfootprint import (
    Agent,
    ConfigurationError,
    Limits,
    ProviderError,
    RunResult,
    Tracing,
    tool,
)
from agentfootprint.events import EVENTS, AgentEvent
from agentfootprint.events._catalogue import full_name, payload_model
from agentfootprint.events._dispatcher import EventDispatcher
from agentfootprint.flow import FlowEvent
from agentfootprint.flow._commitlog import CommitRecord
from agentfootprint.providers import mock, with_fallback, with_retry

# -- helpers ---------------------------------------------------------------------------------


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: sunny"


def tool_turn_script() -> list[Any]:
    return [{"tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
            "It is sunny in Paris today."]


def make_agent(**options: Any) -> Agent:
    options.setdefault("tools", [weather])
    provider = options.pop("provider", None) or mock(script=tool_turn_script())
    return Agent(provider=provider, model="m", system="sys", **options)


async def run_with_all_events(agent: Agent) -> tuple[RunResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    return await agent.run("Weather in Paris?"), events


def short(events: list[AgentEvent]) -> list[str]:
    return [e.type.removeprefix("agentfootprint.") for e in events]


async def _no_sleep(delay: float) -> None:
    return None


# -- subscriptions ---------------------------------------------------------------------------


async def test_subscribe_by_name_domain_and_everything() -> None:
    """on() accepts an exact name, a domain wildcard and '*', each hearing its own events."""
    agent = make_agent()
    exact: list[AgentEvent] = []
    domain: list[AgentEvent] = []
    everything: list[AgentEvent] = []
    agent.on("stream.llm_end", exact.append)
    agent.on("stream.*", domain.append)
    agent.on("*", everything.append)
    await agent.run("Weather?")
    assert short(exact) == ["stream.llm_end", "stream.llm_end"]
    assert set(short(domain)) == {"stream.llm_start", "stream.llm_end", "stream.tool_start",
                                  "stream.tool_end"}
    assert len(everything) > len(domain) > len(exact)
    assert {e.type for e in everything} >= {e.type for e in domain}


async def test_full_names_subscribe_too() -> None:
    """Full names ('agentfootprint.stream.llm_end') and short ones subscribe alike."""
    agent = make_agent()
    got: list[AgentEvent] = []
    agent.on("agentfootprint.agent.turn_end", got.append)
    agent.on("agentfootprint.agent.*", got.append)
    await agent.run("Weather?")
    assert short(got).count("agent.turn_end") == 2


def test_unknown_event_name_is_a_configuration_error() -> None:
    """Subscribing to a name not in the catalogue raises ConfigurationError."""
    agent = make_agent()
    with pytest.raises(ConfigurationError, match="not an agentfootprint event"):
        agent.on("stream.tokens", print)
    with pytest.raises(ConfigurationError):
        agent.on("agentfootprint.nope", print)
    with pytest.raises(ConfigurationError):
        payload_model("agent.unknown")


def test_unknown_domain_is_a_configuration_error() -> None:
    """A wildcard for a domain the catalogue does not have raises, like an unknown name."""
    with pytest.raises(ConfigurationError):
        EventDispatcher().on("strem.*", print)


async def test_unsubscribe() -> None:
    """The function on() returns stops delivery to that listener."""
    agent = make_agent(provider=mock(reply="hi"))
    got: list[AgentEvent] = []
    off = agent.on("agent.turn_end", got.append)
    await agent.run("a")
    off()
    await agent.run("b")
    assert len(got) == 1


def test_exact_then_domain_then_everything() -> None:
    """For one event, exact listeners hear it first, then the domain's, then the catch-alls."""
    dispatcher = EventDispatcher()
    order: list[str] = []
    dispatcher.on("*", lambda e: order.append("all"))
    dispatcher.on("stream.*", lambda e: order.append("domain"))
    dispatcher.on("stream.llm_end", lambda e: order.append("exact"))
    dispatcher.dispatch(AgentEvent(full_name("stream.llm_end"), {}, "r", "s#0", "S"))
    assert order == ["exact", "domain", "all"]


def test_catalogue_names() -> None:
    """Every catalogue name is agentfootprint.<domain>.<action> with a payload model."""
    for name, model in EVENTS.items():
        assert name.startswith("agentfootprint.")
        assert len(name.split(".")) == 3
        assert payload_model(name) is model
    assert full_name("stream.token") == "agentfootprint.stream.token"
    assert full_name("*") == "*"


# -- order and envelope ----------------------------------------------------------------------


async def test_typical_order_for_a_tool_using_turn() -> None:
    """A one-tool turn emits the spec's typical order, from turn_start to turn_end."""
    _, events = await run_with_all_events(make_agent())
    assert short(events) == [
        "agent.turn_start",
        "agent.iteration_start", "stream.llm_start", "stream.llm_end", "agent.route_decided",
        "stream.tool_start", "stream.tool_end", "agent.iteration_end",
        "agent.iteration_start", "stream.llm_start", "stream.llm_end", "agent.route_decided",
        "agent.iteration_end", "agent.turn_end",
    ]
    routes = [e.payload["chosen"] for e in events if e.type.endswith("route_decided")]
    assert routes == ["tool-calls", "final"]
    assert events[-1].payload["content"] == "It is sunny in Paris today."
    assert events[-1].payload["iterations"] == 2


async def test_every_event_carries_run_and_step() -> None:
    """Every event carries the run's id and the runtime id of the step that emitted it."""
    result, events = await run_with_all_events(make_agent(stream=True))
    steps = {r.runtime_stage_id: r for r in result.recording.log.records}
    assert events
    for event in events:
        assert event.run_id == result.run_id
        assert event.runtime_stage_id in steps
        assert event.stage == steps[event.runtime_stage_id].stage
    llm = [e for e in events if e.type.endswith(("llm_start", "token", "llm_end"))]
    assert {e.runtime_stage_id.split("#")[0] for e in llm} == {"call_llm"}


async def test_recorded_emits_match_delivered_events() -> None:
    """What listeners heard (tokens aside) is exactly what the steps recorded, in order."""
    result, events = await run_with_all_events(make_agent())
    recorded = [(r.runtime_stage_id, name, payload)
                for r in result.recording.log.records for name, payload in r.emits]
    assert recorded == [(e.runtime_stage_id, e.type, dict(e.payload)) for e in events]


async def test_every_payload_validates_against_its_model() -> None:
    """Every payload emitted in a busy run validates against its catalogue model."""

    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(reason)

    script: list[Any] = [
        ProviderError("busy", provider="primary", status=500),
        {"content": "let me check", "tool_calls": [
            {"name": "weather", "args": {"city": "Paris"}},
            {"name": "weather", "args": {}},
            {"name": "explode", "args": {"reason": "boom"}},
            {"name": "missing", "args": {"x": 1}}]},
        {"tool_calls": [{"name": "weather", "args": {"city": "Rome"}}]},
        "Summary of everything.",
    ]
    primary = with_retry(mock(script=script, name="primary"), sleep=_no_sleep)
    provider = with_fallback(primary, mock(reply="unused", name="spare"))
    agent = make_agent(provider=provider, tools=[weather, explode], limits=Limits(max_iterations=2),
                       stream=True)
    result, events = await run_with_all_events(agent)
    assert result.content == "Summary of everything."
    names = set(short(events))
    assert names >= {"agent.turn_start", "agent.turn_end", "agent.iteration_start",
                     "agent.iteration_end", "agent.route_decided", "agent.budget_exhausted",
                     "stream.llm_start", "stream.llm_end", "stream.token", "stream.tool_start",
                     "stream.tool_end", "validation.args_invalid", "error.retried",
                     "error.recovered"}
    for event in events:
        assert isinstance(event.model(), payload_model(event.type))


# -- isolation -------------------------------------------------------------------------------


async def test_raising_listener_does_not_break_the_run(
        caplog: pytest.LogCaptureFixture) -> None:
    """A listener that raises is recorded in agent.events.errors and logged as a warning (not
    silent); the run and the other listeners go on."""
    agent = make_agent()

    def broken(event: AgentEvent) -> None:
        raise RuntimeError("listener bug")

    agent.on("stream.llm_end", broken)
    after: list[AgentEvent] = []
    agent.on("stream.*", after.append)
    result = await agent.run("Weather?")
    assert result.content == "It is sunny in Paris today."
    assert agent.events.errors == [
        ("agentfootprint.stream.llm_end", "RuntimeError: listener bug")] * 2
    assert short(after).count("stream.llm_end") == 2
    logged = [r for r in caplog.records if r.name == "agentfootprint.events"]
    assert len(logged) == 2 and logged[0].levelname == "WARNING"
    assert "listener bug" in str(logged[0].exc_info[1] if logged[0].exc_info else "")


def test_listening_for_tokens_without_streaming_is_refused() -> None:
    """stream.token only fires for a streaming agent; asking for it otherwise names the fix
    (a domain pattern like 'stream.*' stays allowed: it has other events)."""
    agent = make_agent()
    with pytest.raises(ConfigurationError, match="stream=True"):
        agent.on("stream.token", print)
    agent.on("stream.*", print)


async def test_async_listeners_are_scheduled() -> None:
    """Async listeners are scheduled (not awaited by the run) and settle on drain()."""
    agent = make_agent()
    got: list[str] = []

    async def slow(event: AgentEvent) -> None:
        await asyncio.sleep(0)
        got.append(event.type)

    agent.on("agent.turn_end", slow)
    await agent.run("Weather?")
    await agent.events.drain()
    assert got == ["agentfootprint.agent.turn_end"]


# -- delivery --------------------------------------------------------------------------------


def envelope(events: list[AgentEvent]) -> list[tuple[str, dict[str, Any], str]]:
    return [(e.type, dict(e.payload), e.runtime_stage_id) for e in events]


async def test_deferred_delivery_same_events_same_order() -> None:
    """observer_delivery='deferred' delivers the inline events, in order, before run() returns."""
    _, inline = await run_with_all_events(make_agent())
    _, later = await run_with_all_events(make_agent(tracing=Tracing(observer_delivery="deferred")))
    assert envelope(later) == envelope(inline)
    assert len(inline) == 14


async def test_deferred_delivery_is_off_the_stage() -> None:
    """In deferred mode a listener hears a stage's events after the stage, not inside it."""
    heard: list[str] = []

    @tool(blocking=False)
    def probe(city: str) -> str:
        """Say what has been heard so far (inline: the stage never yields to the loop)."""
        return ",".join(heard)

    script = [{"tool_calls": [{"name": "probe", "args": {"city": "x"}}]}, "done"]
    for mode, expect_tool_start in (("inline", True), ("deferred", False)):
        heard.clear()
        agent = make_agent(provider=mock(script=script), tools=[probe],
                           tracing=Tracing(observer_delivery=mode))
        agent.on("stream.tool_start", lambda e: heard.append("tool_start"))
        result = await agent.run("go")
        seen_by_tool = result.history[-1]["content"]
        assert ("tool_start" in seen_by_tool) is expect_tool_start, mode
        assert heard == ["tool_start"]


async def test_deferred_delivery_keeps_token_order_when_streaming() -> None:
    """With stream=True, deferred delivery keeps tokens between llm_start and llm_end."""
    _, inline = await run_with_all_events(make_agent(stream=True))
    _, later = await run_with_all_events(
        make_agent(stream=True, tracing=Tracing(observer_delivery="deferred")))
    assert "stream.token" in short(inline)
    assert short(later) == short(inline)
    assert envelope(later) == envelope(inline)


async def test_streamed_tokens_join_to_the_answer() -> None:
    """stream=True delivers stream.token events whose contents join to each call's content."""
    agent = make_agent(stream=True)
    result, events = await run_with_all_events(agent)
    tokens = [e for e in events if e.type.endswith("stream.token")]
    assert "".join(t.payload["content"] for t in tokens) == result.content
    assert [t.payload["index"] for t in tokens] == list(range(len(tokens)))
    assert {t.payload["iteration"] for t in tokens} == {2}
    names = short(events)
    first, last = names.index("stream.token"), len(names) - 1 - names[::-1].index("stream.token")
    assert names[first - 1] == "stream.llm_start"
    assert names[last + 1] == "stream.llm_end"


async def test_tokens_are_not_in_the_recording() -> None:
    """Tokens are delivered live but not stored on the step (the answer is, once)."""
    result, _ = await run_with_all_events(make_agent(stream=True))
    emitted = [n for r in result.recording.log.records for n, _ in r.emits]
    assert "agentfootprint.stream.token" not in emitted


async def test_no_tokens_without_stream() -> None:
    """Without stream=True, no stream.token events are delivered."""
    _, events = await run_with_all_events(make_agent())
    assert "stream.token" not in short(events)


class Commits:
    id = "commits"

    def __init__(self) -> None:
        self.records: list[CommitRecord] = []
        self.flow: list[str] = []

    def on_commit(self, event: FlowEvent) -> None:
        self.records.append(event.value)

    def on_run_end(self, event: FlowEvent) -> None:
        self.flow.append("run_end")


async def test_watch_recorders_see_flow_events() -> None:
    """watch=[recorder] receives the run's flow events: every commit, then run_end."""
    commits = Commits()
    agent = make_agent(tracing=Tracing(watch=[commits]))
    result = await agent.run("Weather?")
    assert commits.records == result.recording.log.records
    assert commits.flow == ["run_end"]
