"""Retry, fallback and circuit breaking: complete and stream, alone and inside an Agent."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentfootprint import Agent, CircuitOpenError, ConfigurationError, ProviderError, StageError
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.providers import (
    LLMRequest,
    LLMResponse,
    Provider,
    mock,
    with_circuit_breaker,
    with_fallback,
    with_retry,
)
from agentfootprint.providers._base import StreamChunk
from agentfootprint.providers._resilience import resilience_reports

# -- helpers ---------------------------------------------------------------------------------

REQUEST = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}])


def err(status: int | None, text: str = "failed") -> ProviderError:
    return ProviderError(f"{text} ({status})", provider="inner", status=status)


@contextlib.contextmanager
def reports() -> Iterator[list[dict[str, Any]]]:
    """Collect what the resilience decorators report in this context."""
    found: list[dict[str, Any]] = []
    token = resilience_reports.set(found.append)
    try:
        yield found
    finally:
        resilience_reports.reset(token)


class Sleeps:
    """An injected sleep that records its delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class Streamer(Provider):
    """A streaming provider driven by a plan, one entry per call.

    ``("ok", text)`` streams the words then the terminal chunk; ``("before", exc)`` raises before
    any chunk; ``("after", exc)`` yields one chunk then raises. ``complete`` must never be used.
    """

    streams = True

    def __init__(self, *plan: tuple[str, Any], name: str = "streamer") -> None:
        self.name = name
        self.plan = list(plan)
        self.calls = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        raise AssertionError("complete() must not be called on a streamed call")

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        kind, value = self.plan[self.calls]
        self.calls += 1
        if kind == "before":
            raise value
        if kind == "after":
            yield StreamChunk(index=0, content="partial ")
            raise value
        words = value.split(" ")
        for i, word in enumerate(words):
            yield StreamChunk(index=i, content=word + (" " if i < len(words) - 1 else ""))
        yield StreamChunk(index=len(words), done=True, response=LLMResponse(content=value))


async def collect(provider: Provider) -> list[StreamChunk]:
    return [chunk async for chunk in provider.stream(REQUEST)]


# -- with_retry: complete --------------------------------------------------------------------


async def test_retry_recovers_from_500_and_429_with_backoff() -> None:
    """500 and 429 are retried with exponential backoff delays passed to the injected sleep."""
    inner = mock(script=[err(500), err(429), "ok"])
    sleep = Sleeps()
    provider = with_retry(inner, sleep=sleep)
    with reports() as found:
        response = await provider.complete(REQUEST)
    assert response.content == "ok"
    assert len(inner.requests) == 3
    assert sleep.delays == [0.2, 0.4]
    assert [r["kind"] for r in found] == ["retried", "retried", "recovered"]
    assert [(r["attempt"], r["status"], r["backoff"]) for r in found[:2]] == [
        (2, 500, 0.2), (3, 429, 0.4)]
    assert found[0]["max_attempts"] == 3
    assert "500" in found[0]["error"]
    assert found[2]["attempt"] == 3 and found[2]["duration"] >= 0
    assert provider.name == "mock+retry"


async def test_retry_does_not_retry_400() -> None:
    """A 400 is raised at once: one request, no sleep, no report."""
    inner = mock(script=[err(400), "never"])
    sleep = Sleeps()
    with reports() as found, pytest.raises(ProviderError) as caught:
        await with_retry(inner, sleep=sleep).complete(REQUEST)
    assert caught.value.status == 400
    assert len(inner.requests) == 1
    assert sleep.delays == []
    assert found == []


async def test_retry_gives_up_after_max_attempts() -> None:
    """After max_attempts failures the last error is raised."""
    inner = mock(script=[err(503, "a"), err(503, "b"), err(503, "c")])
    sleep = Sleeps()
    with pytest.raises(ProviderError, match="c"):
        await with_retry(inner, max_attempts=3, sleep=sleep).complete(REQUEST)
    assert len(inner.requests) == 3
    assert len(sleep.delays) == 2


async def test_retry_delays_are_capped() -> None:
    """Delays grow by the backoff factor and never exceed max_delay."""
    inner = mock(script=[err(500)] * 4 + ["ok"])
    sleep = Sleeps()
    await with_retry(inner, max_attempts=5, initial_delay=1, backoff=10, max_delay=5,
                     sleep=sleep).complete(REQUEST)
    assert sleep.delays == [1, 5, 5, 5]


