"""Structured output through the real OpenAI and Anthropic SDKs, against recorded payloads.

Only the SDKs' HTTP transport is replaced (``httpx.MockTransport``, as in ``test_openai.py`` and
``test_anthropic.py``), so these tests check the exact JSON body sent — ``response_format`` for
OpenAI, the forced final-answer tool for Anthropic — and how the answers come back. Fixtures in
``fixtures_structured/``: the ``openai_*`` and ``anthropic_*`` ones follow the APIs' documented
wire format; the ``llamacpp_*`` ones were captured from llama-cpp-python 0.3.36's server (the one
the CI runs) serving SmolLM2, with ``response_format`` ``json_object`` + ``schema`` (a grammar)
and its refusal of ``json_schema``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from agentfootprint import Agent, tool  # noqa: E402
from agentfootprint.errors import ProviderError  # noqa: E402
from agentfootprint.providers import with_retry  # noqa: E402
from agentfootprint.providers._anthropic import AnthropicProvider  # noqa: E402
from agentfootprint.providers._base import LLMRequest  # noqa: E402
from agentfootprint.providers._openai import OpenAIProvider  # noqa: E402
from agentfootprint.runs import trace  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures_structured"
API = "https://api.openai.test/v1"
LOCAL = "http://127.0.0.1:8765/v1"


class RefundDecision(BaseModel):
    approved: bool
    reason: str


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class Server:
    """A fake endpoint: answers with ``replies`` in turn (the last one repeats), records bodies."""

    def __init__(self, *replies: Callable[[Any], Any]) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply(request)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]


def reply(http: Any, name: str, status: int = 200) -> Callable[[Any], Any]:
    kind = "text/event-stream" if name.endswith(".sse") else "application/json"
    return lambda request: http.Response(status, text=fixture(name),
                                         headers={"content-type": kind})


# ---------------------------------------------------------------------- OpenAI


def openai_provider(server: Server, **options: Any) -> OpenAIProvider:
    base_url = options.pop("base_url", None)
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=base_url or API, max_retries=0,
                                http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)))
    return OpenAIProvider(client=client, base_url=base_url, **options)


async def test_openai_agent_sends_json_schema_and_re_asks_a_wrong_field() -> None:
    """Through the real SDK: response_format json_schema (strict) on every call; the first
    answer's 'approved' is not a bool, so the second request carries the answer and the error."""
    server = Server(reply(httpx, "openai_json_wrong.json"), reply(httpx, "openai_json_right.json"))
    agent = Agent(provider=openai_provider(server), model="gpt-4o-mini",
                  output_type=RefundDecision)
    result = await agent.run("Refund order A-1001?")

    assert result.output == RefundDecision(approved=False,
                                           reason="delivered more than 30 days ago")
    first, second = server.bodies
    for body in (first, second):
        assert body["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "RefundDecision", "strict": True, "schema": {
                "type": "object", "title": "RefundDecision", "additionalProperties": False,
                "required": ["approved", "reason"],
                "properties": {"approved": {"title": "Approved", "type": "boolean"},
                               "reason": {"title": "Reason", "type": "string"}}}}}
    assert second["messages"][-2] == {
        "role": "assistant", "content": '{"approved":"perhaps","reason":"the order is old"}'}
    assert second["messages"][-1]["role"] == "user"
    assert "field 'approved'" in second["messages"][-1]["content"]
    assert [a["valid"] for a in result.recording.state[trace.OUTPUT_ATTEMPTS]] == [False, True]
    assert result.recording.state[trace.OUTPUT_SCHEMA]["mode"] == "json_schema"


async def test_openai_response_format_rides_along_with_tools() -> None:
    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return "delivered"

    server = Server(reply(httpx, "openai_json_right.json"))
    agent = Agent(provider=openai_provider(server), model="gpt-4o-mini", tools=[lookup],
                  output_type=RefundDecision)
    await agent.run("Refund?")
    body = server.bodies[0]
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]
    assert body["response_format"]["type"] == "json_schema"
    assert "tool_choice" not in body


async def test_llamacpp_json_object_dialect_sends_the_schema_for_its_grammar() -> None:
    """llama-cpp-python's server: response_format {"type": "json_object", "schema": ...} — its
    recorded answer (grammar-constrained) validates."""

    class Verdict(BaseModel):
        answer: str
        confident: bool

    server = Server(reply(httpx, "llamacpp_json_object.json"))
    provider = openai_provider(server, base_url=LOCAL, structured_output="json_object")
    result = await Agent(provider=provider, model="smollm2", output_type=Verdict).run(
        "Is Paris in France?")
    assert result.output == Verdict(answer="yes", confident=True)
    fmt = server.bodies[0]["response_format"]
    assert fmt["type"] == "json_object"
    assert fmt["schema"]["required"] == ["answer", "confident"]


async def test_llamacpp_streamed_json_object_answer_validates() -> None:
    class Verdict(BaseModel):
        answer: str
        confident: bool

    server = Server(reply(httpx, "llamacpp_stream_json_object.sse"))
    provider = openai_provider(server, base_url=LOCAL, structured_output="json_object")
    agent = Agent(provider=provider, model="smollm2", output_type=Verdict, stream=True)
    result = await agent.run("Is Paris in France?")
    assert result.output == Verdict(answer="yes", confident=True)
    assert server.bodies[0]["stream"] is True and "response_format" in server.bodies[0]


