"""Cut streams and unreadable bodies, served by a real HTTP server to the adapters' real clients.

A stream is an answer only once the protocol says it finished (OpenAI: a ``finish_reason``;
Anthropic: ``message_stop``; Ollama: ``"done": true``). One that ends before, cleanly, by a
reset, or with a line that is not JSON raises ``StreamIncompleteError`` carrying the partial
text as evidence; a 200 whose body is not the API's JSON raises ``MalformedResponseError`` with
the status and an excerpt. Both are retried by ``with_retry``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from wire_server import (
    Reply,
    WireServer,
    anthropic_message,
    anthropic_stream,
    json_reply,
    ndjson_reply,
    ollama_line,
    ollama_stream,
    openai_completion,
    openai_stream,
    raw_reply,
    sse_reply,
)

from agentfootprint import Agent
from agentfootprint.errors import (
    MalformedResponseError,
    ProviderError,
    ProviderUnavailableError,
    StreamIncompleteError,
)
from agentfootprint.providers import LLMRequest, Provider, with_retry
from agentfootprint.providers._base import StreamChunk
from agentfootprint.providers._resilience import resilience_reports

REQUEST = LLMRequest(model="m", messages=[{"role": "user", "content": "Where is order A-1?"}])
PIECES = ["Order ", "A-1 ", "ship"]
PARTIAL = "Order A-1 ship"


async def no_sleep(delay: float) -> None:
    return None


@pytest.fixture
async def make() -> AsyncIterator[Callable[[str, WireServer], Provider]]:
    """``make(kind, wire)``: an openai, anthropic or ollama provider talking to ``wire``."""
    opened: list[Any] = []

    def build(kind: str, wire: WireServer) -> Provider:
        provider: Any
        if kind == "openai":
            pytest.importorskip("openai")
            from agentfootprint.providers._openai import OpenAIProvider

            provider = OpenAIProvider(base_url=f"{wire.url}/v1", model="m")
        elif kind == "anthropic":
            anthropic = pytest.importorskip("anthropic")
            from agentfootprint.providers._anthropic import AnthropicProvider

            client = anthropic.AsyncAnthropic(api_key="test", base_url=wire.url, max_retries=0)
            provider = AnthropicProvider(client=client, model="claude-wire")
        else:
            from agentfootprint.providers._ollama import OllamaProvider

            provider = OllamaProvider(base_url=wire.url, model="wire")
        opened.append(provider)
        return provider  # type: ignore[no-any-return]

    yield build
    for provider in opened:
        closer = getattr(provider, "aclose", None)
        if closer is not None:
            await closer()


async def drain(provider: Provider) -> tuple[list[StreamChunk], BaseException | None]:
    chunks: list[StreamChunk] = []
    try:
        async for chunk in provider.stream(REQUEST):
            chunks.append(chunk)
    except Exception as error:  # returned for the test to inspect
        return chunks, error
    return chunks, None


def cut_stream(kind: str, *, end: str = "close") -> Reply:
    """The three pieces of text, then the connection ends without the finish signal."""
    if kind == "openai":
        return sse_reply(openai_stream(PIECES, finish=False, done=False), end=end)  # type: ignore[arg-type]
    if kind == "anthropic":
        return sse_reply(anthropic_stream(PIECES, stop=False), end=end)  # type: ignore[arg-type]
    return ndjson_reply(ollama_stream(PIECES, done=False), end=end)  # type: ignore[arg-type]


def whole_stream(kind: str, texts: list[str]) -> Reply:
    if kind == "openai":
        return sse_reply(openai_stream(texts))
    if kind == "anthropic":
        return sse_reply(anthropic_stream(texts))
    return ndjson_reply(ollama_stream(texts))


def whole_answer(kind: str, text: str) -> Reply:
    if kind == "openai":
        return json_reply(openai_completion(text))
    if kind == "anthropic":
        return json_reply(anthropic_message(text))
    return json_reply({"model": "wire", "message": {"role": "assistant", "content": text},
                       "done": True, "done_reason": "stop"})


KINDS = ["openai", "anthropic", "ollama"]


# -- a stream without its finish signal ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("end", ["close", "reset"])
async def test_a_stream_cut_before_its_finish_signal_is_an_error_keeping_the_partial_text(
        kind: str, end: str, wire: WireServer, make: Any) -> None:
    """Closed or reset mid-answer: the tokens were streamed, but no terminal chunk comes; the
    error keeps the text as ``partial`` and quotes it, and is retryable."""
    wire.plan(cut_stream(kind, end=end))
    chunks, error = await drain(make(kind, wire))
    assert "".join(chunk.content for chunk in chunks) == PARTIAL
    assert not any(chunk.done for chunk in chunks)
    assert isinstance(error, StreamIncompleteError), error
    assert error.partial == PARTIAL
    assert repr(PARTIAL) in str(error)
    assert error.retryable is True
    assert error.provider == kind


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_line_that_is_not_json_is_a_cut_stream_with_status_200(
        kind: str, wire: WireServer, make: Any) -> None:
    """A broken line mid-stream ends the answer: partial kept, the 200 and the line quoted."""
    garbage = {"openai": b"data: {not json\n\n",
               "anthropic": b"event: content_block_delta\ndata: {not json\n\n",
               "ollama": b"{not json\n"}[kind]
    reply = cut_stream(kind)
    reply.parts.append(garbage)
    wire.plan(reply)
    _, error = await drain(make(kind, wire))
    assert isinstance(error, StreamIncompleteError), error
    assert (error.partial, error.status) == (PARTIAL, 200)
    assert "{not json" in str(error)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_whole_stream_is_still_the_answer(kind: str, wire: WireServer,
                                                  make: Any) -> None:
    """The happy path over the same server: a terminal chunk with the whole text."""
    wire.plan(whole_stream(kind, PIECES))
    chunks, error = await drain(make(kind, wire))
    assert error is None
    assert chunks[-1].done and chunks[-1].response is not None
    assert chunks[-1].response.content == PARTIAL


async def test_openai_finish_reason_without_done_marker_is_complete(
        wire: WireServer, make: Any) -> None:
    """``[DONE]`` is consumed by the SDK; the finish_reason is the signal, so a server that
    omits ``[DONE]`` after it still gives a whole answer."""
    wire.plan(sse_reply(openai_stream(PIECES, finish=True, done=False)))
    chunks, error = await drain(make("openai", wire))
    assert error is None and chunks[-1].response is not None
    assert chunks[-1].response.content == PARTIAL


@pytest.mark.parametrize("kind", KINDS)
async def test_with_retry_asks_again_after_a_cut_stream_behind_a_restart_chunk(
        kind: str, wire: WireServer, make: Any) -> None:
    """The cut attempt's tokens were already yielded; the retry sends a ``restart`` marker
    and then the whole new answer, and reports the retry with the partial text in it."""
    wire.plan(cut_stream(kind), whole_stream(kind, ["Order A-1 shipped ", "today."]))
    found: list[dict[str, Any]] = []
    token = resilience_reports.set(found.append)
    try:
        chunks, error = await drain(with_retry(make(kind, wire), sleep=no_sleep))
    finally:
        resilience_reports.reset(token)
    assert error is None
    assert len(wire.requests) == 2
    marker = next(i for i, chunk in enumerate(chunks) if chunk.restart)
    assert "".join(c.content for c in chunks[:marker]) == PARTIAL
    assert "".join(c.content for c in chunks[marker + 1:]) == "Order A-1 shipped today."
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].response is not None
    assert chunks[-1].response.content == "Order A-1 shipped today."
    retried = [r for r in found if r["kind"] == "retried"]
    assert len(retried) == 1 and "StreamIncompleteError" in retried[0]["error"]
    assert PARTIAL in retried[0]["error"]


async def test_a_streamed_agent_never_takes_a_cut_stream_as_its_answer(
        wire: WireServer, make: Any) -> None:
    """The hardening issue's case: without retry the run fails with the evidence; with
    ``with_retry`` the answer is the whole second one."""
    wire.plan(cut_stream("openai"))
    with pytest.raises(StreamIncompleteError) as caught:
        await Agent(provider=make("openai", wire), model="m", stream=True).run("?")
    assert caught.value.partial == PARTIAL

    wire.plan(cut_stream("openai"), whole_stream("openai", ["Order A-1 shipped."]))
    provider = with_retry(make("openai", wire), sleep=no_sleep)
    result = await Agent(provider=provider, model="m", stream=True).run("?")
    assert result.content == "Order A-1 shipped."


# -- a 200 whose body cannot be read ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("body", "content_type"), [
    (b"{not json", "application/json"),
    (b"<html><body>Gateway says hello</body></html>", "text/html"),
], ids=["broken-json", "html"])
async def test_a_200_that_is_not_json_keeps_status_and_excerpt_and_is_retried(
        kind: str, body: bytes, content_type: str, wire: WireServer, make: Any) -> None:
    """Not a generic stage failure: a provider error with the 200 and what was sent, and
    ``with_retry`` gets the next, whole answer."""
    wire.plan(raw_reply(body, content_type=content_type))
    with pytest.raises(MalformedResponseError) as caught:
        await make(kind, wire).complete(REQUEST)
    error = caught.value
    assert (error.status, error.retryable, error.provider) == (200, True, kind)
    assert error.body_excerpt == body.decode()
    assert body.decode() in str(error)

    wire.plan(raw_reply(body, content_type=content_type), whole_answer(kind, "fine"))
    response = await with_retry(make(kind, wire), sleep=no_sleep).complete(REQUEST)
    assert response.content == "fine"
    assert len(wire.requests) == 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_json_that_is_not_an_answer_is_malformed(kind: str, wire: WireServer,
                                                       make: Any) -> None:
    """Valid JSON of the wrong shape (no choices / no content) is malformed too, not a crash."""
    wire.plan(json_reply({"status": "queued"}))
    with pytest.raises(MalformedResponseError) as caught:
        await make(kind, wire).complete(REQUEST)
    assert caught.value.status == 200
    assert "queued" in caught.value.body_excerpt


async def test_a_long_body_is_clipped_in_the_error(wire: WireServer, make: Any) -> None:
    """The excerpt is bounded and says how much was left out."""
    wire.plan(raw_reply(b"x" * 5000, content_type="text/plain"))
    with pytest.raises(MalformedResponseError) as caught:
        await make("openai", wire).complete(REQUEST)
    assert caught.value.body_excerpt.startswith("x" * 200)
    assert "4800 more characters" in caught.value.body_excerpt
    assert len(str(caught.value)) < 600


async def test_ollama_error_line_mid_stream_is_still_the_servers_error(
        wire: WireServer, make: Any) -> None:
    """An ``{"error": ...}`` line is the server speaking, not a cut stream."""
    wire.plan(ndjson_reply([ollama_line("Order "), b'{"error": "model crashed"}\n']))
    _, error = await drain(make("ollama", wire))
    assert error is not None and not isinstance(error, StreamIncompleteError)
    assert "model crashed" in str(error)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_body_cut_short_is_a_retryable_broken_answer_not_an_unreachable_server(
        kind: str, wire: WireServer, make: Any) -> None:
    """Content-Length promised more than came: the server was reached, so the error must not
    tell the user to start it; it is retryable."""
    wire.plan(Reply(200, {"Content-Type": "application/json", "Content-Length": "500"},
                    [b'{"id": "x", "choices": [{"index": 0, "message": {"content": "hal']))
    with pytest.raises(ProviderError) as caught:
        await make(kind, wire).complete(REQUEST)
    assert not isinstance(caught.value, ProviderUnavailableError)
    assert "broke off" in str(caught.value) and caught.value.retryable