async def test_retry_predicates() -> None:
    """Network errors are retried by default; should_retry= replaces the default."""
    inner = mock(script=[ConnectionError("reset"), "ok"])
    assert (await with_retry(inner, sleep=Sleeps()).complete(REQUEST)).content == "ok"
    never = mock(script=[err(500), "ok"])
    with pytest.raises(ProviderError):
        await with_retry(never, should_retry=lambda e: False, sleep=Sleeps()).complete(REQUEST)
    with pytest.raises(ValueError, match="bug"):  # a programming error is not retried
        await with_retry(mock(script=[ValueError("bug")]), sleep=Sleeps()).complete(REQUEST)


def test_retry_refuses_zero_attempts() -> None:
    """with_retry(max_attempts=0) is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="max_attempts"):
        with_retry(mock(), max_attempts=0)


# -- with_retry: stream ----------------------------------------------------------------------


async def test_retry_stream_retries_before_the_first_chunk() -> None:
    """A stream failing before its first chunk is retried; the chunks come from the retry."""
    inner = Streamer(("before", err(503)), ("ok", "fine now"))
    sleep = Sleeps()
    with reports() as found:
        chunks = await collect(with_retry(inner, sleep=sleep))
    assert inner.calls == 2
    assert "".join(c.content for c in chunks) == "fine now"
    assert chunks[-1].done
    assert sleep.delays == [0.2]
    assert [r["kind"] for r in found] == ["retried", "recovered"]


async def test_retry_stream_does_not_retry_after_a_chunk() -> None:
    """A stream failing after a chunk was yielded raises; it is never retried."""
    inner = Streamer(("after", err(503)), ("ok", "never used"))
    sleep = Sleeps()
    got: list[StreamChunk] = []
    with reports() as found, pytest.raises(ProviderError):
        async for chunk in with_retry(inner, sleep=sleep).stream(REQUEST):
            got.append(chunk)
    assert [c.content for c in got] == ["partial "]
    assert inner.calls == 1
    assert sleep.delays == []
    assert found == []


async def test_retry_stream_does_not_retry_400() -> None:
    """A stream failing with 400 before any chunk is not retried."""
    inner = Streamer(("before", err(400)), ("ok", "never"))
    with pytest.raises(ProviderError):
        await collect(with_retry(inner, sleep=Sleeps()))
    assert inner.calls == 1


async def test_retry_works_for_streamed_agent() -> None:
    """Inside Agent(stream=True), a stream failing before its first chunk is retried."""
    inner = Streamer(("before", err(502)), ("ok", "The answer is 42"))
    agent = Agent(provider=with_retry(inner, sleep=Sleeps()), model="m", stream=True)
    tokens: list[AgentEvent] = []
    agent.on("stream.token", tokens.append)
    result = await agent.run("question")
    assert result.content == "The answer is 42"
    assert inner.calls == 2
    assert "".join(t.payload["content"] for t in tokens) == "The answer is 42"
    [llm] = [r for r in result.recording.log.records if r.stage_id == "call_llm"]
    emitted = [name for name, _ in llm.emits]
    assert "agentfootprint.error.retried" in emitted
    assert "agentfootprint.error.recovered" in emitted


async def test_streamed_agent_does_not_retry_after_first_token() -> None:
    """Inside Agent(stream=True), a failure after a token surfaces as ProviderError, unretried."""
    inner = Streamer(("after", err(503, "mid-stream")), ("ok", "never"))
    agent = Agent(provider=with_retry(inner, sleep=Sleeps()), model="m", stream=True)
    tokens: list[AgentEvent] = []
    agent.on("stream.token", tokens.append)
    with pytest.raises(ProviderError, match="mid-stream") as caught:
        await agent.run("question")
    assert not isinstance(caught.value, StageError)
    assert inner.calls == 1
    assert [t.payload["content"] for t in tokens] == ["partial "]
    assert caught.value.run.log.records[-1].stage_id == "call_llm"


async def test_retry_events_in_agent_are_on_the_recorded_step() -> None:
    """Retries inside an Agent become error.retried/error.recovered events on the call_llm step."""
    inner = mock(script=[err(500), "ok"])
    agent = Agent(provider=with_retry(inner, sleep=Sleeps()), model="m")
    events: list[AgentEvent] = []
    agent.on("error.*", events.append)
    result = await agent.run("hi")
    assert result.content == "ok"
    assert [e.type for e in events] == ["agentfootprint.error.retried",
                                        "agentfootprint.error.recovered"]
    [llm] = [r for r in result.recording.log.records if r.stage_id == "call_llm"]
    assert {e.runtime_stage_id for e in events} == {llm.runtime_stage_id}
    retried = dict(next(p for n, p in llm.emits if n.endswith("error.retried")))
    assert (retried["attempt"], retried["status"], retried["provider"]) == (2, 500, "mock")
    for event in events:
        event.model()


async def test_retry_event_is_live_before_the_retried_tokens() -> None:
    """error.retried reaches listeners when the retry happens, before the next attempt's tokens."""
    inner = Streamer(("before", err(502)), ("ok", "The answer"))
    agent = Agent(provider=with_retry(inner, sleep=Sleeps()), model="m", stream=True)
    seen: list[str] = []
    agent.on("*", lambda e: seen.append(e.type.rsplit(".", 1)[1]))
    await agent.run("question")
    assert seen.index("retried") < seen.index("token")


