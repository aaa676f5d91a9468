"""LLMCall: one model call, no tools, recorded like an agent run."""

from __future__ import annotations

import pytest

from agentfootprint import ConfigurationError, LLMCall, ModelSettings, ProviderError
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.providers import mock


async def test_one_call_with_system_and_no_tools() -> None:
    """LLMCall makes exactly one call, with the system prompt, the message, and no tools."""
    provider = mock(reply="Bonjour.")
    call = LLMCall(provider=provider, model="m", system="Translate to French.",
                   settings=ModelSettings(temperature=0.2, max_tokens=50))
    result = await call.run("Hello.")
    assert result.content == "Bonjour."
    assert len(provider.requests) == 1
    request = provider.requests[0]
    assert request.system == "Translate to French."
    assert request.tools == []
    assert request.messages == [{"role": "user", "content": "Hello."}]
    assert (request.model, request.temperature, request.max_tokens) == ("m", 0.2, 50)


async def test_tool_calls_in_the_answer_are_not_followed() -> None:
    """An LLMCall whose model asks for a tool still ends after its one call."""
    provider = mock(script=[{"content": "maybe", "tool_calls": [{"name": "x", "args": {}}]}])
    result = await LLMCall(provider=provider, model="m").run("hi")
    assert result.content == "maybe"
    assert len(provider.requests) == 1


async def test_recording_is_a_single_pass() -> None:
    """The LLMCall chart records seed, the slots, one call and finalize, with no route."""
    result = await LLMCall(provider=mock(reply="ok"), model="m").run("hi")
    assert [r.stage_id for r in result.recording.log.records] == [
        "seed", "injections", "system_slot", "messages_slot", "tools_slot", "call_llm",
        "finalize"]
    assert result.history == [{"role": "user", "content": "hi"}]
    assert result.turn == 1


async def test_empty_system_prompt_is_omitted() -> None:
    """Without a system prompt the request carries system=None."""
    provider = mock(reply="ok")
    await LLMCall(provider=provider, model="m").run("hi")
    assert provider.requests[0].system is None


async def test_streamed_llm_call_emits_tokens() -> None:
    """LLMCall(stream=True) delivers stream.token events that join to the answer."""
    call = LLMCall(provider=mock(reply="one two three"), model="m", stream=True)
    tokens: list[AgentEvent] = []
    call.on("stream.token", tokens.append)
    result = await call.run("count")
    assert "".join(e.payload["content"] for e in tokens) == result.content == "one two three"


async def test_provider_error_surfaces() -> None:
    """A ProviderError from the one call surfaces as ProviderError with its status."""
    call = LLMCall(provider=mock(script=[ProviderError("down", provider="mock", status=503)]),
                   model="m")
    with pytest.raises(ProviderError) as caught:
        await call.run("hi")
    assert caught.value.status == 503
    assert caught.value.run.status == "failed"


def test_run_sync() -> None:
    """LLMCall.run_sync works from synchronous code."""
    assert LLMCall(provider=mock(), model="m").run_sync("ping").content == "echo: ping"


def test_bad_provider_is_a_configuration_error() -> None:
    """LLMCall refuses a provider that is not a Provider."""
    with pytest.raises(ConfigurationError):
        LLMCall(provider=object(), model="m")  # type: ignore[arg-type]
