"""Agent: one turn per run, conversation continuation, iteration accounting, the recording."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from agentfootprint import (
    Agent,
    ConfigurationError,
    Limits,
    LLMCall,
    ProviderError,
    RunResult,
    StageError,
    Tracing,
    tool,
)
from agentfootprint.agent._loop import WRAP_UP_INSTRUCTION
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.flow import FlowEvent
from agentfootprint.providers import LLMRequest, MockProvider, mock
from agentfootprint.providers._base import Message, wire_messages

# -- helpers ---------------------------------------------------------------------------------


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 22°C, sunny"


def call(name: str = "weather", **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args or {"city": "Paris"}}]}


def weather_agent(*replies: Any, **options: Any) -> tuple[Agent, MockProvider]:
    provider = mock(script=list(replies))
    options.setdefault("tools", [weather])
    options.setdefault("system", "You answer weather questions.")
    return Agent(provider=provider, model="mock-model", **options), provider


def assert_paired(messages: list[Message]) -> None:
    """Every assistant tool call is answered by one tool message, in order, right after it."""
    answered: set[str] = set()
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            after = messages[i + 1 : i + 1 + len(ids)]
            assert [m["role"] for m in after] == ["tool"] * len(ids), messages
            assert [m.get("tool_call_id") for m in after] == ids, messages
            answered.update(ids)
        if message["role"] == "tool":
            assert message.get("tool_call_id") in answered, messages


def counting_tool() -> tuple[Any, list[str]]:
    ran: list[str] = []

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        ran.append(query)
        return f"found {query}"

    return lookup, ran


# -- one turn per run ------------------------------------------------------------------------


async def test_final_answer_is_not_in_history() -> None:
    """The final answer never enters result.history nor the final state's history."""
    agent, _ = weather_agent(call(), "It is sunny in Paris.")
    result = await agent.run("Weather in Paris?")
    assert result.content == "It is sunny in Paris."
    assert [m["role"] for m in result.history] == ["user", "assistant", "tool"]
    assert all(m["content"] != "It is sunny in Paris." for m in result.history)
    assert result.recording.state["history"] == result.history
    assert result.recording.state["final_content"] == "It is sunny in Paris."


async def test_checkpoint_adds_the_final_answer_back() -> None:
    """checkpoint() is the history plus the final answer as the last assistant message."""
    agent, _ = weather_agent(call(), "It is sunny in Paris.")
    assert agent.checkpoint() is None
    result = await agent.run("Weather in Paris?")
    checkpoint = result.checkpoint
    assert checkpoint == {
        "version": 1, "run_id": result.run_id, "turn": 1,
        "history": [*result.history, {"role": "assistant", "content": "It is sunny in Paris."}],
    }
    assert agent.checkpoint() == checkpoint
    assert json.loads(json.dumps(checkpoint)) == checkpoint
    assert result.history[-1]["role"] == "tool"  # checkpoint() did not touch the result


async def test_follow_up_sends_previous_exchange_plus_new_message() -> None:
    """follow_up() sends the previous turn's whole exchange and then the new user message."""
    agent, provider = weather_agent(call(), "Sunny in Paris.", "You are welcome.")
    first = await agent.run("Weather in Paris?")
    second = await agent.follow_up("Thanks!")
    sent = provider.requests[-1].messages
    assert sent == [*first.checkpoint["history"], {"role": "user", "content": "Thanks!"}]
    assert sent[-2] == {"role": "assistant", "content": "Sunny in Paris."}
    assert second.content == "You are welcome."
    assert second.turn == 2
    assert agent.checkpoint() == second.checkpoint


async def test_run_continue_from_checkpoint() -> None:
    """run(continue_from=cp) continues the conversation cp holds, like follow_up()."""
    agent, _ = weather_agent(call(), "Sunny in Paris.")
    first = await agent.run("Weather in Paris?")
    fresh, provider = weather_agent("Still sunny.")
    result = await fresh.run("And now?", continue_from=first.checkpoint)
    assert provider.requests[0].messages == [
        *first.checkpoint["history"], {"role": "user", "content": "And now?"}]
    assert result.turn == 2
    assert result.history == provider.requests[0].messages