# -- with_fallback ---------------------------------------------------------------------------


async def test_fallback_on_complete() -> None:
    """When the primary fails, the fallback answers and fell_back is reported."""
    primary, backup = mock(script=[err(500)], name="main"), mock(reply="backup", name="spare")
    provider = with_fallback(primary, backup)
    with reports() as found:
        assert (await provider.complete(REQUEST)).content == "backup"
    assert provider.name == "main|spare"
    assert found == [{"kind": "fell_back", "primary": "main", "fallback": "spare",
                      "error": "ProviderError: failed (500)"}]


async def test_fallback_not_used_when_primary_succeeds_or_predicate_refuses() -> None:
    """A healthy primary answers; should_fallback=False lets the primary's error through."""
    backup = mock(reply="backup")
    assert (await with_fallback(mock(reply="main"), backup).complete(REQUEST)).content == "main"
    assert backup.requests == []
    refusing = with_fallback(mock(script=[err(400)]), backup, should_fallback=lambda e: False)
    with pytest.raises(ProviderError):
        await refusing.complete(REQUEST)
    assert backup.requests == []


async def test_fallback_stream_before_first_chunk() -> None:
    """A primary stream failing before any chunk falls back to the fallback's stream."""
    primary = Streamer(("before", err(503)), name="main")
    backup = Streamer(("ok", "from backup"), name="spare")
    with reports() as found:
        chunks = await collect(with_fallback(primary, backup))
    assert "".join(c.content for c in chunks) == "from backup"
    assert [r["kind"] for r in found] == ["fell_back"]


async def test_fallback_stream_not_after_first_chunk() -> None:
    """A primary stream failing after a chunk raises; the fallback is never called."""
    primary = Streamer(("after", err(503)), name="main")
    backup = Streamer(("ok", "unused"), name="spare")
    with reports() as found, pytest.raises(ProviderError):
        await collect(with_fallback(primary, backup))
    assert backup.calls == 0
    assert found == []


async def test_fallback_event_in_agent() -> None:
    """Inside an Agent a fallback becomes a fallback.triggered event with its catalogue payload."""
    agent = Agent(provider=with_fallback(mock(script=[err(503)], name="main"),
                                         mock(reply="saved", name="spare")), model="m")
    events: list[AgentEvent] = []
    agent.on("fallback.triggered", events.append)
    result = await agent.run("hi")
    assert result.content == "saved"
    assert [dict(e.payload) for e in events] == [
        {"primary": "main", "fallback": "spare", "error": "ProviderError: failed (503)"}]
    events[0].model()


async def test_fallback_in_streamed_agent() -> None:
    """Inside Agent(stream=True) a primary failing before its first chunk falls back."""
    primary = Streamer(("before", err(503)), name="main")
    backup = Streamer(("ok", "backup speaking"), name="spare")
    agent = Agent(provider=with_fallback(primary, backup), model="m", stream=True)
    names: list[str] = []
    agent.on("*", lambda e: names.append(e.type))
    result = await agent.run("hi")
    assert result.content == "backup speaking"
    assert "agentfootprint.fallback.triggered" in names


