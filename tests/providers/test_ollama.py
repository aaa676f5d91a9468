"""The Ollama adapter against recorded /api/chat payloads, served through httpx.MockTransport."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentfootprint import providers
from agentfootprint.errors import (
    ContextWindowExceededError,
    ProviderError,
    ProviderUnavailableError,
)
from agentfootprint.providers._base import LLMRequest, Message
from agentfootprint.providers._ollama import OllamaProvider, resolve_base_url

FIXTURES = Path(__file__).parent / "fixtures_ollama"
BASE = "http://ollama.test:11434"

Handler = Callable[[httpx.Request], Any]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class Server:
    """A fake Ollama: routes by path, records every request it receives."""

    def __init__(self, chat: Handler, tags: Handler | None = None) -> None:
        self.chat = chat
        self.tags = tags
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/api/chat":
            result = self.chat(request)
        elif request.url.path == "/api/tags" and self.tags is not None:
            result = self.tags(request)
        else:
            return httpx.Response(404, text="404 page not found")
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, httpx.Response)
        return result

    def bodies(self, path: str = "/api/chat") -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


def json_reply(name: str, status: int = 200) -> Handler:
    return lambda request: httpx.Response(status, text=fixture(name),
                                          headers={"content-type": "application/json"})


def ndjson_reply(text: str) -> Handler:
    return lambda request: httpx.Response(200, text=text,
                                          headers={"content-type": "application/x-ndjson"})


def error_reply(status: int, message: str) -> Handler:
    return lambda request: httpx.Response(status, json={"error": message})


def make(server: Server, **options: Any) -> OllamaProvider:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    return OllamaProvider(base_url=BASE, client=client, **options)


def request(**fields: Any) -> LLMRequest:
    fields.setdefault("model", "llama3.2")
    fields.setdefault("messages", [{"role": "user", "content": "What is the capital of France?"}])
    return LLMRequest(**fields)


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}


# -- base URL --------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "env", "expected"), [
    (None, None, "http://localhost:11434"),
    (None, "0.0.0.0:11434", "http://0.0.0.0:11434"),
    (None, "http://gpu-box:11434/", "http://gpu-box:11434"),
    ("http://gpu-box:11434/v1", "http://ignored:1", "http://gpu-box:11434"),
    ("http://gpu-box:11434/v1/", None, "http://gpu-box:11434"),
    ("gpu-box:8080", None, "http://gpu-box:8080"),
    ("gpu-box", None, "http://gpu-box:11434"),
    ("https://ollama.example.com", None, "https://ollama.example.com"),
])
def test_base_url_resolution(monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None,
                             expected: str) -> None:
    """base_url wins over OLLAMA_HOST, /v1 and trailing slashes are trimmed, bare hosts get http://."""
    if env is None:
        monkeypatch.delenv("OLLAMA_HOST", raising=False)
    else:
        monkeypatch.setenv("OLLAMA_HOST", env)
    assert resolve_base_url(given) == expected
    assert OllamaProvider(base_url=given).base_url == expected


def test_factory_builds_provider() -> None:
    """providers.ollama(...) builds an OllamaProvider, also after the submodule was imported."""
    assert callable(providers.ollama)
    provider = providers.ollama(model="qwen2.5:7b", base_url=BASE)
    assert isinstance(provider.inner, OllamaProvider)  # type: ignore[attr-defined]
    assert isinstance(providers.ollama(base_url=BASE, retry=None), OllamaProvider)
    assert (provider.model, provider.base_url, provider.name, provider.streams) == (
        "qwen2.5:7b", BASE, "ollama", True)


# -- request body ----------------------------------------------------------------------------


