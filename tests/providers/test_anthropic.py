"""The Anthropic adapter through the real SDK, against recorded Messages API payloads."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from agentfootprint import providers  # noqa: E402
from agentfootprint.errors import (  # noqa: E402
    ConfigurationError,
    ContextWindowExceededError,
    ProviderError,
    ProviderUnavailableError,
)
from agentfootprint.providers._anthropic import AnthropicProvider  # noqa: E402
from agentfootprint.providers._base import LLMRequest, Message, StreamChunk  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures_anthropic"
ERRORS = json.loads((FIXTURES / "errors.json").read_text())

Handler = Callable[[Any], Any]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class Server:
    """A fake Messages API: answers every request with ``handler``, records what it got."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return self.handler(request)

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)  # type: ignore[no-any-return]


def json_reply(name: str) -> Handler:
    return lambda request: sdk_httpx.Response(
        200, text=fixture(name),
        headers={"content-type": "application/json", "request-id": "req_test"})


def sse_reply(name: str) -> Handler:
    return lambda request: sdk_httpx.Response(
        200, text=fixture(name),
        headers={"content-type": "text/event-stream; charset=utf-8", "request-id": "req_test"})


def error_reply(status: int, key: str | None = None) -> Handler:
    return lambda request: sdk_httpx.Response(
        status, json=ERRORS[key or str(status)],
        headers={"request-id": ERRORS[key or str(status)]["request_id"]})


def _sdk_httpx() -> Any:
    """The HTTP library this SDK version is built on: ``httpx``, or ``httpx2`` for anthropic>=2."""
    base = next(cls for cls in anthropic.DefaultAsyncHttpxClient.__mro__
                if cls.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.partition(".")[0])


sdk_httpx = _sdk_httpx()


def make(server: Server, **options: Any) -> AnthropicProvider:
    client = anthropic.AsyncAnthropic(
        api_key="test", max_retries=0,
        http_client=sdk_httpx.AsyncClient(transport=sdk_httpx.MockTransport(server)))
    return AnthropicProvider(client=client, **options)


def request(**fields: Any) -> LLMRequest:
    fields.setdefault("model", "claude-sonnet-4-6")
    fields.setdefault("messages", [{"role": "user", "content": "What is the capital of France?"}])
    return LLMRequest(**fields)


async def collect(provider: AnthropicProvider, req: LLMRequest) -> list[StreamChunk]:
    return [chunk async for chunk in provider.stream(req)]


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                      "unit": {"type": "string"}},
                     "required": ["city"]},
}
TIME_TOOL = {"name": "get_time", "description": "Local time.",
             "input_schema": {"type": "object", "properties": {}}}


# -- construction ----------------------------------------------------------------------------


def test_builds_sdk_client_without_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without client=, an AsyncAnthropic is built with the key, the timeout and no SDK retries."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider(api_key="sk-ant-test", timeout=30.0)
    assert isinstance(provider.client, anthropic.AsyncAnthropic)
    assert provider.client.api_key == "sk-ant-test"
    assert provider.client.max_retries == 0
    assert provider.client.timeout == 30.0
    assert (provider.name, provider.model, provider.max_tokens, provider.streams) == (
        "anthropic", "claude-sonnet-4-6", 4096, True)


def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no api_key=, the key comes from ANTHROPIC_API_KEY."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    assert AnthropicProvider().client.api_key == "sk-ant-env"