@pytest.mark.parametrize("bad", [
    {},
    "not a checkpoint",
    {"version": 2, "history": []},
    {"version": 1, "history": "hello"},
    {"version": 1},
    {"version": 1, "history": [{"role": "robot", "content": "hi"}]},
    {"version": 1, "history": [{"role": "user", "content": 42}]},
    {"version": 1, "history": ["hi"]},
])
async def test_bad_continue_from_is_a_configuration_error(bad: Any) -> None:
    """A continue_from that is not a checkpoint() raises ConfigurationError before any call."""
    agent, provider = weather_agent("unused")
    with pytest.raises(ConfigurationError, match="continue_from"):
        await agent.run("hi", continue_from=bad)
    assert provider.requests == []


async def test_follow_up_before_any_run_is_a_configuration_error() -> None:
    """follow_up() with no earlier run raises ConfigurationError and calls nothing."""
    agent, provider = weather_agent("unused")
    with pytest.raises(ConfigurationError, match=r"run\(\) first"):
        await agent.follow_up("hello?")
    assert provider.requests == []


async def test_turn_number_counts_user_messages() -> None:
    """The turn is the number of user messages in the history the run starts from."""
    agent, _ = weather_agent("one", "two", "three", "four")
    assert (await agent.run("a")).turn == 1
    assert (await agent.follow_up("b")).turn == 2
    third = await agent.follow_up("c")
    assert third.turn == 3
    assert third.recording.state["turn"] == 3
    assert (await agent.run("fresh")).turn == 1  # run() without continue_from is a new talk


async def test_run_rejects_non_string_message() -> None:
    """run() refuses a message that is not a str."""
    agent, _ = weather_agent("unused")
    with pytest.raises(ConfigurationError, match="str"):
        await agent.run(["hi"])  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [
    lambda: {"limits": Limits(max_iterations=0)}, lambda: {"react_mode": "fancy"},
    lambda: {"tracing": Tracing(observer_delivery="later")},  # type: ignore[arg-type]
    lambda: {"limits": Limits(max_iterations=True)},
    lambda: {"settings": Limits()},
])
def test_bad_agent_options_are_configuration_errors(options: Callable[[], dict[str, Any]]
                                                    ) -> None:
    """Invalid Agent options raise ConfigurationError at construction."""
    with pytest.raises(ConfigurationError):
        Agent(provider=mock(reply="x"), model="m", **options())