async def test_request_body_maps_system_messages_tools_and_options() -> None:
    """The exact /api/chat body: system first, object tool args, tool_name looked up, options."""
    server = Server(json_reply("chat_text.json"))
    provider = make(server, keep_alive="5m")
    messages: list[Message] = [
        {"role": "user", "content": "Weather in Paris and Lyon?"},
        {"role": "system", "content": "Answer in French.", "injected_by": "steering:french"},
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [{"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
                        {"id": "call_2", "name": "get_weather", "args": {"city": "Lyon"}}]},
        {"role": "tool", "content": "18°C, sunny", "tool_call_id": "call_1"},
        {"role": "tool", "content": "15°C, rain", "tool_call_id": "call_2",
         "tool_name": "get_weather"},
    ]
    await provider.complete(request(model="llama3.2", system="You are a weather bot.",
                                    messages=messages, tools=[WEATHER_TOOL], max_tokens=256,
                                    temperature=0.2, stop=["\n\n"]))
    [sent] = server.requests
    assert sent.method == "POST"
    assert str(sent.url) == f"{BASE}/api/chat"
    assert json.loads(sent.content) == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris and Lyon?"},
            {"role": "system", "content": "Answer in French."},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "call_1",
                 "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "call_2",
                 "function": {"name": "get_weather", "arguments": {"city": "Lyon"}}},
            ]},
            {"role": "tool", "content": "18°C, sunny", "tool_name": "get_weather",
             "tool_call_id": "call_1"},
            {"role": "tool", "content": "15°C, rain", "tool_name": "get_weather",
             "tool_call_id": "call_2"},
        ],
        "stream": False,
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}],
        "options": {"num_predict": 256, "temperature": 0.2, "stop": ["\n\n"]},
        "keep_alive": "5m",
    }


async def test_minimal_body_has_no_optional_fields() -> None:
    """A bare request sends only model, messages and stream (no tools/options/keep_alive)."""
    server = Server(json_reply("chat_text.json"))
    await make(server).complete(request())
    assert server.bodies() == [{
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "stream": False,
    }]


async def test_provider_name_as_model_means_default_model() -> None:
    """A request whose model is the provider's name ('ollama') uses the provider's model."""
    server = Server(json_reply("chat_text.json"))
    await make(server, model="qwen2.5:7b").complete(request(model="ollama"))
    assert server.bodies()[0]["model"] == "qwen2.5:7b"


async def test_tool_choice_none_sends_no_tools() -> None:
    """Ollama cannot be told not to call tools, so tool_choice='none' leaves the tools out."""
    server = Server(json_reply("chat_text.json"))
    await make(server).complete(request(tools=[WEATHER_TOOL], tool_choice="none"))
    assert "tools" not in server.bodies()[0]


# -- responses -------------------------------------------------------------------------------


async def test_text_response_is_parsed_with_real_usage() -> None:
    """Content, prompt_eval_count/eval_count usage, stop reason and model come from the answer."""
    response = await make(Server(json_reply("chat_text.json"))).complete(request())
    assert response.content == "The capital of France is Paris."
    assert response.tool_calls == []
    assert response.usage.model_dump() == {"input": 32, "output": 8, "cache_read": 0,
                                           "cache_write": 0}
    assert response.stop_reason == "stop"
    assert response.model == "llama3.2"
    assert response.provider_ref is None


async def test_tool_calls_get_synthesised_unique_ids() -> None:
    """Id-less tool calls get call_<n> ids that keep counting across calls of one provider."""
    provider = make(Server(json_reply("chat_tool_calls.json")))
    first = await provider.complete(request(tools=[WEATHER_TOOL]))
    assert first.tool_calls == [
        {"id": "call_1", "name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}},
        {"id": "call_2", "name": "get_time", "args": {"timezone": "Europe/Paris"}},
    ]
    assert first.stop_reason == "tool_use"
    assert first.usage.input == 212 and first.usage.output == 41
    second = await provider.complete(request(tools=[WEATHER_TOOL]))
    assert [call["id"] for call in second.tool_calls] == ["call_3", "call_4"]


async def test_tool_call_ids_from_the_server_are_kept() -> None:
    """Newer Ollama versions send tool-call ids; those are used as they are."""
    response = await make(Server(json_reply("chat_tool_calls_with_ids.json"))).complete(request())
    assert response.tool_calls == [
        {"id": "call_rtwqbg4d", "name": "get_weather", "args": {"city": "Tokyo"}}]
    assert response.model == "qwen3:8b"


async def test_string_arguments_are_parsed_and_malformed_become_empty() -> None:
    """Arguments sent as a JSON string are parsed; unparseable ones become {}."""
    def chat(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={
            "model": "llama3.2", "done": True, "done_reason": "stop",
            "message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "a", "arguments": '{"x": 1}'}},
                {"function": {"name": "b", "arguments": "{not json"}},
            ]}})
    response = await make(Server(chat)).complete(request())
    assert [(c["name"], c["args"]) for c in response.tool_calls] == [("a", {"x": 1}), ("b", {})]


