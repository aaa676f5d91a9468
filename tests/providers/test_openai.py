"""The OpenAI adapter against Chat Completions wire payloads, served through httpx.MockTransport.

The real ``openai.AsyncOpenAI`` client runs unchanged; only its HTTP transport is replaced, so
these tests check the exact JSON we send and how the SDK's parsed answers and errors are mapped.
Fixtures in ``fixtures_openai/`` follow the documented wire format of the OpenAI API
(``chat.completion`` objects, SSE ``chat.completion.chunk`` streams, ``{"error": {...}}`` bodies);
the ``llamacpp_*`` ones were captured from llama-cpp-python's server running SmolLM2.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

openai = pytest.importorskip("openai")

from agentfootprint import providers  # noqa: E402
from agentfootprint.errors import (  # noqa: E402
    ConfigurationError,
    ContextWindowExceededError,
    ProviderError,
    ProviderUnavailableError,
)
from agentfootprint.providers import with_retry  # noqa: E402
from agentfootprint.providers._base import (  # noqa: E402
    LLMRequest,
    LLMResponse,
    Message,
    StreamChunk,
    ToolSchema,
)
from agentfootprint.providers._openai import RAW_ARGUMENTS_KEY, OpenAIProvider  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures_openai"
API = "https://api.openai.test/v1"
LOCAL = "http://127.0.0.1:8765/v1"

Handler = Callable[[httpx.Request], httpx.Response]

WEATHER: ToolSchema = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}
TIME: ToolSchema = {
    "name": "get_time",
    "description": "Local time in a time zone.",
    "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}},
}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def json_reply(name: str, status: int = 200) -> Handler:
    return lambda request: httpx.Response(
        status, text=fixture(name), headers={"content-type": "application/json"})


def sse_reply(name: str) -> Handler:
    return lambda request: httpx.Response(
        200, text=fixture(name), headers={"content-type": "text/event-stream"})


class Server:
    """A fake Chat Completions endpoint: answers from ``replies`` in turn, records requests."""

    def __init__(self, *replies: Handler) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        assert request.url.path.endswith("/chat/completions"), request.url
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply(request)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]

    @property
    def body(self) -> dict[str, Any]:
        assert len(self.requests) == 1, f"expected one request, got {len(self.requests)}"
        return self.bodies[0]


@pytest.fixture
async def http() -> AsyncIterator[Callable[[Server], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def make(server: Server) -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.MockTransport(server))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def provider(http: Callable[[Server], httpx.AsyncClient]) -> Callable[..., OpenAIProvider]:
    """``provider(server, base_url=None, **options)``: an OpenAIProvider wired to ``server``."""

    def make(server: Server, *, base_url: str | None = None, **options: Any) -> OpenAIProvider:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=base_url or API,
                                    http_client=http(server), max_retries=0)
        return OpenAIProvider(client=client, base_url=base_url, **options)

    return make


def request(*messages: Message, **fields: Any) -> LLMRequest:
    fields.setdefault("model", "gpt-4o-mini")
    default: list[Message] = [{"role": "user", "content": "Capital of France?"}]
    return LLMRequest(messages=list(messages) or default, **fields)


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


# ---------------------------------------------------------------------- requests


async def test_request_maps_every_message_kind_and_strips_framework_fields(provider: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    p = provider(server)
    await p.complete(request(
        {"role": "system", "content": "Be brief.", "injected_by": "skill:brevity"},
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
                        {"id": "call_2", "name": "get_time", "args": {}}]},
        {"role": "tool", "content": "18°C, clear", "tool_call_id": "call_1",
         "tool_name": "get_weather"},
        {"role": "tool", "content": "14:05", "tool_call_id": "call_2", "tool_name": "get_time"},
        {"role": "assistant", "content": "It is 18°C and 14:05."},
        {"role": "user", "content": "Thanks!", "injected_by": "test"},
        system="You are a helpful assistant.", tools=[WEATHER, TIME]))
    assert server.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_time", "arguments": "{}"}}]},
            {"role": "tool", "content": "18°C, clear", "tool_call_id": "call_1"},
            {"role": "tool", "content": "14:05", "tool_call_id": "call_2"},
            {"role": "assistant", "content": "It is 18°C and 14:05."},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": [
            {"type": "function", "function": {
                "name": "get_weather", "description": "Current weather for a city.",
                "parameters": WEATHER["input_schema"]}},
            {"type": "function", "function": {
                "name": "get_time", "description": "Local time in a time zone.",
                "parameters": TIME["input_schema"]}},
        ],
    }
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(("choice", "wire"), [
    ("auto", "auto"),
    ("none", "none"),
    ("required", "required"),
    ("get_time", {"type": "function", "function": {"name": "get_time"}}),
])
async def test_tool_choice_mapping(provider: Any, choice: str, wire: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    await provider(server).complete(request(tools=[WEATHER, TIME], tool_choice=choice))
    assert server.body["tool_choice"] == wire


async def test_no_tool_choice_sent_by_default(provider: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    await provider(server).complete(request(tools=[WEATHER]))
    assert "tool_choice" not in server.body
    server = Server(json_reply("chat_text.json"))
    await provider(server).complete(request())
    assert "tools" not in server.body and "tool_choice" not in server.body


async def test_forcing_an_unknown_tool_is_a_configuration_error(provider: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    with pytest.raises(ConfigurationError, match="get_stock"):
        await provider(server).complete(request(tools=[WEATHER], tool_choice="get_stock"))
    with pytest.raises(ConfigurationError, match="needs tools"):
        await provider(server).complete(request(tool_choice="get_weather"))
    assert server.requests == []


async def test_tool_message_without_call_id_is_refused_before_sending(provider: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    with pytest.raises(ConfigurationError, match="tool_call_id"):
        await provider(server).complete(request(
            {"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}))
    assert server.requests == []


async def test_max_completion_tokens_for_openai_max_tokens_for_compatible_servers(
        provider: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    await provider(server).complete(
        request(max_tokens=64, temperature=0.0, stop=["\n\n", "END"]))
    assert server.body["max_completion_tokens"] == 64
    assert "max_tokens" not in server.body
    assert server.body["temperature"] == 0.0
    assert server.body["stop"] == ["\n\n", "END"]

    local = Server(json_reply("chat_text.json"))
    await provider(local, base_url=LOCAL).complete(request(max_tokens=64))
    assert local.body["max_tokens"] == 64
    assert "max_completion_tokens" not in local.body
    assert "temperature" not in local.body and "stop" not in local.body
    assert str(local.requests[0].url) == f"{LOCAL}/chat/completions"


@pytest.mark.parametrize(("asked", "sent"), [
    ("", "gpt-4o"), ("openai", "gpt-4o"), ("gpt-4.1-nano", "gpt-4.1-nano")])
async def test_model_resolution(provider: Any, asked: str, sent: str) -> None:
    server = Server(json_reply("chat_text.json"))
    await provider(server, model="gpt-4o").complete(request(model=asked))
    assert server.body["model"] == sent


async def test_unparseable_arguments_are_sent_back_verbatim(provider: Any) -> None:
    server = Server(json_reply("chat_text.json"))
    await provider(server).complete(request(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "name": "get_weather",
                         "args": {RAW_ARGUMENTS_KEY: '{"city": "Par'}}]},
        {"role": "tool", "content": "error: bad arguments", "tool_call_id": "c1"}))
    sent = server.body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"city": "Par'


# ---------------------------------------------------------------------- answers


async def test_text_answer(provider: Any) -> None:
    response = await provider(Server(json_reply("chat_text.json"))).complete(request())
    assert response == LLMResponse(
        content="Paris.", tool_calls=[], stop_reason="stop", model="gpt-4o-mini-2024-07-18",
        provider_ref="chatcmpl-AqTqxRgVDKvrrkZ8YgqU3rFd9NhMa",
        usage={"input": 24, "output": 3, "cache_read": 0, "cache_write": 0})


async def test_tool_call_answer(provider: Any) -> None:
    response = await provider(Server(json_reply("chat_tool_calls.json"))).complete(
        request(tools=[WEATHER, TIME]))
    assert response.content == ""
    assert response.tool_calls == [
        {"id": "call_9XyJ1vJm8aQ6wNnW0yq6x2Ue", "name": "get_weather", "args": {"city": "Paris"}},
        {"id": "call_2bq7kCzXJ4Xj9FQ5mE0t8LrP", "name": "get_time",
         "args": {"tz": "Europe/Paris"}},
    ]
    assert response.stop_reason == "tool_use"
    assert (response.usage.input, response.usage.output, response.usage.cache_read) == (81, 46, 64)


async def test_forced_tool_call_finishing_with_stop_is_tool_use(provider: Any) -> None:
    response = await provider(Server(json_reply("chat_forced_tool_stop.json"))).complete(
        request(tools=[WEATHER], tool_choice="get_weather"))
    assert response.stop_reason == "tool_use"
    assert response.tool_calls[0]["args"] == {"city": "Oslo"}


async def test_length_finish_is_max_tokens(provider: Any) -> None:
    response = await provider(Server(json_reply("chat_length.json"))).complete(request())
    assert response.stop_reason == "max_tokens"


async def test_malformed_tool_arguments_are_kept_raw_not_emptied(provider: Any) -> None:
    response = await provider(Server(json_reply("chat_malformed_args.json"))).complete(
        request(tools=[WEATHER, TIME]))
    assert [call["args"] for call in response.tool_calls] == [
        {RAW_ARGUMENTS_KEY: '{"city": "Par'},   # truncated JSON
        {RAW_ARGUMENTS_KEY: '["Paris"]'},       # valid JSON, but not an object
        {},                                     # no arguments at all: a call without input
    ]


# ---------------------------------------------------------------------- streaming


async def test_stream_text_deltas_and_usage_chunk(provider: Any) -> None:
    server = Server(sse_reply("stream_text.sse"))
    chunks = await collect(provider(server).stream(request()))
    assert server.body["stream"] is True
    assert server.body["stream_options"] == {"include_usage": True}
    assert [c.content for c in chunks[:-1]] == ["The", " capital", " is", " Paris."]
    assert [c.index for c in chunks] == [0, 1, 2, 3, 4]
    assert not any(c.done for c in chunks[:-1])
    terminal = chunks[-1]
    assert terminal.done and terminal.content == ""
    assert terminal.response == LLMResponse(
        content="The capital is Paris.", stop_reason="stop", model="gpt-4o-mini-2024-07-18",
        provider_ref="chatcmpl-AqTsA1b2C3d4E5f6G7h8I9j0K1l2",
        usage={"input": 24, "output": 4, "cache_read": 0, "cache_write": 0})


async def test_stream_accumulates_tool_call_deltas_by_index(provider: Any) -> None:
    chunks = await collect(provider(Server(sse_reply("stream_tool_calls.sse"))).stream(
        request(tools=[WEATHER, TIME])))
    assert len(chunks) == 1
    response = chunks[0].response
    assert response is not None
    assert response.tool_calls == [
        {"id": "call_Qm7vX2", "name": "get_weather", "args": {"city": "Paris"}},
        {"id": "call_Rt8wY3", "name": "get_time", "args": {"tz": "Europe/Paris"}},
    ]
    assert response.stop_reason == "tool_use"
    assert (response.usage.input, response.usage.output) == (81, 46)


async def test_stream_from_llama_cpp_server_repeats_tool_name_and_reports_no_usage(
        provider: Any) -> None:
    """Captured from llama-cpp-python's server: the name comes with every delta, no usage."""
    chunks = await collect(provider(Server(sse_reply("llamacpp_stream_tool_call.sse")),
                                    base_url=LOCAL).stream(
        request(tools=[WEATHER], tool_choice="get_weather", model="smollm2")))
    response = chunks[-1].response
    assert response is not None
    assert [call["name"] for call in response.tool_calls] == ["get_weather"]
    assert isinstance(response.tool_calls[0]["args"], dict)
    assert RAW_ARGUMENTS_KEY not in response.tool_calls[0]["args"]
    assert response.usage.input == 0 and response.usage.output == 0  # "not reported"