# -- with_circuit_breaker --------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_circuit_opens_rejects_half_opens_and_closes() -> None:
    """Opens after N failures, rejects while cooling, half-opens, closes after probe successes."""
    inner = mock(script=[err(500), err(500), err(500), "probe 1", "probe 2", "normal"])
    clock = Clock()
    breaker = with_circuit_breaker(inner, failure_threshold=3, cooldown=10,
                                   half_open_successes=2, clock=clock)
    with reports() as found:
        for _ in range(3):
            with pytest.raises(ProviderError):
                await breaker.complete(REQUEST)
        assert breaker.state == "open"  # type: ignore[attr-defined]
        with pytest.raises(CircuitOpenError) as caught:
            await breaker.complete(REQUEST)
        assert len(inner.requests) == 3  # rejected without calling the provider
        assert caught.value.retryable is False
        clock.now += 9.9
        with pytest.raises(CircuitOpenError):
            await breaker.complete(REQUEST)
        clock.now += 0.1
        assert (await breaker.complete(REQUEST)).content == "probe 1"
        assert breaker.state == "half_open"  # type: ignore[attr-defined]
        assert (await breaker.complete(REQUEST)).content == "probe 2"
        assert breaker.state == "closed"  # type: ignore[attr-defined]
        assert (await breaker.complete(REQUEST)).content == "normal"
    assert [(r["kind"], r["state"]) for r in found] == [
        ("circuit_changed", "open"), ("circuit_changed", "half_open"),
        ("circuit_changed", "closed")]
    assert all(r["provider"] == "mock" for r in found)


async def test_half_open_failure_reopens() -> None:
    """A failing probe in half-open reopens the circuit for another cooldown."""
    inner = mock(script=[err(500), "unused"])
    clock = Clock()
    breaker = with_circuit_breaker(inner, failure_threshold=1, cooldown=5, clock=clock)
    with pytest.raises(ProviderError):
        await breaker.complete(REQUEST)
    clock.now += 5
    inner.script = [err(500), "later"]
    inner.reset()
    with reports() as found, pytest.raises(ProviderError):
        await breaker.complete(REQUEST)
    assert breaker.state == "open"  # type: ignore[attr-defined]
    assert [r["state"] for r in found] == ["half_open", "open"]
    with pytest.raises(CircuitOpenError):
        await breaker.complete(REQUEST)


async def test_success_resets_consecutive_failures() -> None:
    """Only consecutive failures count: a success in between keeps the circuit closed."""
    inner = mock(script=[err(500), err(500), "ok", err(500), err(500), "ok"])
    breaker = with_circuit_breaker(inner, failure_threshold=3, clock=Clock())
    for expect_ok in (False, False, True, False, False, True):
        if expect_ok:
            await breaker.complete(REQUEST)
        else:
            with pytest.raises(ProviderError):
                await breaker.complete(REQUEST)
    assert breaker.state == "closed"  # type: ignore[attr-defined]


async def test_circuit_counts_stream_failures() -> None:
    """Streamed calls count toward the breaker and are rejected while it is open."""
    inner = Streamer(("before", err(500)), ("after", err(500)), ("ok", "unused"))
    breaker = with_circuit_breaker(inner, failure_threshold=2, clock=Clock())
    for _ in range(2):
        with pytest.raises(ProviderError):
            await collect(breaker)
    with pytest.raises(CircuitOpenError):
        await collect(breaker)
    assert inner.calls == 2


async def test_retry_does_not_retry_an_open_circuit() -> None:
    """CircuitOpenError is not retryable, so with_retry over a breaker gives up at once."""
    breaker = with_circuit_breaker(mock(script=[err(500)]), failure_threshold=1, clock=Clock())
    with pytest.raises(ProviderError):
        await breaker.complete(REQUEST)
    sleep = Sleeps()
    with pytest.raises(CircuitOpenError):
        await with_retry(breaker, sleep=sleep).complete(REQUEST)
    assert sleep.delays == []


async def test_circuit_event_in_agent() -> None:
    """Inside an Agent a breaker transition becomes error.circuit_changed on the call step."""
    breaker = with_circuit_breaker(mock(script=[err(500)]), failure_threshold=1, clock=Clock())
    agent = Agent(provider=breaker, model="m")
    events: list[AgentEvent] = []
    agent.on("error.circuit_changed", events.append)
    with pytest.raises(ProviderError) as caught:
        await agent.run("hi")
    assert [e.payload["state"] for e in events] == ["open"]
    events[0].model()
    failed = caught.value.run.log.records[-1]
    assert failed.stage_id == "call_llm"
    assert any(n == "agentfootprint.error.circuit_changed" for n, _ in failed.emits)
    with pytest.raises(CircuitOpenError):
        await agent.run("again")


def test_breaker_refuses_zero_threshold() -> None:
    """with_circuit_breaker(failure_threshold=0) is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="failure_threshold"):
        with_circuit_breaker(mock(), failure_threshold=0)


def test_provider_error_retryable_defaults() -> None:
    """ProviderError is retryable for 429, 5xx and no status; not for other 4xx."""
    assert [err(s).retryable for s in (429, 500, 503, None, 400, 401, 404)] == [
        True, True, True, True, False, False, False]