async def test_length_done_reason_is_max_tokens() -> None:
    """done_reason 'length' (num_predict reached) is normalised to max_tokens."""
    response = await make(Server(json_reply("chat_length.json"))).complete(
        request(max_tokens=10))
    assert response.stop_reason == "max_tokens"
    assert response.content == "Once upon a time, in a small village"


async def test_non_json_answer_is_a_provider_error() -> None:
    """A 200 answer that is not JSON raises ProviderError instead of a raw decode error."""
    server = Server(lambda request: httpx.Response(200, text="<html>proxy login</html>"))
    with pytest.raises(ProviderError, match="not JSON"):
        await make(server).complete(request())


# -- streaming -------------------------------------------------------------------------------


async def test_stream_yields_tokens_then_terminal_chunk_with_usage() -> None:
    """NDJSON lines become chunks in order; the last chunk is done with the assembled response."""
    server = Server(ndjson_reply(fixture("chat_stream.ndjson")))
    chunks = [chunk async for chunk in make(server).stream(request())]
    assert [(c.index, c.content, c.done) for c in chunks] == [
        (0, "The", False), (1, " capital", False), (2, " of France", False),
        (3, " is Paris.", False), (4, "", True)]
    response = chunks[-1].response
    assert response is not None
    assert response.content == "The capital of France is Paris."
    assert (response.usage.input, response.usage.output) == (32, 8)
    assert response.stop_reason == "stop"
    assert server.bodies()[0]["stream"] is True


async def test_stream_collects_tool_calls_on_the_terminal_response() -> None:
    """Tool calls that arrive in a mid-stream line are delivered whole on the terminal response."""
    server = Server(ndjson_reply(fixture("chat_stream_tool_calls.ndjson")))
    chunks = [chunk async for chunk in make(server).stream(request(tools=[WEATHER_TOOL]))]
    assert len(chunks) == 1 and chunks[0].done
    response = chunks[0].response
    assert response is not None
    assert response.tool_calls == [{"id": "call_1", "name": "get_weather",
                                    "args": {"city": "Paris"}}]
    assert response.stop_reason == "tool_use"
    assert (response.usage.input, response.usage.output) == (198, 19)


async def test_stream_cut_before_done_raises() -> None:
    """A stream that ends without a done line raises a retryable ProviderError."""
    truncated = "\n".join(fixture("chat_stream.ndjson").splitlines()[:2]) + "\n"
    with pytest.raises(ProviderError, match="ended before") as info:
        async for _ in make(Server(ndjson_reply(truncated))).stream(request()):
            pass
    assert info.value.retryable is True


async def test_stream_error_line_raises() -> None:
    """An {"error": ...} line in the middle of a stream raises ProviderError with its text."""
    lines = [*fixture("chat_stream.ndjson").splitlines()[:1],
             '{"error":"an error was encountered while running the model: unexpected EOF"}']
    with pytest.raises(ProviderError, match="unexpected EOF"):
        async for _ in make(Server(ndjson_reply("\n".join(lines)))).stream(request()):
            pass


async def test_stream_waits_only_timeout_for_headers() -> None:
    """A server that does not start answering within timeout= fails the stream with the reason."""
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, text=fixture("chat_stream.ndjson"))
    provider = make(Server(slow), timeout=0.05)
    with pytest.raises(ProviderError, match=r"did not start answering within 0\.05s"):
        async for _ in provider.stream(request()):
            pass


# -- errors ----------------------------------------------------------------------------------


async def test_connection_refused_names_ollama_serve() -> None:
    """A refused connection raises ProviderUnavailableError telling you to run `ollama serve`."""
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
    with pytest.raises(ProviderUnavailableError) as info:
        await make(Server(refuse)).complete(request())
    message = str(info.value)
    assert f"Ollama is not running at {BASE}; start it with `ollama serve`" in message
    assert info.value.status is None
    assert info.value.retryable is True
    assert isinstance(info.value.__cause__, httpx.ConnectError)