def test_a_flat_keyword_still_works_for_one_release_and_says_where_it_went() -> None:
    """Agent(max_iterations=3) warns with the grouped spelling and means limits=Limits(3)."""
    with pytest.warns(DeprecationWarning) as warned:
        agent = Agent(provider=mock(reply="x"), model="m", max_iterations=3, temperature=0.5)
    assert [str(w.message).split(" moved")[0] for w in warned] == [
        "Agent(max_iterations=...)", "Agent(temperature=...)"]
    assert "pass limits=Limits(max_iterations=...)" in str(warned[0].message)
    assert agent.spec.max_iterations == 3 and agent.spec.temperature == 0.5
    with pytest.raises(ConfigurationError, match="both given"):
        Agent(provider=mock(reply="x"), model="m", limits=Limits(), max_iterations=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_iteration'"):
        Agent(provider=mock(reply="x"), model="m", max_iteration=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'act'"):
        LLMCall(provider=mock(reply="x"), model="m", act=[])


def test_agent_requires_provider_and_model() -> None:
    """A non-Provider or an empty model name raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="Provider"):
        Agent(provider="openai", model="m")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="model"):
        Agent(provider=mock(reply="x"), model="")


def _add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize(("options", "message"), [
    ({"tools": tool(_add)}, r"tools=Tool\(.* must be a list, e.g. tools=\[_add\]"),
    ({"tools": "lookup"}, "tools='lookup' must be a list"),
    ({"tools": [_add]}, "tools entry <function _add .* is not a Tool; decorate the function"),
    ({"context": "be nice"}, "context='be nice' must be a list"),
    ({"memory": "chat"}, "memory='chat' must be a list"),
])
def test_list_arguments_refuse_a_string_or_a_single_item(options: dict[str, Any],
                                                          message: str) -> None:
    """A string would otherwise be iterated letter by letter, a lone Tool fail deep inside."""
    with pytest.raises(ConfigurationError, match=message):
        Agent(provider=mock(reply="x"), model="m", **options)


def test_reprs_are_short() -> None:
    """An agent names its model and tools; a result leaves its (large) recording out."""
    agent = Agent(provider=mock(reply="hi"), model="m", tools=[tool(_add)])
    assert repr(agent) == "<Agent 'Agent' model='m' provider='mock' tools=[_add]>"
    shown = repr(agent.run_sync("x"))
    assert shown.startswith("RunResult(run_id=") and "content='hi'" in shown
    assert "recording" not in shown and len(shown) <= 120


def test_the_model_is_named_once_on_the_agent_or_on_the_provider() -> None:
    """Without model= the agent asks for the provider's model; naming two different ones is
    refused (a swapped-in provider must never be asked for 'mock')."""
    pytest.importorskip("openai")
    from agentfootprint.providers import openai

    assert Agent(provider=mock(reply="x")).spec.model == "mock"
    assert Agent(provider=openai(model="gpt-4o", api_key="k")).spec.model == "gpt-4o"
    assert Agent(provider=openai(api_key="k")).spec.model == "gpt-4o-mini"  # its default
    assert Agent(provider=openai(api_key="k"), model="gpt-4.1").spec.model == "gpt-4.1"
    with pytest.raises(ConfigurationError, match="names model='mock' but its provider was "
                                                 "built with model='gpt-4o-mini'"):
        Agent(provider=openai(model="gpt-4o-mini", api_key="k"), model="mock")
    with pytest.raises(ConfigurationError, match="name the model once"):
        LLMCall(provider=openai(model="a", api_key="k"), model="b")


# -- iteration accounting (spec §4.6) --------------------------------------------------------


def always_tool_script(n: int) -> list[dict[str, Any]]:
    """n + 1 replies that all ask for a tool, each with its own content."""
    return [{"content": f"answer {k}",
             "tool_calls": [{"name": "lookup", "args": {"query": f"q{k}"}}]}
            for k in range(1, n + 2)]


@pytest.mark.parametrize("n", [1, 2, 4])
async def test_budget_runs_calls_1_to_n_then_one_wrap_up_without_tools(n: int) -> None:
    """With max_iterations=N and a model always asking for tools: N tool calls, then a wrap-up."""
    lookup, ran = counting_tool()
    provider = mock(script=always_tool_script(n))
    agent = Agent(provider=provider, model="m", tools=[lookup], limits=Limits(max_iterations=n))
    result = await agent.run("go")
    requests = provider.requests
    assert len(requests) == n + 1
    assert all(r.tools == [lookup.schema()] for r in requests[:n])
    assert requests[n].tools == []
    assert requests[n].messages[-1] == {"role": "user", "content": WRAP_UP_INSTRUCTION}
    assert WRAP_UP_INSTRUCTION not in [m["content"] for r in requests[:n] for m in r.messages]
    assert result.content == f"answer {n + 1}"
    assert result.stopped_early == "max-iterations"
    assert ran == [f"q{k}" for k in range(1, n)]
    assert result.iterations == n + 1
    for request in requests:
        assert_paired(request.messages)
    assert_paired(result.history)
    assert wire_messages(result.history) == requests[n].messages
    assert result.history[-1]["injected_by"] == "wrap-up"


async def test_wrap_up_disabled_makes_no_extra_call() -> None:
    """wrap_up=False: N calls only, and the last response's content is the answer."""
    lookup, ran = counting_tool()
    provider = mock(script=always_tool_script(3))
    agent = Agent(provider=provider, model="m", tools=[lookup],
                  limits=Limits(max_iterations=3, wrap_up=False))
    result = await agent.run("go")
    assert len(provider.requests) == 3
    assert all(r.tools for r in provider.requests)
    assert result.content == "answer 3"
    assert result.stopped_early == "max-iterations"
    assert ran == ["q1", "q2"]
    for request in provider.requests:
        assert_paired(request.messages)
    assert_paired(result.history)


async def test_agent_without_tools_never_wraps_up() -> None:
    """An agent with no tools is cut short at the budget, with no wrap-up call."""
    provider = mock(script=always_tool_script(2))
    agent = Agent(provider=provider, model="m", limits=Limits(max_iterations=2))
    events: list[AgentEvent] = []
    agent.on("agent.budget_exhausted", events.append)
    result = await agent.run("go")
    assert len(provider.requests) == 2
    assert all(WRAP_UP_INSTRUCTION not in [m["content"] for m in r.messages]
               for r in provider.requests)
    assert result.content == "answer 2"
    assert result.stopped_early == "max-iterations"
    assert [e.payload["action"] for e in events] == ["cut-short"]


async def test_answer_within_budget_is_not_stopped_early() -> None:
    """A model that answers within the budget gets no wrap-up and stopped_early None."""
    lookup, _ = counting_tool()
    provider = mock(script=[call("lookup", query="x"), "done"])
    agent = Agent(provider=provider, model="m", tools=[lookup], limits=Limits(max_iterations=2))
    events: list[AgentEvent] = []
    agent.on("agent.budget_exhausted", events.append)
    result = await agent.run("go")
    assert result.content == "done"
    assert result.stopped_early is None
    assert len(provider.requests) == 2
    assert events == []


async def test_budget_exhausted_fires_once_with_wrapped_up_action() -> None:
    """A wrapped-up turn emits agent.budget_exhausted exactly once, with action 'wrapped-up'."""
    lookup, _ = counting_tool()
    agent = Agent(provider=mock(script=always_tool_script(3)), model="m", tools=[lookup],
                  limits=Limits(max_iterations=3))
    events: list[AgentEvent] = []
    agent.on("agent.budget_exhausted", events.append)
    await agent.run("go")
    assert [dict(e.payload) for e in events] == [{
        "reason": "max-iterations", "iteration": 3, "limit": 3, "pending_tool_calls": 1,
        "action": "wrapped-up"}]


async def test_budget_exhausted_after_plain_wrap_up_answer_fires_once() -> None:
    """A wrap-up answered with plain text still gives exactly one budget_exhausted event."""
    lookup, _ = counting_tool()
    script: list[Any] = [call("lookup", query="a"), call("lookup", query="b"), "Summary."]
    agent = Agent(provider=mock(script=script), model="m", tools=[lookup],
                  limits=Limits(max_iterations=2))
    events: list[AgentEvent] = []
    agent.on("agent.budget_exhausted", events.append)
    result = await agent.run("go")
    assert result.content == "Summary."
    assert result.stopped_early == "max-iterations"
    assert [e.payload["action"] for e in events] == ["wrapped-up"]


async def test_budget_exhausted_cut_short_action_without_wrap_up() -> None:
    """wrap_up=False emits agent.budget_exhausted once with action 'cut-short'."""
    lookup, _ = counting_tool()
    agent = Agent(provider=mock(script=always_tool_script(2)), model="m", tools=[lookup],
                  limits=Limits(max_iterations=2, wrap_up=False))
    events: list[AgentEvent] = []
    agent.on("agent.budget_exhausted", events.append)
    await agent.run("go")
    assert [(e.payload["action"], e.payload["iteration"]) for e in events] == [("cut-short", 2)]


# -- the recording ---------------------------------------------------------------------------


async def test_one_tool_run_walks_the_expected_stages() -> None:
    """A one-tool run records seed → slots → call → route → tools, then again → finalize."""
    agent, _ = weather_agent(call(), "Sunny.")
    result = await agent.run("Weather?")
    loop = ["injections", "system_slot", "messages_slot", "tools_slot", "call_llm", "route"]
    assert [r.stage_id for r in result.recording.log.records] == [
        "seed", *loop, "tool_calls", *loop, "finalize"]


async def test_wrap_up_run_walks_the_wrap_up_stage() -> None:
    """A budget-cut run records the wrap_up stage between the last route and the final call."""
    lookup, _ = counting_tool()
    agent = Agent(provider=mock(script=always_tool_script(1)), model="m", tools=[lookup],
                  limits=Limits(max_iterations=1))
    result = await agent.run("go")
    loop = ["injections", "system_slot", "messages_slot", "tools_slot", "call_llm", "route"]
    assert [r.stage_id for r in result.recording.log.records] == [
        "seed", *loop, "wrap_up", *loop, "finalize"]


async def test_runtime_ids_climb() -> None:
    """Runtime stage ids are stage_id#N with N counting 0, 1, 2, … over the whole run."""
    agent, _ = weather_agent(call(), call(), "Sunny.")
    result = await agent.run("Weather?")
    records = result.recording.log.records
    assert [r.runtime_stage_id for r in records] == [
        f"{r.stage_id}#{i}" for i, r in enumerate(records)]


def rebuilt_requests(result: RunResult) -> list[dict[str, Any]]:
    """What each LLM call sent, rebuilt from the commit log alone."""
    log = result.recording.log
    out = []
    for record in log.records:
        if record.stage_id != "call_llm":
            continue
        before = record.idx - 1
        wrapped = log.value_at("wrap_up_asked", before, default=False)
        out.append({
            "messages": wire_messages(log.value_at("history", before)),
            "system": log.value_at("system_prompt", before, default="") or None,
            "tools": [] if wrapped else log.value_at("tool_schemas", before, default=[]),
        })
    return out


async def test_each_request_can_be_rebuilt_from_the_log() -> None:
    """For every call_llm record, history/system_prompt/tool_schemas before it equal the request."""
    lookup, _ = counting_tool()
    provider = mock(script=always_tool_script(3))
    agent = Agent(provider=provider, model="m", system="Be brief.", tools=[lookup, weather],
                  limits=Limits(max_iterations=3))
    result = await agent.run("go")
    sent = [{"messages": r.messages, "system": r.system, "tools": r.tools}
            for r in provider.requests]
    assert len(sent) == 4
    assert rebuilt_requests(result) == sent
    assert sent[0]["system"] == "Be brief."


async def test_rebuilt_request_survives_json_round_trip() -> None:
    """The log rebuilt from its JSON gives the same requests (another process can explain it)."""
    from agentfootprint.flow._commitlog import CommitLog

    agent, provider = weather_agent(call(), "Sunny.")
    result = await agent.run("Weather?")
    log = CommitLog.from_json(json.loads(json.dumps(result.recording.log.to_json())))
    calls = [r for r in log.records if r.stage_id == "call_llm"]
    assert [log.value_at("history", r.idx - 1) for r in calls] == [
        r.messages for r in provider.requests]


async def _recording_bytes(n: int) -> float:
    lookup, _ = counting_tool()
    script: list[Any] = [
        {"content": f"step {k:03d}",
         "tool_calls": [{"name": "lookup", "args": {"query": f"q{k:03d}"}}]}
        for k in range(n)] + ["done"]
    agent = Agent(provider=mock(script=script), model="m", system="sys", tools=[lookup],
                  limits=Limits(max_iterations=n + 1))
    result = await agent.run("go")
    assert result.iterations == n + 1
    return len(json.dumps(result.recording.log.to_json())) / n


async def test_recording_grows_linearly() -> None:
    """Recording bytes per iteration at N=50 are within 20% of those at N=10 (delta-encoded)."""
    small = await _recording_bytes(10)
    large = await _recording_bytes(50)
    assert abs(large - small) / small < 0.20, (small, large)


async def test_narrative_names_the_route_choices() -> None:
    """The narrative says the route chose ToolCalls and then Finalize."""
    agent, _ = weather_agent(call(), "Sunny.")
    result = await agent.run("Weather?")
    text = result.narrative()
    assert "chose ToolCalls" in text
    assert "chose Finalize" in text
    assert text.index("chose ToolCalls") < text.index("chose Finalize")


async def test_route_decisions_carry_evidence() -> None:
    """Each route record holds the chosen branch and the evidence it was chosen on."""
    agent, _ = weather_agent(call(), "Sunny.")
    result = await agent.run("Weather?")
    routes = [r for r in result.recording.log.records if r.stage_id == "route"]
    assert [r.decision["chosen"] for r in routes] == ["tool-calls", "final"]  # type: ignore[index]
    inputs = routes[0].decision["evidence"]["rules"][0]["inputs"]  # type: ignore[index]
    assert {"key": "iteration", "value": "1 of 10"} in inputs


async def test_usage_accumulates_over_calls() -> None:
    """input_tokens/output_tokens are the sums of every call's reported usage."""
    script: list[Any] = [
        {**call(), "usage": {"input": 10, "output": 3}},
        {"content": "Sunny.", "usage": {"input": 20, "output": 5}},
    ]
    agent, _ = weather_agent(*script)
    result = await agent.run("Weather?")
    assert (result.input_tokens, result.output_tokens) == (30, 8)


# -- classic vs dynamic ----------------------------------------------------------------------


class Writes:
    id = "writes"

    def __init__(self) -> None:
        self.events: list[FlowEvent] = []

    def on_write(self, event: FlowEvent) -> None:
        self.events.append(event)


async def _static_run(mode: str) -> tuple[RunResult, list[LLMRequest], Writes]:
    lookup, _ = counting_tool()
    writes = Writes()
    provider = mock(script=[call("lookup", query="a"), call("weather", city="Oslo"), "done"])
    agent = Agent(provider=provider, model="m", system="sys", tools=[lookup, weather],
                  react_mode=mode, tracing=Tracing(watch=[writes]))  # type: ignore[arg-type]
    return await agent.run("go"), provider.requests, writes


async def test_classic_and_dynamic_agree_for_a_static_agent() -> None:
    """Classic and dynamic react_mode give identical answers and requests for a static agent."""
    classic, classic_requests, _ = await _static_run("classic")
    dynamic, dynamic_requests, _ = await _static_run("dynamic")
    assert classic.content == dynamic.content == "done"
    assert [r.model_dump() for r in classic_requests] == [r.model_dump() for r in dynamic_requests]
    assert len(classic_requests) == 3


async def test_classic_mode_assembles_slots_once() -> None:
    """In classic mode system_slot/tools_slot write only in iteration 1; later records are empty."""
    classic, _, writes = await _static_run("classic")
    slot_writes = [e.runtime_stage_id for e in writes.events
                   if e.stage_id in ("system_slot", "tools_slot")]
    assert slot_writes == ["system_slot#2", "tools_slot#4"]
    later = [r for r in classic.recording.log.records
             if r.stage_id in ("system_slot", "tools_slot") and r.loop_pass > 0]
    assert len(later) == 4
    assert all(r.changes == () for r in later)
    _, _, dynamic_writes = await _static_run("dynamic")  # the contrast: dynamic re-assembles
    assert len([e for e in dynamic_writes.events if e.stage_id == "system_slot"]) == 3


# -- provider failures -----------------------------------------------------------------------


async def test_provider_error_surfaces_with_status_and_partial_recording() -> None:
    """A ProviderError from the provider surfaces as itself (not StageError) with status and run."""
    error = ProviderError("rate limited", provider="mock", status=429)
    agent, _ = weather_agent(call(), error)
    with pytest.raises(ProviderError) as caught:
        await agent.run("Weather?")
    exc = caught.value
    assert exc is error
    assert not isinstance(exc, StageError)
    assert exc.status == 429
    assert exc.run is not None
    assert exc.run.status == "failed"
    records = exc.run.log.records
    assert records[-1].stage_id == "call_llm"
    assert records[-1].error == "ProviderError: rate limited"
    assert [r.stage_id for r in records].count("tool_calls") == 1
    assert agent.checkpoint() is None  # a failed run is not a finished turn


async def test_script_exhaustion_inside_agent_is_a_configuration_error() -> None:
    """A mock that runs out of replies inside a run raises ConfigurationError naming the fix."""
    agent, _ = weather_agent(call())
    with pytest.raises(ConfigurationError, match="max_iterations"):
        await agent.run("Weather?")


# -- run_sync --------------------------------------------------------------------------------


def test_run_sync_from_sync_code() -> None:
    """run_sync and follow_up_sync work from plain synchronous code."""
    agent, provider = weather_agent(call(), "Sunny.", "Bye.")
    result = agent.run_sync("Weather?")
    assert result.content == "Sunny."
    assert agent.follow_up_sync("Thanks").content == "Bye."
    assert provider.requests[-1].messages[-1] == {"role": "user", "content": "Thanks"}


async def test_run_sync_works_inside_a_running_loop() -> None:
    """run_sync inside a running event loop (a notebook cell) runs the turn and returns it
    (tests/agent/test_run_sync_in_loop.py pins the details)."""
    agent, provider = weather_agent("Sunny.")
    assert agent.run_sync("hi").content == "Sunny."
    assert len(provider.requests) == 1


async def test_one_agent_serves_concurrent_runs() -> None:
    """Two concurrent runs of one agent keep their own histories and results."""
    import asyncio

    async def respond(request: LLMRequest) -> str:
        await asyncio.sleep(0)
        return "re: " + request.messages[-1]["content"]

    agent = Agent(provider=mock(respond=respond), model="m")
    first, second = await asyncio.gather(agent.run("one"), agent.run("two"))
    assert (first.content, second.content) == ("re: one", "re: two")
    assert first.run_id != second.run_id
    assert re.fullmatch(r"[0-9a-f]{32}", first.run_id)


async def test_wrap_up_instruction_does_not_count_as_a_user_turn() -> None:
    """The wrap-up message is tagged, so the turn after a wrapped-up turn is turn 2, not 3."""
    lookup, _ = counting_tool()
    provider = mock(script=[*always_tool_script(2), "second answer"])
    agent = Agent(provider=provider, model="m", tools=[lookup], limits=Limits(max_iterations=2))
    first = await agent.run("go")
    assert first.stopped_early == "max-iterations"
    second = await agent.follow_up("and now?")
    assert (first.turn, second.turn) == (1, 2)
    assert all("injected_by" not in m for m in provider.requests[-1].messages)