async def test_stream_from_llama_cpp_server_ignores_include_usage(provider: Any) -> None:
    """Captured: llama-cpp-python accepts ``stream_options`` but never sends usage when streaming.

    The terminal response then says "not reported" (zeros); nothing is estimated.
    """
    server = Server(sse_reply("llamacpp_stream_text.sse"))
    chunks = await collect(provider(server, base_url=LOCAL).stream(request(model="smollm2")))
    assert server.body["stream_options"] == {"include_usage": True}
    assert len(chunks) > 2
    response = chunks[-1].response
    assert response is not None and response.content == "".join(c.content for c in chunks)
    assert response.usage.input == 0 and response.usage.output == 0


async def test_empty_stream_for_auto_tools_names_the_llama_cpp_limitation(provider: Any) -> None:
    """llama-cpp-python answers 200 with an empty body when tools are streamed with auto."""
    empty = Server(lambda r: httpx.Response(200, text="",
                                            headers={"content-type": "text/event-stream"}))
    with pytest.raises(ProviderError, match="call complete") as caught:
        await collect(provider(empty, base_url=LOCAL).stream(request(tools=[WEATHER])))
    assert caught.value.retryable is False


async def test_stream_without_usage_option(provider: Any) -> None:
    server = Server(sse_reply("stream_text.sse"))
    await collect(provider(server, stream_usage=False).stream(request()))
    assert "stream_options" not in server.body