def test_missing_api_key_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials anywhere is a ConfigurationError at construction naming ANTHROPIC_API_KEY."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE",
                "ANTHROPIC_CONFIG_DIR", "ANTHROPIC_FEDERATION_RULE_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no SDK profiles on disk either
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider()


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK installed, construction says to pip install the anthropic extra."""
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[anthropic\]"'):
        AnthropicProvider(api_key="x")


def test_factory_builds_provider() -> None:
    """providers.anthropic(...) builds an AnthropicProvider, also after the submodule import."""
    assert callable(providers.anthropic)
    provider = providers.anthropic(api_key="x", model="claude-opus-4-1")
    assert isinstance(provider.inner, AnthropicProvider)  # type: ignore[attr-defined]
    assert provider.model == "claude-opus-4-1"
    assert isinstance(providers.anthropic(api_key="x", retry=None), AnthropicProvider)


# -- request body ----------------------------------------------------------------------------


async def test_request_body_maps_messages_tools_and_choice() -> None:
    """The exact Messages API body: system folded, blocks, coalesced tool results, tools, choice."""
    server = Server(json_reply("message_text.json"))
    messages: list[Message] = [
        {"role": "user", "content": "Weather in Paris and Lyon?"},
        {"role": "assistant", "content": "I'll check both.",
         "tool_calls": [
             {"id": "toolu_01", "name": "get_weather", "args": {"city": "Paris"}},
             {"id": "toolu_02", "name": "get_weather", "args": {"city": "Lyon"}}]},
        {"role": "tool", "content": "18°C, sunny", "tool_call_id": "toolu_01",
         "tool_name": "get_weather"},
        {"role": "tool", "content": "15°C, rain", "tool_call_id": "toolu_02",
         "tool_name": "get_weather"},
        {"role": "system", "content": "Answer in French.", "injected_by": "steering:french"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "toolu_03", "name": "get_time", "args": {}}]},
        {"role": "tool", "content": "14:05", "tool_call_id": "toolu_03"},
        {"role": "user", "content": "Thanks!"},
    ]
    await make(server).complete(request(
        system="You are a weather bot.", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL],
        tool_choice="required", max_tokens=512, temperature=0.3, stop=["\n\nHuman:"]))
    [sent] = server.requests
    assert sent.method == "POST"
    assert sent.url.path == "/v1/messages"
    assert "test" in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])
    assert "anthropic-version" in sent.headers
    assert server.body() == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 512,
        "system": "You are a weather bot.\n\nAnswer in French.",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Lyon?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll check both."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                 "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_02", "name": "get_weather",
                 "input": {"city": "Lyon"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18°C, sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_02", "content": "15°C, rain"},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_03", "name": "get_time", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_03", "content": "14:05"},
            ]},
            {"role": "user", "content": "Thanks!"},
        ],
        "temperature": 0.3,
        "stop_sequences": ["\n\nHuman:"],
        "tools": [
            {"name": "get_weather", "description": "Current weather for a city.",
             "input_schema": WEATHER_TOOL["input_schema"]},
            {"name": "get_time", "description": "Local time.",
             "input_schema": {"type": "object", "properties": {}}},
        ],
        "tool_choice": {"type": "any"},
    }


async def test_minimal_body_uses_defaults() -> None:
    """A bare request sends model, default max_tokens and the user message, nothing else."""
    server = Server(json_reply("message_text.json"))
    await make(server, max_tokens=1024).complete(request())
    assert server.body() == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    }


async def test_provider_name_as_model_means_default_model() -> None:
    """A request whose model is the provider's name ('anthropic') uses the provider's model."""
    server = Server(json_reply("message_text.json"))
    await make(server, model="claude-haiku-4-5").complete(request(model="anthropic"))
    assert server.body()["model"] == "claude-haiku-4-5"


async def test_tool_result_after_plain_user_message_opens_new_user_message() -> None:
    """A tool result after a string-content user message starts its own user message."""
    server = Server(json_reply("message_text.json"))
    await make(server).complete(request(messages=[
        {"role": "user", "content": "hi"},
        {"role": "tool", "content": "result", "tool_call_id": "toolu_9"},
        {"role": "tool", "content": "second", "tool_call_id": "toolu_10"},
    ]))
    assert server.body()["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "result"},
            {"type": "tool_result", "tool_use_id": "toolu_10", "content": "second"}]},
    ]


async def test_empty_assistant_message_is_left_out() -> None:
    """An assistant message with no text and no tool calls is not sent (the API rejects it)."""
    server = Server(json_reply("message_text.json"))
    await make(server).complete(request(messages=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "hello?"},
    ]))
    assert server.body()["messages"] == [{"role": "user", "content": "hi"},
                                         {"role": "user", "content": "hello?"}]


@pytest.mark.parametrize(("tool_choice", "parallel", "expected"), [
    (None, None, None),
    ("auto", None, None),
    ("auto", True, None),
    (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
    ("none", None, {"type": "none"}),
    ("none", False, {"type": "none"}),
    ("required", None, {"type": "any"}),
    ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
    ("get_weather", None, {"type": "tool", "name": "get_weather"}),
    ("get_weather", False, {"type": "tool", "name": "get_weather",
                            "disable_parallel_tool_use": True}),
])
async def test_tool_choice_mapping(tool_choice: str | None, parallel: bool | None,
                                   expected: dict[str, Any] | None) -> None:
    """tool_choice and parallel_tool_calls map to Anthropic's tool_choice object (auto omitted)."""
    server = Server(json_reply("message_text.json"))
    await make(server, parallel_tool_calls=parallel).complete(
        request(tools=[WEATHER_TOOL], tool_choice=tool_choice))
    assert server.body().get("tool_choice") == expected


