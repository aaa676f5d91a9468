"""The mock provider: reply sources, script exhaustion, failures, streaming, recorded requests."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import ConfigurationError, ProviderError
from agentfootprint.providers import LLMRequest, LLMResponse, MockProvider, Provider, mock
from agentfootprint.providers._base import StreamChunk, Usage


def request(text: str = "hello", *, system: str | None = None, **extra: Any) -> LLMRequest:
    return LLMRequest(model="m", messages=[{"role": "user", "content": text}], system=system,
                      **extra)


async def test_script_replies_in_order() -> None:
    """Scripted replies are consumed in order, strings as content."""
    provider = mock(script=["one", "two"])
    assert (await provider.complete(request())).content == "one"
    assert (await provider.complete(request())).content == "two"


async def test_script_dict_with_tool_calls() -> None:
    """A dict reply gives content and tool calls with generated ids and stop_reason tool_use."""
    provider = mock(script=[
        {"content": "checking", "tool_calls": [{"name": "a", "args": {"x": 1}}, {"name": "b"}]},
        {"tool_calls": [{"id": "mine", "name": "c", "args": {}}]},
    ])
    first = await provider.complete(request())
    assert first.content == "checking"
    assert first.tool_calls == [{"id": "call_1", "name": "a", "args": {"x": 1}},
                                {"id": "call_2", "name": "b", "args": {}}]
    assert first.stop_reason == "tool_use"
    second = await provider.complete(request())
    assert second.tool_calls == [{"id": "mine", "name": "c", "args": {}}]
    assert second.content == ""


async def test_script_llm_response_passes_through() -> None:
    """An LLMResponse in the script is returned as it is."""
    response = LLMResponse(content="exact", stop_reason="max_tokens", usage=Usage(input=1))
    assert await mock(script=[response]).complete(request()) is response


async def test_reply_repeats_forever() -> None:
    """reply= answers every call with the same reply."""
    provider = mock(reply="always")
    for _ in range(3):
        assert (await provider.complete(request())).content == "always"


async def test_respond_sync_and_async() -> None:
    """respond= may be a sync or async function of the request."""
    sync = mock(respond=lambda req: f"sync {req.messages[-1]['content']}")
    assert (await sync.complete(request("a"))).content == "sync a"

    async def respond(req: LLMRequest) -> dict[str, Any]:
        return {"content": f"async {req.messages[-1]['content']}"}

    assert (await mock(respond=respond).complete(request("b"))).content == "async b"


async def test_echo_by_default() -> None:
    """With no script, reply or respond, the mock echoes the last user message."""
    provider = mock()
    req = LLMRequest(model="m", messages=[
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "x"},
        {"role": "user", "content": "second"}, {"role": "tool", "content": "t",
                                                "tool_call_id": "c"}])
    assert (await provider.complete(req)).content == "echo: second"


async def test_script_takes_precedence() -> None:
    """script= wins over reply= and respond=."""
    provider = mock(script=["scripted"], reply="fixed", respond=lambda r: "fn")
    assert (await provider.complete(request())).content == "scripted"


async def test_script_exhaustion_names_the_fix() -> None:
    """Running out of scripted replies raises ConfigurationError saying how to fix it."""
    provider = mock(script=["only"], name="scripted")
    await provider.complete(request())
    with pytest.raises(ConfigurationError) as caught:
        await provider.complete(request())
    message = str(caught.value)
    assert "'scripted'" in message
    assert "after 1" in message
    assert "script=" in message and "max_iterations" in message


async def test_exception_in_script_is_raised() -> None:
    """An exception instance in the script is raised at that call, then the script goes on."""
    error = ProviderError("overloaded", provider="mock", status=529)
    provider = mock(script=[error, "after"])
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value is error
    assert (await provider.complete(request())).content == "after"


async def test_bad_reply_type_is_a_configuration_error() -> None:
    """A reply that is not str, dict, LLMResponse or exception raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="must be a str"):
        await mock(reply=42).complete(request())  # type: ignore[arg-type]


