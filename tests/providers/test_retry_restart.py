"""with_retry and a stream cut after its first chunk: asked again from the start, and only then.

Other errors after the first chunk still propagate (the answer may be half-used); a cut stream
is different because what was yielded is known not to be the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentfootprint.errors import ProviderError, StreamIncompleteError
from agentfootprint.providers import LLMRequest, LLMResponse, Provider, with_retry
from agentfootprint.providers._base import StreamChunk

REQUEST = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}])


async def no_sleep(delay: float) -> None:
    return None


class Cutting(Provider):
    """Streams ``"partial "`` then raises ``errors[n]`` on call ``n``; whole once they run out."""

    streams = True

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        self.calls += 1
        yield StreamChunk(index=0, content="partial ")
        if self.errors:
            raise self.errors.pop(0)
        yield StreamChunk(index=1, content="whole")
        yield StreamChunk(index=2, done=True, response=LLMResponse(content="partial whole"))


def cut(retryable: bool = True) -> StreamIncompleteError:
    return StreamIncompleteError("cut", provider="inner", partial="partial ",
                                 retryable=retryable)


async def test_two_cuts_then_a_whole_answer_gives_two_restart_markers() -> None:
    inner = Cutting(cut(), cut())
    chunks = [c async for c in with_retry(inner, sleep=no_sleep).stream(REQUEST)]
    assert inner.calls == 3
    assert [c.restart for c in chunks].count(True) == 2
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].response is not None and chunks[-1].response.content == "partial whole"


async def test_a_cut_on_the_last_attempt_propagates_with_its_evidence() -> None:
    inner = Cutting(cut(), cut(), cut())
    seen: list[StreamChunk] = []
    with pytest.raises(StreamIncompleteError) as caught:
        async for chunk in with_retry(inner, max_attempts=3, sleep=no_sleep).stream(REQUEST):
            seen.append(chunk)
    assert inner.calls == 3 and caught.value.partial == "partial "
    assert not any(chunk.done for chunk in seen)


@pytest.mark.parametrize("error", [
    ProviderError("server error event", provider="inner", status=500),
    StreamIncompleteError("not retryable", provider="inner", partial="p", retryable=False),
], ids=["other-error", "cut-not-retryable"])
async def test_other_errors_after_a_chunk_are_not_retried(error: Exception) -> None:
    inner = Cutting(error)
    with pytest.raises(type(error)):
        async for _ in with_retry(inner, sleep=no_sleep).stream(REQUEST):
            pass
    assert inner.calls == 1


async def test_complete_retries_a_cut_stream_error_too() -> None:
    """An adapter's complete() that streams under the hood may raise the same error."""

    class Once(Provider):
        calls = 0

        async def complete(self, request: LLMRequest) -> LLMResponse:
            self.calls += 1
            if self.calls == 1:
                raise cut()
            return LLMResponse(content="ok")

    inner = Once()
    assert (await with_retry(inner, sleep=no_sleep).complete(REQUEST)).content == "ok"
    assert inner.calls == 2
