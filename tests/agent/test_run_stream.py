"""agent.run_stream: the run's typed events in order, cancelled cleanly, failing loudly."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, LLMCall, Tracing, define_fact, tool
from agentfootprint.errors import ConfigurationError, ProviderError, RunError
from agentfootprint.events import (
    InjectionFired,
    RunFinished,
    StreamEvent,
    TextDelta,
    ToolCalled,
    ToolReturned,
)
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory, window
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest, LLMResponse, Provider, StreamChunk
from agentfootprint.runs import RunStore


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 22°C, sunny"


def weather_agent(**options: Any) -> Agent:
    return Agent(
        provider=mock(script=[
            {"tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
            "It is 22°C and sunny in Paris.",
        ]),
        model="m", system="You answer weather questions.", tools=[weather],
        context=[define_fact(id="units", data="Use Celsius.")], **options)


async def read_all(stream: Any) -> list[StreamEvent]:
    async with stream as run:
        return [event async for event in run]


async def test_events_arrive_in_order_and_match_the_recording() -> None:
    """Injection, tool call, tool result, the answer's tokens, then RunFinished; every event but
    the tokens is the very emit its step recorded, in the recording's order."""
    agent = weather_agent()
    stream = agent.run_stream("Weather in Paris?")
    events = await read_all(stream)
    result = stream.result
    assert [e.type for e in events[:4]] == ["injection", "tool_call", "tool_result", "injection"]
    assert all(isinstance(e, TextDelta) for e in events[4:-1])
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == result.content
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert (final.run_id, final.status, final.content, final.turn) == (
        result.run_id, "done", "It is 22°C and sunny in Paris.", 1)
    assert {e.run_id for e in events} == {result.run_id}
    call, returned = events[1], events[2]
    assert isinstance(call, ToolCalled) and isinstance(returned, ToolReturned)
    assert (call.tool_name, call.args, returned.result) == (
        "weather", {"city": "Paris"}, "Paris: 22°C, sunny")
    streamed = [(type(e).catalogue, e.step) for e in events
                if not isinstance(e, TextDelta | RunFinished)]
    recorded = [(name, record.runtime_stage_id)
                for record in result.recording.log.records for name, _ in record.emits
                if name in {c for c, _ in streamed}]
    assert streamed == recorded
    fired = events[0]
    assert isinstance(fired, InjectionFired)
    record = result.recording.log.find(fired.step)
    assert record is not None
    assert ("agentfootprint.context.injected",
            {"injection_id": "units", "slot": "system", "trigger": "always", "iteration": 1}
            ) in record.emits


async def test_tokens_stream_whatever_stream_says() -> None:
    """stream=False still streams tokens to run_stream; with stream=True the callback API hears
    the same tokens as the stream, once each."""
    quiet = await read_all(LLMCall(provider=mock(reply="one two three"), model="m")
                           .run_stream("count"))
    assert [e.text for e in quiet if isinstance(e, TextDelta)] == ["one ", "two ", "three"]
    loud = LLMCall(provider=mock(reply="one two three"), model="m", stream=True)
    heard: list[AgentEvent] = []
    loud.on("stream.token", heard.append)
    events = await read_all(loud.run_stream("count"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        e.payload["content"] for e in heard] == ["one ", "two ", "three"]


async def test_run_options_pass_through_and_json_round_trips() -> None:
    """run_stream takes run()'s options (run_id here); every event serialises to JSON and an SSE
    frame named by its type."""
    events = await read_all(weather_agent().run_stream("Weather?", run_id="run-stream-1"))
    assert events[-1].run_id == "run-stream-1"
    for event in events:
        assert type(event).model_validate_json(event.model_dump_json()) == event
        assert event.sse().startswith(f"event: {event.type}\ndata: {{")
        assert event.sse().endswith("}\n\n")


async def test_an_error_is_raised_after_the_events_before_it() -> None:
    """The model fails on its second call: the tool call and result arrive, then the error."""
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]},
        ProviderError("down", provider="mock", status=503)]), model="m", tools=[weather])
    seen: list[str] = []
    async with agent.run_stream("Weather in Oslo?") as run:
        with pytest.raises(ProviderError, match="down") as raised:
            async for event in run:
                seen.append(event.type)
        assert seen == ["tool_call", "tool_result"]
        with pytest.raises(ProviderError) as again:
            _ = run.result
        assert again.value is raised.value


