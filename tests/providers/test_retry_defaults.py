"""Retries are on by default in the real adapters, reported as events, and wrappers keep the model.

The adapters talk to a real HTTP server on 127.0.0.1 (``wire_server``) answering as planned; the
waits are recorded by an injected sleep so the tests do not sleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from wire_server import (
    WireServer,
    anthropic_message,
    json_reply,
    openai_completion,
)

from agentfootprint import Agent, ConfigurationError
from agentfootprint.errors import ProviderError
from agentfootprint.providers import (
    LLMRequest,
    MockProvider,
    Provider,
    RetryPolicy,
    anthropic,
    mock,
    ollama,
    openai,
    with_circuit_breaker,
    with_fallback,
    with_retry,
)
from agentfootprint.providers._resilience import Retry

REQUEST = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}])


class Sleeps:
    """An injected sleep that records its delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def _build(kind: str, url: str, **options: Any) -> tuple[Provider, Any]:
    """The factory's provider for ``kind`` on the wire server, and a good answer's reply."""
    if kind == "openai":
        pytest.importorskip("openai")
        return (openai(base_url=f"{url}/v1", model="m", **options),
                json_reply(openai_completion("fine")))
    if kind == "anthropic":
        sdk = pytest.importorskip("anthropic")
        client = sdk.AsyncAnthropic(api_key="t", base_url=url, max_retries=0)
        return (anthropic(client=client, model="m", **options),
                json_reply(anthropic_message("fine")))
    return (ollama(base_url=url, model="m", **options),
            json_reply({"model": "m", "done": True,
                        "message": {"role": "assistant", "content": "fine"}}))


async def _close(provider: Provider) -> None:
    closer = getattr(provider, "aclose", None)
    if closer is not None:
        await closer()


def _failure(status: int) -> Any:
    return json_reply({"error": {"type": "server_error", "message": "busy"}}, status=status)


# -- on by default, off with retry=None ------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic", "ollama"])
@pytest.mark.parametrize("status", [429, 503])
async def test_each_real_adapter_retries_a_transient_failure_by_default(
        kind: str, status: int, wire: WireServer) -> None:
    """openai()/anthropic()/ollama() with no retry= ask again after a 429 or 5xx, keeping
    their own name (recordings still say which provider)."""
    provider, good = _build(kind, wire.url)
    assert isinstance(provider, Retry) and provider.name == kind
    sleep = Sleeps()
    provider.sleep = sleep
    wire.plan(_failure(status), good)
    try:
        response = await provider.complete(REQUEST)
    finally:
        await _close(provider)
    assert response.content == "fine"
    assert len(wire.requests) == 2 and len(sleep.delays) == 1
    assert 0.5 <= sleep.delays[0] <= 0.5 * 1.1  # RetryPolicy(): 0.5 s plus up to 10% jitter


@pytest.mark.parametrize("kind", ["openai", "anthropic", "ollama"])
async def test_retry_none_turns_the_default_off(kind: str, wire: WireServer) -> None:
    """retry=None: the bare adapter, one request, the 503 raised as it came."""
    provider, good = _build(kind, wire.url, retry=None)
    assert not isinstance(provider, Retry)
    wire.plan(_failure(503), good)
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(REQUEST)
    finally:
        await _close(provider)
    assert caught.value.status == 503 and len(wire.requests) == 1


async def test_a_client_error_is_not_retried(wire: WireServer) -> None:
    """A 400 means the request is wrong: asking again cannot help, so it is asked once."""
    provider, good = _build("ollama", wire.url)
    provider.sleep = Sleeps()  # type: ignore[attr-defined]
    wire.plan(_failure(400), good)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    assert caught.value.status == 400 and len(wire.requests) == 1


async def test_a_policy_sets_the_attempts_and_waits(wire: WireServer) -> None:
    """retry=RetryPolicy(...) is what the default wrapper does: 4 attempts, 1 s doubling."""
    provider, _ = _build("ollama", wire.url, retry=RetryPolicy(
        max_attempts=4, initial_delay=1.0, jitter=0.0))
    sleep = Sleeps()
    provider.sleep = sleep  # type: ignore[attr-defined]
    wire.plan(_failure(502))
    with pytest.raises(ProviderError):
        await provider.complete(REQUEST)
    assert len(wire.requests) == 4 and sleep.delays == [1.0, 2.0, 4.0]


async def test_connection_failures_are_retried() -> None:
    """Nothing listening on the port: each attempt fails to connect and is tried again."""
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    provider = ollama(base_url=f"http://127.0.0.1:{port}", model="m")
    sleep = Sleeps()
    provider.sleep = sleep  # type: ignore[attr-defined]
    with pytest.raises(ProviderError, match=r"127\.0\.0\.1"):
        await provider.complete(REQUEST)
    assert len(sleep.delays) == 2  # three attempts in all


async def test_timeouts_are_retried() -> None:
    """A server that accepts and never answers: the request times out, and is tried again."""
    pytest.importorskip("openai")
    seen: list[int] = []
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(1)
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    provider = openai(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=0.2)
    provider.sleep = Sleeps()  # type: ignore[attr-defined]
    try:
        with pytest.raises(ProviderError, match="did not answer in time"):
            await provider.complete(REQUEST)
    finally:
        await _close(provider)
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert len(seen) == 3


def test_the_mock_is_never_wrapped_and_a_bad_policy_is_refused() -> None:
    """mock() stays a MockProvider (a scripted model must not be asked twice); retry= takes a
    RetryPolicy or None, anything else named in the error."""
    assert type(mock(reply="x")) is MockProvider
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        ollama(model="m", retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"max_attempts=0"):
        ollama(model="m", retry=RetryPolicy(max_attempts=0))


