"""``ollama``: a local Ollama server through its native ``/api/chat`` (httpx, no SDK).

Wire facts this adapter relies on:

* The system prompt goes first as a ``system`` message; system-role messages are carried as they
  are (Ollama takes all three roles in ``messages``).
* Tool call arguments are JSON objects on this wire (not strings). Ollama may omit tool-call
  ids, so missing ids are synthesised as ``call_<n>`` (``n`` counts per provider instance, so ids
  stay unique across a conversation). Tool messages carry ``tool_name`` (looked up from the
  matching assistant call when the message lacks it) and ``tool_call_id``.
* ``max_tokens``, ``temperature`` and ``stop`` go in ``options`` (``num_predict``, ...).
  Ollama cannot force a tool, so ``tool_choice`` is ignored except ``"none"``, which sends no
  tools. There is no provider ref and no prompt caching.
* Structured output (``request.output_schema``) is ``format``: the JSON schema itself, which
  Ollama turns into a grammar, so the answer's text is JSON of that schema.
* Usage is the real ``prompt_eval_count`` / ``eval_count``; ``done_reason`` ``length`` is
  ``max_tokens``, and an answer with tool calls is ``tool_use`` (Ollama says ``stop``).
* Streaming is NDJSON: one JSON object per line, the last one with ``done: true`` and the counts.
  A stream closed, reset or unreadable before that line raises ``StreamIncompleteError`` with
  the text received so far as ``partial`` (evidence, never the answer), retryable; a 200 whose
  body is not JSON raises ``MalformedResponseError`` with the status and an excerpt, retryable.

``timeout`` bounds connecting and, for streamed calls, the wait for the response headers
(which Ollama sends once the model is loaded). A non-streamed call returns its headers only with
the whole answer, so generation itself is never cut short here; bound it with the run's timeout.

Errors name the fix: a daemon that is not there raises ``ProviderUnavailableError`` saying to run
``ollama serve``; a model that is not pulled raises ``ProviderUnavailableError`` saying to run
``ollama pull <model>`` and listing the models the server has. Other HTTP failures raise
``ProviderError`` with the status kept (and ``Retry-After``, when a proxy in front sends one,
as ``retry_after`` for ``with_retry``).

Without ``client=``, each call opens (and closes) its own ``httpx.AsyncClient``, so a provider
can be shared across event loops (``asyncio.run`` per run); pass ``client=`` to pool connections
or to test through ``httpx.MockTransport``. An injected client is used as it is and never closed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import httpx

from ..errors import (
    ContextWindowExceededError,
    ProviderError,
    ProviderUnavailableError,
    StreamIncompleteError,
)
from ._base import (
    LLMRequest,
    LLMResponse,
    Message,
    Provider,
    StreamChunk,
    ToolCall,
    Usage,
    wire_messages,
)
from ._http import excerpt, malformed, parse_retry_after, stream_cut

__all__ = ["DEFAULT_OLLAMA_URL", "OllamaProvider", "resolve_base_url"]

DEFAULT_OLLAMA_URL = "http://localhost:11434"
_DEFAULT_PORT = 11434


def resolve_base_url(base_url: str | None = None) -> str:
    """The server URL: ``base_url``, else ``$OLLAMA_HOST``, else ``http://localhost:11434``.

    A trailing ``/`` or ``/v1`` (the OpenAI-compatible path) is trimmed; a bare ``host:port``
    gets ``http://``, and a bare host also gets Ollama's default port.
    """
    raw = (base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_OLLAMA_URL).strip()
    url = raw.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")].rstrip("/")
    if "://" not in url:
        host = url or "localhost"
        if host.startswith(":"):
            host = "localhost" + host
        if ":" not in host.split("/", 1)[0]:
            host = f"{host}:{_DEFAULT_PORT}"
        url = f"http://{host}"
    return url


class OllamaProvider(Provider):
    """Chat with a model served by Ollama, streamed or not, with tool calls."""

    streams = True
    structured_output = "format"
    model: str

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        timeout: float = 10.0,
        keep_alive: str | int | None = None,
        client: httpx.AsyncClient | None = None,
        name: str = "ollama",
    ) -> None:
        self.name = name
        self.model = model or "llama3.2"
        self.configured_model = model
        self.base_url = resolve_base_url(base_url)
        self.timeout = timeout
        self.keep_alive = keep_alive
        self.client = client
        self._call_ids = 0

    def __repr__(self) -> str:
        return f"<OllamaProvider {self.name} {self.model} at {self.base_url}>"

    # -- public API ---------------------------------------------------------------------------

    async def complete(self, request: LLMRequest) -> LLMResponse:
        import httpx

        body = self.build_body(request, stream=False)
        async with self._client() as client:
            response = await self._send(client, body)
            try:
                await response.aread()
            except httpx.HTTPError as exc:
                self._raise_transport(exc)
            finally:
                await response.aclose()
            if response.status_code >= 400:
                await self._raise_status(client, response, body["model"])
            data = self._json(response.text, status=response.status_code)
        if "error" in data:
            raise ProviderError(f"[{self.name}] {data['error']}", provider=self.name)
        message = data.get("message") or {}
        calls = self._tool_calls(message.get("tool_calls"))
        return self._response(data, message.get("content") or "", calls)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        body = self.build_body(request, stream=True)
        async with self._client() as client:
            response = await self._send(client, body)
            try:
                if response.status_code >= 400:
                    await response.aread()
                    await self._raise_status(client, response, body["model"])
                index = 0
                parts: list[str] = []
                calls: list[ToolCall] = []
                async for line in self._lines(response, parts):
                    try:
                        data = self._json(line, status=response.status_code)
                    except ProviderError as exc:
                        raise self._cut(f"it sent a line that is not a JSON object "
                                        f"({excerpt(line)!r})", parts,
                                        status=response.status_code) from exc
                    if "error" in data:
                        raise ProviderError(f"[{self.name}] {data['error']}", provider=self.name)
                    message = data.get("message") or {}
                    text = message.get("content") or ""
                    if text:
                        parts.append(text)
                        yield StreamChunk(index=index, content=text)
                        index += 1
                    calls.extend(self._tool_calls(message.get("tool_calls")))
                    if data.get("done"):
                        yield StreamChunk(index=index, done=True,
                                          response=self._response(data, "".join(parts), calls))
                        return
                raise self._cut("the server closed the connection mid-answer", parts)
            finally:
                await response.aclose()

    def _cut(self, how: str, parts: list[str], *,
             status: int | None = None) -> StreamIncompleteError:
        return stream_cut(self.name, f"Ollama at {self.base_url}", signal='a "done": true line',
                          how=how, partial="".join(parts), status=status)

    def build_body(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]:
        """The exact JSON body sent to ``/api/chat`` for ``request``."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(self._messages(wire_messages(request.messages)))
        body: dict[str, Any] = {"model": self._model(request), "messages": messages,
                                "stream": stream}
        if request.tools and request.tool_choice != "none":
            body["tools"] = [
                {"type": "function",
                 "function": {"name": tool["name"], "description": tool["description"],
                              "parameters": tool["input_schema"]}}
                for tool in request.tools
            ]
        options: dict[str, Any] = {}
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.seed is not None:
            options["seed"] = request.seed
        if request.stop:
            options["stop"] = list(request.stop)
        if options:
            body["options"] = options
        if request.output_schema is not None:
            body["format"] = request.output_schema["schema"]
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body

    # -- request mapping ----------------------------------------------------------------------

    def _model(self, request: LLMRequest) -> str:
        if not request.model or request.model in (self.name, "ollama"):
            return self.model
        return request.model

    @staticmethod
    def _messages(messages: list[Message]) -> list[dict[str, Any]]:
        names: dict[str, str] = {}
        out: list[dict[str, Any]] = []
        for message in messages:
            role = message["role"]
            wire: dict[str, Any] = {"role": role, "content": message["content"]}
            if role == "assistant" and message.get("tool_calls"):
                wire["tool_calls"] = []
                for call in message["tool_calls"]:
                    names[call["id"]] = call["name"]
                    wire["tool_calls"].append(
                        {"id": call["id"],
                         "function": {"name": call["name"], "arguments": call["args"]}})
            elif role == "tool":
                call_id = message.get("tool_call_id")
                tool_name = message.get("tool_name") or (names.get(call_id) if call_id else None)
                if tool_name:
                    wire["tool_name"] = tool_name
                if call_id:
                    wire["tool_call_id"] = call_id
            out.append(wire)
        return out

    # -- response mapping ---------------------------------------------------------------------

    def _tool_calls(self, raw_calls: Any) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for raw in raw_calls or ():
            function = raw.get("function") or {}
            args = function.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except json.JSONDecodeError:
                    args = {}
            if not isinstance(args, dict):
                args = {}
            call_id = raw.get("id")
            if not call_id:
                self._call_ids += 1
                call_id = f"call_{self._call_ids}"
            calls.append({"id": str(call_id), "name": str(function.get("name", "")),
                          "args": args})
        return calls

    @staticmethod
    def _response(data: dict[str, Any], content: str, calls: list[ToolCall]) -> LLMResponse:
        done_reason = data.get("done_reason") or "stop"
        if calls:
            stop_reason = "tool_use"
        elif done_reason == "length":
            stop_reason = "max_tokens"
        else:
            stop_reason = str(done_reason)
        usage = Usage(input=int(data.get("prompt_eval_count") or 0),
                      output=int(data.get("eval_count") or 0))
        return LLMResponse(content=content, tool_calls=calls, usage=usage,
                           stop_reason=stop_reason, model=data.get("model"))

    # -- transport ----------------------------------------------------------------------------

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx.AsyncClient]:
        if self.client is not None:
            yield self.client
            return
        import httpx

        timeout = httpx.Timeout(self.timeout, read=None)
        async with httpx.AsyncClient(timeout=timeout) as client:
            yield client

    async def _send(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        """POST ``/api/chat`` and return once the headers are in (body not read yet)."""
        import httpx

        url = f"{self.base_url}/api/chat"
        http_request = client.build_request("POST", url, json=body)
        try:
            if body["stream"]:
                return await asyncio.wait_for(client.send(http_request, stream=True),
                                              self.timeout)
            return await client.send(http_request, stream=True)
        except TimeoutError as exc:
            raise ProviderError(
                f"[{self.name}] Ollama at {self.base_url} did not start answering within "
                f"{self.timeout:g}s (is the model still loading? raise timeout=)",
                provider=self.name) from exc
        except httpx.HTTPError as exc:
            self._raise_transport(exc)

    async def _lines(self, response: httpx.Response, parts: list[str]) -> AsyncIterator[str]:
        """The stream's non-blank lines; a transport failure is a cut stream keeping ``parts``."""
        import httpx

        try:
            async for line in response.aiter_lines():
                if line.strip():
                    yield line
        except httpx.HTTPError as exc:
            raise self._cut(f"it broke off ({type(exc).__name__}: {exc})", parts) from exc

    def _raise_transport(self, exc: httpx.HTTPError) -> NoReturn:
        import httpx

        if isinstance(exc, httpx.ConnectError):
            raise ProviderUnavailableError(
                f"[{self.name}] Ollama is not running at {self.base_url}; start it with "
                f"`ollama serve` (or set OLLAMA_HOST / base_url= to where it runs)",
                provider=self.name) from exc
        if isinstance(exc, httpx.ConnectTimeout):
            raise ProviderUnavailableError(
                f"[{self.name}] Ollama at {self.base_url} did not accept a connection within "
                f"{self.timeout:g}s; check it is running (`ollama serve`) and reachable",
                provider=self.name) from exc
        raise ProviderError(
            f"[{self.name}] request to Ollama at {self.base_url} failed: "
            f"{type(exc).__name__}: {exc}", provider=self.name) from exc

    async def _raise_status(self, client: httpx.AsyncClient, response: httpx.Response,
                            model: str) -> NoReturn:
        status = response.status_code
        detail = self._error_text(response)
        lowered = detail.lower()
        if status == 404 and "model" in lowered and "not found" in lowered:
            available = await self._available_models(client)
            if available is None:
                listing = ""
            elif available:
                listing = f"; models available here: {', '.join(available)}"
            else:
                listing = "; no models are pulled on this server yet"
            raise ProviderUnavailableError(
                f"[{self.name}] model '{model}' is not pulled; run `ollama pull {model}`"
                f"{listing}", provider=self.name, status=status, retryable=False)
        if status == 404:
            raise ProviderError(
                f"[{self.name}] {self.base_url}/api/chat answered 404 ({detail}); is base_url "
                "an Ollama server?", provider=self.name, status=status)
        if "context" in lowered and ("exceed" in lowered or "too long" in lowered):
            raise ContextWindowExceededError(
                f"[{self.name}] the prompt does not fit the context window of '{model}': "
                f"{detail}", provider=self.name, status=status)
        hint = ""
        if status == 400 and "does not support tools" in lowered:
            hint = "; use a model with tool support (e.g. llama3.2, qwen2.5) or give it no tools"
        raise ProviderError(f"[{self.name}] HTTP {status}: {detail}{hint}",
                            provider=self.name, status=status,
                            retry_after=parse_retry_after(response.headers))

    async def _available_models(self, client: httpx.AsyncClient) -> list[str] | None:
        """Model names from ``GET /api/tags``; ``None`` when that does not work."""
        import httpx

        try:
            response = await client.get(f"{self.base_url}/api/tags")
            if response.status_code != 200:
                return None
            models = response.json().get("models") or []
            return [str(m.get("name") or m.get("model")) for m in models]
        except (httpx.HTTPError, ValueError, AttributeError):
            return None

    @staticmethod
    def _error_text(response: httpx.Response) -> str:
        text = response.text
        try:
            data = json.loads(text)
        except ValueError:
            return text.strip() or response.reason_phrase
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
        return text.strip()

    def _json(self, text: str, *, status: int) -> dict[str, Any]:
        """``text`` as a JSON object, else ``MalformedResponseError`` with ``status`` kept."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise malformed(self.name, f"Ollama at {self.base_url}", status=status,
                            body=text) from exc
        if not isinstance(data, dict):
            raise malformed(self.name, f"Ollama at {self.base_url}", status=status, body=text,
                            expected="a JSON object")
        return data