async def test_tool_choice_needs_tools() -> None:
    """Without tools no tool_choice is sent, whatever was asked (the API would reject it)."""
    server = Server(json_reply("message_text.json"))
    await make(server, parallel_tool_calls=False).complete(request(tool_choice="required"))
    assert "tool_choice" not in server.body() and "tools" not in server.body()


# -- responses -------------------------------------------------------------------------------


async def test_text_response_is_parsed() -> None:
    """Text, real usage, end_turn → stop, model and the message id as provider_ref."""
    response = await make(Server(json_reply("message_text.json"))).complete(request())
    assert response.content == "The capital of France is Paris."
    assert response.tool_calls == []
    assert response.usage.model_dump() == {"input": 21, "output": 10, "cache_read": 0,
                                           "cache_write": 0}
    assert response.stop_reason == "stop"
    assert response.model == "claude-sonnet-4-5-20250929"
    assert response.provider_ref == "msg_01XFDUDYJgAACzvnptvVoYEL"


async def test_tool_use_response_is_parsed_with_cache_usage() -> None:
    """tool_use blocks become tool calls; cache read/creation tokens land in usage, and input
    counts every prompt token (472 uncached + 2048 read + 1024 written), as on OpenAI."""
    response = await make(Server(json_reply("message_tool_use.json"))).complete(
        request(tools=[WEATHER_TOOL]))
    assert response.content == "I'll check the weather in both cities."
    assert response.tool_calls == [
        {"id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
         "args": {"city": "Paris", "unit": "celsius"}},
        {"id": "toolu_01BZmq8WcV4nT3K2uXyQ7pLs", "name": "get_weather",
         "args": {"city": "Lyon", "unit": "celsius"}},
    ]
    assert response.stop_reason == "tool_use"
    assert response.usage.model_dump() == {"input": 3544, "output": 89, "cache_read": 2048,
                                           "cache_write": 1024}


@pytest.mark.parametrize(("name", "stop_reason"), [
    ("message_max_tokens.json", "max_tokens"),
    ("message_stop_sequence.json", "stop"),
])
async def test_stop_reasons_are_normalised(name: str, stop_reason: str) -> None:
    """max_tokens stays max_tokens and stop_sequence is stop; null cache counts read as 0."""
    response = await make(Server(json_reply(name))).complete(request())
    assert response.stop_reason == stop_reason
    assert response.usage.cache_read == 0 and response.usage.cache_write == 0


async def test_complete_with_huge_max_tokens_streams_under_the_hood() -> None:
    """A max_tokens the SDK will only stream is sent streamed and still returns one response."""
    server = Server(sse_reply("stream_text.sse"))
    response = await make(server).complete(request(max_tokens=64000))
    assert server.body()["stream"] is True
    assert server.body()["max_tokens"] == 64000
    assert response.content == "The capital of France is Paris."
    assert (response.usage.input, response.usage.output) == (21, 10)


# -- streaming -------------------------------------------------------------------------------


async def test_stream_yields_text_deltas_then_terminal_response() -> None:
    """SSE text deltas become chunks; the terminal chunk carries the final message and usage."""
    server = Server(sse_reply("stream_text.sse"))
    chunks = await collect(make(server), request(system="Be brief."))
    assert [(c.index, c.content, c.done) for c in chunks] == [
        (0, "The capital", False), (1, " of France", False), (2, " is Paris.", False),
        (3, "", True)]
    response = chunks[-1].response
    assert response is not None
    assert response.content == "The capital of France is Paris."
    assert (response.usage.input, response.usage.output) == (21, 10)
    assert response.stop_reason == "stop"
    assert response.provider_ref == "msg_01UvGr2q6Xy3cAm8KkqjPdGt"
    assert server.body() == {
        "model": "claude-sonnet-4-6", "max_tokens": 4096, "system": "Be brief.",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "stream": True}


async def test_stream_tool_use_arrives_whole_on_terminal_response() -> None:
    """Streamed input_json_delta pieces are assembled into the terminal response's tool call."""
    chunks = await collect(make(Server(sse_reply("stream_tool_use.sse"))),
                           request(tools=[WEATHER_TOOL]))
    assert [c.content for c in chunks[:-1]] == ["Let me check", " the weather."]
    response = chunks[-1].response
    assert response is not None
    assert response.content == "Let me check the weather."
    assert response.tool_calls == [{"id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                                    "name": "get_weather",
                                    "args": {"city": "Paris", "unit": "celsius"}}]
    assert response.stop_reason == "tool_use"
    assert response.usage.model_dump() == {"input": 2520, "output": 64, "cache_read": 2048,
                                           "cache_write": 0}  # input: 472 + 2048 read