async def test_llamacpp_refusing_json_schema_is_not_retried_and_names_the_fix() -> None:
    """That server answers HTTP 500 to response_format json_schema: a retry cannot help, so the
    error is not retryable and says which option to use."""
    server = Server(reply(httpx, "llamacpp_json_schema_refused.json", status=500))
    provider = with_retry(openai_provider(server, base_url=LOCAL), initial_delay=0)
    request = LLMRequest(model="smollm2", messages=[{"role": "user", "content": "hi"}],
                         output_schema={"name": "V", "schema": {"type": "object"},
                                        "strict": False})
    with pytest.raises(ProviderError, match="structured_output='json_object'") as raised:
        await provider.complete(request)
    assert raised.value.retryable is False and raised.value.status == 500
    assert len(server.requests) == 1


async def test_openai_tool_dialect_sends_no_response_format_but_the_final_answer_tool() -> None:
    server = Server(lambda request: httpx.Response(200, json={
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function", "function": {
                    "name": "final_result",
                    "arguments": '{"approved": true, "reason": "fine"}'}}]}}]}))
    provider = openai_provider(server, structured_output="tool")
    result = await Agent(provider=provider, model="m", output_type=RefundDecision).run("x")
    assert result.output == RefundDecision(approved=True, reason="fine")
    body = server.bodies[0]
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["final_result"]
    assert body["tool_choice"] == "required"


# ---------------------------------------------------------------------- Anthropic


def _sdk_httpx() -> Any:
    """The HTTP library this SDK version is built on: ``httpx``, or ``httpx2`` for anthropic>=2."""
    base = next(cls for cls in anthropic.DefaultAsyncHttpxClient.__mro__
                if cls.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.partition(".")[0])


sdk_httpx = _sdk_httpx()


def anthropic_provider(server: Server, **options: Any) -> AnthropicProvider:
    client = anthropic.AsyncAnthropic(
        api_key="test", max_retries=0,
        http_client=sdk_httpx.AsyncClient(transport=sdk_httpx.MockTransport(server)))
    return AnthropicProvider(client=client, **options)


async def test_anthropic_agent_forces_the_final_answer_tool_and_re_asks() -> None:
    server = Server(reply(sdk_httpx, "anthropic_final_result_wrong.json"),
                    reply(sdk_httpx, "anthropic_final_result.json"))
    agent = Agent(provider=anthropic_provider(server), model="claude-sonnet-4-5",
                  output_type=RefundDecision)
    result = await agent.run("Refund order A-1001?")

    assert result.output == RefundDecision(approved=False,
                                           reason="delivered more than 30 days ago")
    assert json.loads(result.content) == {"approved": False,
                                          "reason": "delivered more than 30 days ago"}
    first, second = server.bodies
    for body in (first, second):
        assert body["tool_choice"] == {"type": "tool", "name": "final_result"}
        (only,) = body["tools"]
        assert only["name"] == "final_result"
        assert only["input_schema"]["required"] == ["approved", "reason"]
        assert only["input_schema"]["properties"]["approved"]["type"] == "boolean"
    # the failed answer goes back as the assistant's text, then the errors by field
    assert second["messages"][-2] == {"role": "assistant", "content": [
        {"type": "text", "text": '{"approved": "perhaps", "reason": "the order is old"}'}]}
    assert "field 'approved'" in second["messages"][-1]["content"]
    assert result.recording.state[trace.OUTPUT_SCHEMA]["mode"] == "forced_tool"
    assert result.recording.state[trace.LLM_TOOL_CALLS] == []
    assert result.recording.state[trace.STOP_REASON] == "stop"


async def test_anthropic_beside_other_tools_asks_for_any_tool() -> None:
    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return "delivered"

    server = Server(reply(sdk_httpx, "anthropic_final_result.json"))
    agent = Agent(provider=anthropic_provider(server, parallel_tool_calls=False),
                  model="claude-sonnet-4-5", tools=[lookup], output_type=RefundDecision)
    result = await agent.run("Refund?")
    body = server.bodies[0]
    assert [t["name"] for t in body["tools"]] == ["lookup", "final_result"]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert result.output is not None and result.output.approved is False


async def test_anthropic_streamed_final_answer_tool_is_the_output() -> None:
    server = Server(reply(sdk_httpx, "anthropic_stream_final_result.sse"))
    agent = Agent(provider=anthropic_provider(server), model="claude-sonnet-4-5",
                  output_type=RefundDecision, stream=True)
    result = await agent.run("Refund?")
    assert result.output == RefundDecision(approved=False,
                                           reason="delivered more than 30 days ago")
    assert server.bodies[0]["stream"] is True
    assert server.bodies[0]["tool_choice"] == {"type": "tool", "name": "final_result"}


# ---------------------------------------------------------------------- Ollama


async def test_ollama_sends_the_schema_as_format() -> None:
    from agentfootprint.providers._ollama import OllamaProvider

    answers = iter(['{"approved": "perhaps", "reason": "old"}',
                    '{"approved": false, "reason": "delivered more than 30 days ago"}'])
    server = Server(lambda request: httpx.Response(200, json={
        "model": "llama3.2", "created_at": "2026-12-01T21:00:00Z",
        "message": {"role": "assistant", "content": next(answers)},
        "done": True, "done_reason": "stop", "prompt_eval_count": 40, "eval_count": 12}))
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    provider = OllamaProvider(base_url="http://127.0.0.1:11434", client=client)
    try:
        result = await Agent(provider=provider, model="llama3.2",
                             output_type=RefundDecision).run("Refund?")
    finally:
        await client.aclose()
    assert result.output == RefundDecision(approved=False,
                                           reason="delivered more than 30 days ago")
    for body in server.bodies:
        assert body["format"]["required"] == ["approved", "reason"]
        assert body["format"]["properties"]["approved"] == {"title": "Approved",
                                                            "type": "boolean"}
    assert "field 'approved'" in server.bodies[1]["messages"][-1]["content"]