async def test_stream_error_event_after_content_is_a_provider_error(provider: Any) -> None:
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError, match="server had an error") as caught:
        async for chunk in provider(Server(sse_reply("stream_error_midway.sse"))).stream(
                request()):
            received.append(chunk)
    assert [c.content for c in received] == ["Par"]
    assert isinstance(caught.value.__cause__, openai.APIError)


async def test_stream_that_sends_nothing_is_an_error(provider: Any) -> None:
    empty = Server(lambda r: httpx.Response(200, text="data: [DONE]\n\n",
                                            headers={"content-type": "text/event-stream"}))
    with pytest.raises(ProviderError, match="without sending anything"):
        await collect(provider(empty).stream(request()))


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize(("status", "name", "retryable"), [
    (400, "error_400.json", False),
    (401, "error_401.json", False),
    (429, "error_429.json", True),
    (500, "error_500.json", True),
])
@pytest.mark.parametrize("streamed", [False, True])
async def test_http_errors_keep_status_and_retryability(
        provider: Any, status: int, name: str, retryable: bool, streamed: bool) -> None:
    p = provider(Server(json_reply(name, status)))
    with pytest.raises(ProviderError) as caught:
        if streamed:
            await collect(p.stream(request()))
        else:
            await p.complete(request())
    error = caught.value
    assert type(error) is ProviderError
    assert error.status == status
    assert error.retryable is retryable
    assert error.provider == "openai"
    assert isinstance(error.__cause__, openai.APIStatusError)
    assert error.__cause__.status_code == status
    message = json.loads(fixture(name))["error"]["message"]
    assert message in str(error) and f"HTTP {status}" in str(error)
    if status == 401:
        assert "OPENAI_API_KEY" in str(error)