class Blocking:
    """A tool that waits until it is cancelled (and says so)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    def tool(self) -> Any:
        @tool
        async def slow_lookup(order_id: str) -> str:
            """Look an order up (slowly)."""
            self.started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return "never"

        return slow_lookup


def _claims(path: Path) -> dict[int, bool]:
    with sqlite3.connect(path) as db:
        claims = [t for (t,) in db.execute("SELECT turn FROM af_memory_turn_claims")]
        held = {t for (t,) in db.execute("SELECT turn FROM af_memory_turn_holders")}
    return {t: t in held for t in claims}


async def test_leaving_early_cancels_the_run_ends_its_claim_and_records_it(
        tmp_path: Path) -> None:
    """A reader that leaves at the tool call cancels the run inside the tool: no task is left,
    the turn claim is given back (the next run is turn 1 again), and the run store keeps the
    run, as failed, with the tool call in its recording."""
    blocking = Blocking()
    identity = MemoryIdentity("stream-cancel")
    with SQLiteStore(tmp_path / "m.db") as memory, RunStore(tmp_path / "runs.db") as runs:
        chat = define_memory(id="chat", type="episodic", strategy=window(5), store=memory)
        agent = Agent(provider=mock(script=[
            {"tool_calls": [{"name": "slow_lookup", "args": {"order_id": "A-1"}}]}, "done"]),
            model="m", tools=[blocking.tool()], memory=[chat], identity=identity,
            tracing=Tracing(run_store=runs))
        before = asyncio.all_tasks()
        async with agent.run_stream("Where is A-1?") as run:
            async for event in run:
                if isinstance(event, ToolCalled):
                    await blocking.started.wait()
                    break
        assert blocking.cancelled
        assert asyncio.all_tasks() == before
        assert _claims(tmp_path / "m.db") == {}
        with pytest.raises(RunError, match="cancelled"):
            _ = run.result
        assert run.run_id is not None
        stored = runs.load(run.run_id)
        assert stored.status == "failed"
        emitted = [name for record in stored.commit_log().records for name, _ in record.emits]
        assert "agentfootprint.stream.tool_start" in emitted
        again = await Agent(provider=mock(reply="ok"), model="m", memory=[chat],
                            identity=identity).run("hi")
        assert again.turn == 1


class Counting(Provider):
    """Streams 100 tokens, counting how many it has handed over."""

    name = "counting"
    model = "m"
    streams = True

    def __init__(self) -> None:
        self.yielded = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(content="w " * 100)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        for index in range(100):
            self.yielded += 1
            yield StreamChunk(index=index, content="w ")
            await asyncio.sleep(0)
        yield StreamChunk(index=100, done=True, response=LLMResponse(content="w " * 100))


async def test_a_slow_reader_holds_the_model_stream_back() -> None:
    """With max_buffered=4 and nobody reading, the run stops pulling tokens at the bound; read
    on and all 100 arrive, in order."""
    provider = Counting()
    async with LLMCall(provider=provider).run_stream("go", max_buffered=4) as run:
        for _ in range(50):
            await asyncio.sleep(0)
        assert 4 <= provider.yielded <= 5
        events = [event async for event in run]
    assert [e.index for e in events if isinstance(e, TextDelta)] == list(range(100))
    assert isinstance(events[-1], RunFinished)


async def test_a_paused_run_ends_its_stream_with_status_paused() -> None:
    """A check-in pauses the run: the stream ends with RunFinished(status='paused')."""
    @tool(check_in=lambda args: True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "refund", "args": {"order_id": "A-9"}}]}, "ok"]),
        model="m", tools=[refund])
    events = await read_all(agent.run_stream("Refund A-9"))
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.status == "paused"
    assert final.pause is not None and final.pause["tool_name"] == "refund"


async def test_an_agent_used_as_a_tool_is_not_streamed_itself() -> None:
    """The inner agent's tokens and events stay out; its call and result are in."""
    inner = Agent(provider=mock(reply="inner answer"), model="m", name="helper")
    outer = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "ask_helper", "args": {"request": "hi"}}]}, "outer answer"]),
        model="m", tools=[inner.as_tool(name="ask_helper", description="Ask the helper.")])
    stream = outer.run_stream("go")
    events = await read_all(stream)
    assert {e.run_id for e in events} == {stream.result.run_id}
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "outer answer"
    assert [e.type for e in events if not isinstance(e, TextDelta)] == [
        "tool_call", "tool_result", "result"]