# -- retries reach events, the recording and listeners ---------------------------------------


async def test_an_agent_run_records_each_default_retry_as_an_event(wire: WireServer) -> None:
    """A 503 then an answer, through Agent(provider=openai(...)): the retry is an
    ``error.retried`` event with attempt, status and delay, heard by listeners and kept on the
    recorded step."""
    provider, good = _build("openai", wire.url)
    provider.sleep = Sleeps()  # type: ignore[attr-defined]
    wire.plan(_failure(503), good)
    agent = Agent(provider=provider)
    heard: list[dict[str, Any]] = []
    agent.on("error.retried", lambda event: heard.append(dict(event.payload)))
    try:
        result = await agent.run("hi")
    finally:
        await _close(provider)
    assert result.content == "fine"
    assert len(heard) == 1
    assert heard[0]["attempt"] == 2 and heard[0]["status"] == 503
    assert heard[0]["provider"] == "openai" and 0.5 <= heard[0]["backoff"] <= 0.55
    recorded = [payload for record in result.recording.log.records
                for name, payload in record.emits if name == "agentfootprint.error.retried"]
    assert recorded == heard


# -- wrappers keep the wrapped provider's model ----------------------------------------------


def test_wrappers_keep_the_model_the_provider_was_built_with() -> None:
    """with_retry, with_circuit_breaker and with_fallback answer for the inner model, so an
    agent on them runs it and refuses another (as on the bare provider)."""
    pytest.importorskip("openai")
    base = openai(model="x", api_key="k")
    for wrapped in (with_retry(base), with_circuit_breaker(base),
                    with_fallback(base, mock(reply="y")),
                    with_retry(with_circuit_breaker(base))):
        assert (wrapped.model, wrapped.configured_model) == ("x", "x"), wrapped
        assert Agent(provider=wrapped).spec.model == "x"
        with pytest.raises(ConfigurationError):
            Agent(provider=wrapped, model="other")
    assert with_retry(base).structured_output == base.structured_output == "json_schema"
    assert with_fallback(base, mock(reply="y")).structured_output is None  # modes differ
    assert with_retry(openai(api_key="k")).model == "gpt-4o-mini"
    assert with_retry(openai(api_key="k")).configured_model is None


def test_with_retry_replaces_the_default_instead_of_nesting() -> None:
    """An explicit with_retry around a default-retrying adapter: one Retry, its policy."""
    pytest.importorskip("openai")
    wrapped = with_retry(openai(model="x", api_key="k"), max_attempts=5)
    assert isinstance(wrapped, Retry) and wrapped.max_attempts == 5
    assert not isinstance(wrapped.inner, Retry)
    assert wrapped.name == "openai+retry"


async def test_the_default_wrapper_keeps_the_adapter_surface(wire: WireServer) -> None:
    """params(), client, base_url and aclose() of the adapter work through the default retry."""
    pytest.importorskip("openai")
    provider = openai(base_url=f"{wire.url}/v1", model="m")
    assert provider.params(REQUEST)["model"] == "m"  # type: ignore[attr-defined]
    assert provider.base_url == f"{wire.url}/v1"  # type: ignore[attr-defined]
    await provider.aclose()  # type: ignore[attr-defined]


async def test_a_forked_wrapper_starts_its_script_afresh() -> None:
    """fork() reaches through the wrappers: a scripted model under with_retry and a fallback
    starts again from its first reply in an explanation's re-run."""
    scripted = with_retry(mock(script=["one", "two"]))
    assert (await scripted.complete(REQUEST)).content == "one"
    fresh = scripted.fork()
    assert fresh is not scripted and fresh.deterministic
    assert (await fresh.complete(REQUEST)).content == "one"
    fallback = with_fallback(mock(script=["a", "b"]), mock(reply="z"))
    await fallback.complete(REQUEST)
    assert (await fallback.fork().complete(REQUEST)).content == "a"


async def test_a_fallback_asks_its_own_model_for_the_primary_default() -> None:
    """An agent without model= asks for the primary's model; the fallback gets its own."""

    class Failing(Provider):
        name = "first"
        model = "first-model"

        async def complete(self, request: LLMRequest) -> Any:
            raise ProviderError("down", provider="first", status=503)

        async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
            raise ProviderError("down", provider="first", status=503)
            yield  # pragma: no cover

    second = mock(reply="ok")
    second.model = "second-model"
    both = with_fallback(Failing(), second)
    await both.complete(REQUEST.model_copy(update={"model": "first-model"}))
    await both.complete(REQUEST.model_copy(update={"model": "pinned"}))
    assert [r.model for r in second.requests] == ["second-model", "pinned"]


async def test_a_retry_outside_an_agent_run_is_logged(
        wire: WireServer, caplog: pytest.LogCaptureFixture) -> None:
    """Called directly (no agent run to turn it into an event), a retry is still seen: an
    INFO record under agentfootprint.providers with the attempt and the status."""
    import logging

    caplog.set_level(logging.INFO, logger="agentfootprint.providers")
    provider, good = _build("ollama", wire.url)
    provider.sleep = Sleeps()  # type: ignore[attr-defined]
    wire.plan(_failure(503), good)
    await provider.complete(REQUEST)
    lines = [r.getMessage() for r in caplog.records if r.name == "agentfootprint.providers"]
    assert any(line.startswith("retried: ") and "attempt=2" in line and "status=503" in line
               for line in lines), lines
    assert any(line.startswith("recovered: ") for line in lines)