async def test_real_refused_port_without_injected_client() -> None:
    """With its own httpx client, a port nobody listens on gives the same `ollama serve` error."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OllamaProvider(base_url=f"127.0.0.1:{port}", timeout=2.0)
    for call in (provider.complete(request()), anext(provider.stream(request()))):
        with pytest.raises(ProviderUnavailableError,
                           match=f"Ollama is not running at http://127.0.0.1:{port}"):
            await call


async def test_connect_timeout_is_unavailable() -> None:
    """A connect timeout raises ProviderUnavailableError that says to check `ollama serve`."""
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)
    with pytest.raises(ProviderUnavailableError, match="ollama serve"):
        await make(Server(hang)).complete(request())


async def test_model_not_pulled_lists_available_models() -> None:
    """404 'model not found' names `ollama pull <model>` and lists models from /api/tags."""
    server = Server(error_reply(404, 'model "llama3.2" not found, try pulling it first'),
                    tags=json_reply("tags.json"))
    with pytest.raises(ProviderUnavailableError) as info:
        await make(server).complete(request())
    assert str(info.value) == (
        "[ollama] model 'llama3.2' is not pulled; run `ollama pull llama3.2`; "
        "models available here: qwen2.5:7b, llama3.1:8b")
    assert info.value.status == 404
    assert info.value.retryable is False
    assert [r.url.path for r in server.requests] == ["/api/chat", "/api/tags"]


async def test_model_not_pulled_on_stream_too() -> None:
    """The streamed call reports a missing model the same way, before yielding anything."""
    server = Server(error_reply(404, "model 'mistral' not found"),
                    tags=lambda request: httpx.Response(200, json={"models": []}))
    with pytest.raises(ProviderUnavailableError) as info:
        async for _ in make(server).stream(request(model="mistral")):
            pass
    assert str(info.value) == ("[ollama] model 'mistral' is not pulled; run `ollama pull "
                               "mistral`; no models are pulled on this server yet")


async def test_model_not_pulled_when_tags_fail() -> None:
    """When /api/tags does not work the pull advice is still given, without a model list."""
    server = Server(error_reply(404, 'model "llama3.2" not found, try pulling it first'),
                    tags=lambda request: httpx.Response(500, text="boom"))
    with pytest.raises(ProviderUnavailableError) as info:
        await make(server).complete(request())
    assert str(info.value) == "[ollama] model 'llama3.2' is not pulled; run `ollama pull llama3.2`"


async def test_other_404_is_not_a_missing_model() -> None:
    """A 404 that is not about a model (wrong server) is a ProviderError asking about base_url."""
    server = Server(lambda request: httpx.Response(404, text="404 page not found"))
    with pytest.raises(ProviderError) as info:
        await make(server).complete(request())
    assert not isinstance(info.value, ProviderUnavailableError)
    assert info.value.status == 404
    assert "is base_url an Ollama server?" in str(info.value)


@pytest.mark.parametrize(("status", "message", "retryable"), [
    (400, "registry.ollama.ai/library/gemma2:latest does not support tools", False),
    (401, "unauthorized", False),
    (429, "server busy, please try again.  maximum pending requests exceeded", True),
    (500, "model requires more system memory (9.8 GiB) than is available (6.1 GiB)", True),
    (503, "server overloaded", True),
])
async def test_http_errors_keep_status(status: int, message: str, retryable: bool) -> None:
    """Other error statuses raise ProviderError with the status, the server's text and retryable."""
    with pytest.raises(ProviderError) as info:
        await make(Server(error_reply(status, message))).complete(request())
    assert type(info.value) is ProviderError
    assert info.value.status == status
    assert info.value.retryable is retryable
    assert info.value.provider == "ollama"
    assert message in str(info.value)


async def test_tools_unsupported_names_the_fix() -> None:
    """A model without tool support gets advice to pick one that has it."""
    server = Server(error_reply(400, "registry.ollama.ai/library/gemma2:latest does not "
                                     "support tools"))
    with pytest.raises(ProviderError, match="use a model with tool support"):
        await make(server).complete(request(tools=[WEATHER_TOOL]))


async def test_context_overflow_is_context_window_error() -> None:
    """An error saying the input exceeds the context length raises ContextWindowExceededError."""
    server = Server(error_reply(400, "the input length exceeds the context length"))
    with pytest.raises(ContextWindowExceededError) as info:
        await make(server).complete(request())
    assert info.value.status == 400
    assert info.value.retryable is False