async def test_misuse_is_refused_with_the_fix() -> None:
    """Iterating without `async with`, entering twice, and reading result early say what to do."""
    stream = weather_agent().run_stream("Weather?")
    with pytest.raises(ConfigurationError, match="async with"):
        await stream.__anext__()
    async with stream as run:
        with pytest.raises(ConfigurationError, match="read the events to the end"):
            _ = run.result
        with pytest.raises(ConfigurationError, match="entered once"):
            await run.__aenter__()
        assert [e async for e in run][-1].type == "result"
    with pytest.raises(ConfigurationError, match="max_buffered"):
        weather_agent().run_stream("x", max_buffered=0)


async def test_a_composition_streams_every_member() -> None:
    """A Sequence streams its members' events in order, under its one run id."""
    from agentfootprint.compose import Sequence

    pipeline = Sequence(("draft", LLMCall(provider=mock(reply="first draft"), model="m")),
                        ("check", weather_agent()))
    stream = pipeline.run_stream("Weather?")
    events = await read_all(stream)
    assert {e.run_id for e in events} == {stream.result.run_id}
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "first draft" + "It is 22°C and sunny in Paris."
    assert [e.type for e in events if not isinstance(e, TextDelta)] == [
        "injection", "tool_call", "tool_result", "injection", "result"]
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.content == stream.result.content == "It is 22°C and sunny in Paris."


class Restarting(Provider):
    """Streams a piece, then a retry's restart marker, then the whole answer."""

    name = "restarting"
    model = "m"
    streams = True

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(content="whole answer")

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(index=0, content="part")
        yield StreamChunk(index=1, restart=True)
        yield StreamChunk(index=2, content="whole answer")
        yield StreamChunk(index=3, done=True, response=LLMResponse(content="whole answer"))


async def test_a_retried_stream_says_its_earlier_text_is_void() -> None:
    """A restart marker arrives as TextDelta(restart=True); the text after it is the answer."""
    events = await read_all(LLMCall(provider=Restarting()).run_stream("go"))
    deltas = [(e.text, e.restart) for e in events if isinstance(e, TextDelta)]
    assert deltas == [("part", False), ("", True), ("whole answer", False)]
    final = events[-1]
    assert isinstance(final, RunFinished) and final.content == "whole answer"


async def test_the_typed_output_travels_in_the_final_event() -> None:
    """With output_type, RunFinished.output is the validated model, and JSON on the wire."""
    from pydantic import BaseModel

    class Decision(BaseModel):
        approved: bool
        reason: str

    agent = Agent(provider=mock(script=['{"approved": true, "reason": "within 30 days"}']),
                  model="m", output_type=Decision)
    events = await read_all(agent.run_stream("Refund A-1001?"))
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.output == Decision(approved=True, reason="within 30 days")
    assert '"output":{"approved":true,"reason":"within 30 days"}' in final.model_dump_json()


async def test_concurrent_streams_of_one_agent_keep_their_own_events() -> None:
    """Two streams of the same agent at once: each gets only its own run's events."""
    @tool
    async def echo(text: str) -> str:
        """Echo the text back."""
        await asyncio.sleep(0.01)
        return text

    agent = Agent(provider=mock(respond=lambda request: (
        {"tool_calls": [{"name": "echo", "args": {"text": request.messages[0]["content"]}}]}
        if len(request.messages) == 1 else f"done {request.messages[0]['content']}")),
        model="m", tools=[echo])
    one, two = agent.run_stream("one"), agent.run_stream("two")
    first, second = await asyncio.gather(read_all(one), read_all(two))
    for stream, events, word in ((one, first, "one"), (two, second, "two")):
        assert {e.run_id for e in events} == {stream.result.run_id}
        assert [e.args for e in events if isinstance(e, ToolCalled)] == [{"text": word}]
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == f"done {word}"


async def test_deferred_listener_delivery_streams_the_same_events() -> None:
    """observer_delivery='deferred' changes when agent.on listeners hear events, not the stream."""
    inline = await read_all(weather_agent().run_stream("Weather?", run_id="r1"))
    deferred = await read_all(weather_agent(tracing=Tracing(observer_delivery="deferred"))
                              .run_stream("Weather?", run_id="r1"))
    assert [e.model_dump() for e in deferred] == [e.model_dump() for e in inline]