async def test_stream_error_event_is_retryable_overloaded() -> None:
    """An overloaded_error event mid-stream (HTTP 200) raises a retryable ProviderError 529."""
    seen: list[str] = []
    with pytest.raises(ProviderError) as info:
        async for chunk in make(Server(sse_reply("stream_overloaded.sse"))).stream(request()):
            seen.append(chunk.content)
    assert seen == ["The capital"]
    assert info.value.status == 529
    assert info.value.retryable is True
    assert "Overloaded" in str(info.value)
    assert isinstance(info.value.__cause__, anthropic.APIStatusError)


async def test_stream_http_error_before_any_chunk() -> None:
    """A 429 answer to a streamed call raises ProviderError 429 before anything is yielded."""
    with pytest.raises(ProviderError) as info:
        await collect(make(Server(error_reply(429))), request())
    assert (info.value.status, info.value.retryable) == (429, True)


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "retryable"), [
    (400, False), (401, False), (403, False), (404, False), (413, False),
    (429, True), (500, True), (529, True),
])
async def test_http_errors_keep_status_and_retryability(status: int, retryable: bool) -> None:
    """Each error status becomes a ProviderError with that status, its text and retryability."""
    with pytest.raises(ProviderError) as info:
        await make(Server(error_reply(status))).complete(request(model="claude-sonnet-9"))
    error = info.value
    assert type(error) is ProviderError
    assert error.status == status
    assert error.retryable is retryable
    assert error.provider == "anthropic"
    expected = ERRORS[str(status)]["error"]
    assert f"[anthropic] {status} {expected['type']}: {expected['message']}" in str(error)
    assert isinstance(error.__cause__, anthropic.APIStatusError)
    assert error.__cause__.status_code == status


async def test_auth_error_names_the_key() -> None:
    """A 401 tells you to check ANTHROPIC_API_KEY."""
    with pytest.raises(ProviderError, match="check ANTHROPIC_API_KEY"):
        await make(Server(error_reply(401))).complete(request())


async def test_unknown_model_names_the_model() -> None:
    """A 404 about the model says which model name to check."""
    with pytest.raises(ProviderError, match=r"check the model name \('claude-sonnet-9'\)"):
        await make(Server(error_reply(404))).complete(request(model="claude-sonnet-9"))


@pytest.mark.parametrize("key", ["prompt_too_long", "context_limit"])
async def test_prompt_too_long_is_context_window_error(key: str) -> None:
    """A 400 saying the prompt does not fit raises ContextWindowExceededError, never retryable."""
    with pytest.raises(ContextWindowExceededError) as info:
        await make(Server(error_reply(400, key))).complete(request())
    assert info.value.status == 400
    assert info.value.retryable is False
    assert ERRORS[key]["error"]["message"] in str(info.value)
    assert isinstance(info.value.__cause__, anthropic.BadRequestError)


async def test_connection_error_is_unavailable() -> None:
    """A connection failure raises ProviderUnavailableError naming the API it could not reach."""
    def refuse(request: Any) -> Any:
        raise sdk_httpx.ConnectError("[Errno 111] Connection refused", request=request)
    for call in ("complete", "stream"):
        with pytest.raises(ProviderUnavailableError) as info:
            provider = make(Server(refuse))
            if call == "complete":
                await provider.complete(request())
            else:
                await collect(provider, request())
        assert "could not reach the Anthropic API at https://api.anthropic.com" in str(info.value)
        assert info.value.status is None and info.value.retryable is True
        assert isinstance(info.value.__cause__, anthropic.APIConnectionError)


async def test_timeout_is_retryable_provider_error() -> None:
    """A timed-out request is a retryable ProviderError (the server may just be slow)."""
    def slow(request: Any) -> Any:
        raise sdk_httpx.ReadTimeout("timed out", request=request)
    with pytest.raises(ProviderError) as info:
        await make(Server(slow)).complete(request())
    assert not isinstance(info.value, ProviderUnavailableError)
    assert info.value.retryable is True
    assert isinstance(info.value.__cause__, anthropic.APITimeoutError)