@pytest.mark.parametrize(("reply", "message"), [
    ({"tool_call": [{"name": "x"}]}, "unknown key.* 'tool_call'; it takes 'content', 'tool_calls'"),
    ({"tool_calls": [{"name": "x", "arguments": {}}]}, "unknown key.* 'arguments'; it takes"),
    ({"tool_calls": [{"args": {}}]}, "must be a dict with a 'name'"),
    ({"tool_calls": {"name": "x"}}, "tool_calls=.* must be a list"),
])
async def test_a_misspelt_reply_is_refused_not_emptied(reply: dict[str, Any],
                                                       message: str) -> None:
    """An unknown key would be dropped and the reply come out empty (or run a tool with no
    arguments); the mock names the key and what it takes instead."""
    with pytest.raises(ConfigurationError, match=message):
        await mock(reply=reply).complete(request())


def test_script_must_be_a_list() -> None:
    """A bare string would be read as one reply per character."""
    with pytest.raises(ConfigurationError, match=r"script='hello' must be a list"):
        mock(script="hello")  # type: ignore[arg-type]


async def test_default_usage_counts_characters() -> None:
    """Default usage is ceil(chars / 4) of system + messages in, and of content out."""
    response = await mock(reply="12345").complete(request("abcdefghi", system="sys"))
    assert (response.usage.input, response.usage.output) == (3, 2)
    given = await mock(reply={"content": "x", "usage": {"input": 7, "output": 9}}).complete(
        request())
    assert (given.usage.input, given.usage.output) == (7, 9)


async def test_requests_are_recorded_and_reset() -> None:
    """Every request is kept in requests; reset() rewinds the script and forgets them."""
    provider = mock(script=["a", "b"])
    first, second = request("one"), request("two", system="s", tools=[])
    await provider.complete(first)
    await provider.complete(second)
    assert provider.requests == [first, second]
    provider.reset()
    assert provider.requests == []
    assert (await provider.complete(request())).content == "a"


async def test_stream_yields_word_chunks_then_terminal() -> None:
    """stream() yields whitespace-keeping word chunks, then one done chunk with the response."""
    provider = mock(reply="It is  sunny\nin Paris.")
    chunks = [c async for c in provider.stream(request())]
    assert [c.content for c in chunks[:-1]] == ["It ", "is  ", "sunny\n", "in ", "Paris."]
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(not c.done for c in chunks[:-1])
    last = chunks[-1]
    assert last.done and last.content == ""
    assert last.response is not None and last.response.content == "It is  sunny\nin Paris."
    assert "".join(c.content for c in chunks) == last.response.content
    assert len(provider.requests) == 1
    assert provider.streams is True


async def test_stream_of_tool_calls_is_only_the_terminal_chunk() -> None:
    """A reply with no text streams just the terminal chunk carrying the tool calls."""
    provider = mock(reply={"tool_calls": [{"name": "t", "args": {}}]})
    chunks = [c async for c in provider.stream(request())]
    assert len(chunks) == 1
    assert chunks[0].done and chunks[0].response is not None
    assert chunks[0].response.tool_calls[0]["name"] == "t"


async def test_stream_raises_scripted_exception_before_any_chunk() -> None:
    """A scripted exception in stream() raises before any chunk is yielded."""
    provider = mock(script=[ProviderError("down", provider="mock", status=503)])
    got: list[StreamChunk] = []
    with pytest.raises(ProviderError):
        async for chunk in provider.stream(request()):
            got.append(chunk)
    assert got == []


async def test_base_provider_default_stream_is_one_terminal_chunk() -> None:
    """A provider with only complete() streams its content then one terminal chunk."""

    class Plain(Provider):
        name = "plain"

        async def complete(self, req: LLMRequest) -> LLMResponse:
            return LLMResponse(content="whole answer")

    chunks = [c async for c in Plain().stream(request())]
    assert [(c.content, c.done) for c in chunks] == [("whole answer", False), ("", True)]
    assert chunks[-1].response is not None


async def test_base_provider_complete_is_required() -> None:
    """A Provider subclass without complete() says so when called."""
    with pytest.raises(NotImplementedError, match="complete"):
        await Provider().complete(request())


def test_mock_is_a_provider() -> None:
    """mock() returns a MockProvider that is a Provider, named as asked."""
    provider = mock(name="fake")
    assert isinstance(provider, MockProvider) and isinstance(provider, Provider)
    assert provider.name == "fake"
    assert "fake" in repr(provider)