async def test_context_length_is_context_window_exceeded(provider: Any) -> None:
    with pytest.raises(ContextWindowExceededError) as caught:
        await provider(Server(json_reply("error_context_length.json", 400))).complete(request())
    assert caught.value.status == 400
    assert caught.value.retryable is False
    assert "maximum context length is 128000" in str(caught.value)


async def test_context_length_recognised_by_message_without_code(provider: Any) -> None:
    """llama-cpp-python phrases it like OpenAI; other servers only say it in the message."""
    body = {"error": {"message": "the request exceeds the available context size, try "
                                 "increasing the context window", "type": "invalid_request_error"}}
    server = Server(lambda r: httpx.Response(400, json=body))
    with pytest.raises(ContextWindowExceededError):
        await provider(server, base_url=LOCAL).complete(request())


async def test_missing_model_is_unavailable_and_not_retried(provider: Any) -> None:
    with pytest.raises(ProviderUnavailableError, match="gpt-9") as caught:
        await provider(Server(json_reply("error_404_model.json", 404))).complete(
            request(model="gpt-9"))
    assert caught.value.status == 404 and caught.value.retryable is False


async def test_connection_refused_is_unavailable_with_the_fix(provider: Any) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    for call in ("complete", "stream"):
        p = provider(Server(refuse), base_url=LOCAL)
        with pytest.raises(ProviderUnavailableError) as caught:
            if call == "stream":
                await collect(p.stream(request()))
            else:
                await p.complete(request())
        message = str(caught.value)
        assert LOCAL in message and "Connection refused" in message
        assert "start the server" in message
        assert caught.value.status is None and caught.value.retryable is True
        assert isinstance(caught.value.__cause__, openai.APIConnectionError)


