"""The OpenAI adapter and the agents against a real model (SmolLM2-135M, llama-cpp-python).

A 135M model is a plumbing test, not a quality test: these tests assert structure (text came
back, real token counts, a tool call was parsed, the run was recorded completely), never what
the model said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentfootprint import Agent, Limits, LLMCall, ModelSettings, tool
from agentfootprint.providers import with_retry
from agentfootprint.providers._base import LLMRequest, StreamChunk, ToolSchema
from agentfootprint.providers._openai import OpenAIProvider

pytestmark = pytest.mark.e2e

MODEL = "smollm2"
WEATHER: ToolSchema = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}


@pytest.fixture
async def provider(llm_base_url: str) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(base_url=llm_base_url, api_key="none", model=MODEL, timeout=120.0)
    try:
        yield p
    finally:
        await p.client.close()


def ask(text: str, **fields: Any) -> LLMRequest:
    fields.setdefault("temperature", 0.0)
    return LLMRequest(model=MODEL, messages=[{"role": "user", "content": text}], **fields)


async def test_complete_returns_text_and_real_usage(provider: OpenAIProvider) -> None:
    response = await provider.complete(
        ask("Capital of France?", system="Answer in one word.", max_tokens=16))
    assert response.content.strip()
    assert response.usage.input > 0 and response.usage.output > 0
    assert response.stop_reason in ("stop", "max_tokens")
    assert response.tool_calls == []


async def test_stream_yields_tokens_and_a_terminal_response_with_real_usage(
        provider: OpenAIProvider) -> None:
    """A streamed call yields token chunks, then a terminal response with real token counts."""
    chunks: list[StreamChunk] = [chunk async for chunk in provider.stream(
        ask("Count from one to ten in words.", max_tokens=48))]
    pieces = [c for c in chunks if not c.done]
    assert len(pieces) >= 2 and all(c.content for c in pieces)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    terminal = chunks[-1]
    assert terminal.done and terminal.response is not None
    assert terminal.response.content == "".join(c.content for c in pieces)
    usage = terminal.response.usage
    assert usage.input > 0 and usage.output > 0
    assert usage.output <= 48


async def test_streamed_llm_call_records_real_usage(provider: OpenAIProvider) -> None:
    """LLMCall(stream=True) on a real model: tokens arrive as events and usage is recorded."""
    call = LLMCall(provider=provider, model=MODEL, system="Answer briefly.", stream=True,
                   settings=ModelSettings(max_tokens=32))
    tokens: list[str] = []
    call.on("stream.token", lambda event: tokens.append(event.payload["content"]))
    result = await call.run("Name a colour.")
    assert tokens and "".join(tokens) == result.content
    assert result.input_tokens > 0 and result.output_tokens > 0


async def test_forced_tool_call_is_parsed(provider: OpenAIProvider) -> None:
    response = await provider.complete(ask(
        "What is the weather in Paris?", tools=[WEATHER], tool_choice="get_weather",
        max_tokens=64))
    assert len(response.tool_calls) >= 1
    call = response.tool_calls[0]
    assert call["name"] == "get_weather"
    assert isinstance(call["args"], dict)
    assert call["id"]
    assert response.stop_reason == "tool_use"
    assert response.usage.input > 0 and response.usage.output > 0


async def test_forced_tool_call_streamed_through_retry(provider: OpenAIProvider) -> None:
    chunks = [chunk async for chunk in with_retry(provider).stream(ask(
        "What is the weather in Oslo?", tools=[WEATHER], tool_choice="get_weather",
        max_tokens=64))]
    response = chunks[-1].response
    assert response is not None
    assert [call["name"] for call in response.tool_calls] == ["get_weather"]
    assert isinstance(response.tool_calls[0]["args"], dict)
    assert response.usage.input > 0 and response.usage.output > 0


async def test_streamed_usage_counts_what_the_plain_call_counts(provider: OpenAIProvider) -> None:
    """One request, streamed and not, at temperature 0: the same prompt and completion tokens."""
    request = ask("Name three fruits.", max_tokens=24)
    plain = await provider.complete(request)
    chunks = [chunk async for chunk in provider.stream(request)]
    streamed = chunks[-1].response
    assert streamed is not None and streamed.content == plain.content
    assert (streamed.usage.input, streamed.usage.output) == (plain.usage.input, plain.usage.output)


async def test_no_usage_chunk_unless_asked(llm_base_url: str) -> None:
    """The server sends streamed usage only on request, as OpenAI does (stream_options)."""
    quiet = OpenAIProvider(base_url=llm_base_url, api_key="none", model=MODEL, timeout=120.0,
                           stream_usage=False)
    try:
        chunks = [chunk async for chunk in quiet.stream(ask("Say hi.", max_tokens=8))]
    finally:
        await quiet.client.close()
    terminal = chunks[-1].response
    assert terminal is not None and terminal.content
    assert (terminal.usage.input, terminal.usage.output) == (0, 0)


async def test_llm_call_runs_and_is_recorded(provider: OpenAIProvider) -> None:
    call = LLMCall(provider=provider, model=MODEL, system="Answer in one word.",
                   settings=ModelSettings(temperature=0.0, max_tokens=16))
    result = await call.run("Capital of France?")
    assert isinstance(result.content, str) and result.content.strip()
    assert result.run_id
    records = result.recording.log.records
    assert records
    assert any(record.stage_id == "call_llm" for record in records)
    assert result.input_tokens > 0 and result.output_tokens > 0


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    return f"It is 18°C and clear in {city}."


async def test_agent_with_a_tool_records_a_complete_run(provider: OpenAIProvider) -> None:
    agent = Agent(provider=provider, model=MODEL, system="Use the weather tool.",
                  tools=[weather], limits=Limits(max_iterations=3),
                  settings=ModelSettings(temperature=0.0, max_tokens=64))
    result = await agent.run("What is the weather in Paris?")
    assert isinstance(result.content, str)
    recording = result.recording
    assert recording.status == "done"
    records = recording.log.records
    llm_steps = [record for record in records if record.stage_id == "call_llm"]
    assert llm_steps, [record.stage_id for record in records]
    assert any(record.stage_id == "finalize" for record in records)

    history = recording.state["history"]
    assert history == result.history
    assert history[0] == {"role": "user", "content": "What is the weather in Paris?"}
    calls = [call for message in history if message["role"] == "assistant"
             for call in message.get("tool_calls", [])]
    results = [message for message in history if message["role"] == "tool"]
    # every tool call the model made has exactly one result, and every result answers a call
    assert sorted(m["tool_call_id"] for m in results) == sorted(c["id"] for c in calls)
    assert len({c["id"] for c in calls}) == len(calls)
    for call in calls:
        assert call["name"] == "weather" and isinstance(call["args"], dict)
    # one LLM call per iteration: the first, plus one more after each tool batch or wrap-up
    tool_batches = [m for m in history if m["role"] == "assistant" and m.get("tool_calls")]
    assert len(llm_steps) >= len(tool_batches) + 1
    assert result.input_tokens > 0 and result.output_tokens > 0