async def test_timeout_is_a_retryable_provider_error(provider: Any) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(ProviderError, match="did not answer in time") as caught:
        await provider(Server(slow)).complete(request())
    assert caught.value.retryable is True
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)


# ---------------------------------------------------------------------- resilience


async def test_with_retry_retries_a_500_then_streams(provider: Any) -> None:
    server = Server(json_reply("error_500.json", 500), sse_reply("stream_text.sse"))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    retried = with_retry(provider(server), max_attempts=3, initial_delay=0.5, sleep=sleep)
    chunks = await collect(retried.stream(request()))
    assert len(server.requests) == 2
    assert server.bodies[0] == server.bodies[1]
    assert slept == [0.5]
    assert "".join(c.content for c in chunks) == "The capital is Paris."
    assert chunks[-1].response is not None and chunks[-1].response.usage.input == 24


async def test_with_retry_does_not_retry_a_401(provider: Any) -> None:
    server = Server(json_reply("error_401.json", 401))

    async def sleep(seconds: float) -> None:
        raise AssertionError("no retry expected")

    with pytest.raises(ProviderError):
        await with_retry(provider(server), sleep=sleep).complete(request())
    assert len(server.requests) == 1


# ---------------------------------------------------------------------- construction


def test_factory_builds_the_provider_and_survives_the_submodule_import() -> None:
    import agentfootprint.providers._openai  # noqa: F401  (binds the submodule on the package)

    p = providers.openai(base_url=LOCAL, model="smollm2", retry=None)
    assert isinstance(p, OpenAIProvider)
    assert (p.streams, p.name, p.model) == (True, "openai", "smollm2")
    assert (p.client.api_key, p.client.max_retries) == ("none", 0)
    assert str(p.client.base_url).rstrip("/") == LOCAL
    asyncio.run(p.client.close())


def test_importing_the_package_does_not_load_the_sdk() -> None:
    script = "import sys, agentfootprint.providers; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_api_key_from_environment_or_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    p = OpenAIProvider(timeout=5.0)
    assert p.client.api_key == "sk-from-env"
    assert p.client.timeout == 5.0
    asyncio.run(p.client.close())
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIProvider()


def test_missing_sdk_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[openai\]"'):
        OpenAIProvider(base_url=LOCAL)
