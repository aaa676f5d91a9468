"""``anthropic``: Claude through the official ``anthropic`` SDK (Messages API).

The SDK is imported when a provider is built, never when this module is imported, so the
package stays free to import without the ``anthropic`` extra.

Mapping (request → Messages API):

* ``system`` is ``request.system``. System-role messages cannot live in Anthropic's
  ``messages``; rather than dropping them (and silently losing an instruction that was injected
  mid-conversation), their text is appended to ``system``, in order, separated by blank lines.
* User messages carry string content. Assistant messages become content blocks: a ``text`` block
  when there is text, then one ``tool_use`` block per tool call; an assistant message with
  neither is left out (the API rejects empty content).
* Tool messages become ``tool_result`` blocks. A result goes into the preceding user message when
  that message is already a block array (so consecutive results coalesce into one user turn),
  else it opens a new user message.
* Tools are ``{name, description, input_schema}``. ``tool_choice``: ``auto``/``None`` → auto,
  ``none`` → none, ``required`` → any, anything else → that tool by name; it is sent only with
  tools. ``parallel_tool_calls=False`` adds ``disable_parallel_tool_use``.
* ``max_tokens`` is the request's or the provider's default (the API requires one);
  ``stop`` → ``stop_sequences``; ``temperature`` goes into the body through ``extra_body``
  (SDK 2.x dropped the argument; the JSON field is the same for every SDK version).

Structured output (``request.output_schema``) is a final-answer tool whose input schema is the
output's: forced (``tool_choice`` that tool) when the request has no other tools, else
``tool_choice`` ``any`` (a tool, or the answer). Its call comes back as the answer's ``content``,
the arguments as JSON text (``providers/_output_tool.py``).

Prompt caching: ``request.cache`` (the stable prefix, see ``agent/_cache.py``) becomes at most
three ``cache_control: {"type": "ephemeral"}`` breakpoints of the four the API allows: on the
last stable tool, at the end of the system prompt's stable part (the system is then sent as text
blocks: the stable part, then the rest), and on the last block of the last stable message. The
text sent is the same either way; only the marks differ.

Response: text blocks are concatenated, ``tool_use`` blocks become tool calls, usage is the real
``output_tokens`` and, as ``input``, every prompt token: ``input_tokens`` plus the cache's read and
written tokens (Anthropic counts those apart), which are also given as ``cache_read`` /
``cache_write``, stop reasons ``end_turn``/``stop_sequence`` → ``stop``,
``tool_use``, ``max_tokens``, ``refusal`` → ``content_filter`` (others kept raw), and
``provider_ref`` is the message id. Streaming yields the text deltas and then one terminal chunk
built from the SDK's final message, so it carries tool calls and real usage. A stream is whole
only once ``message_stop`` arrived: one closed, reset or unreadable before raises
``StreamIncompleteError`` with the text received so far as ``partial`` (evidence, never the
answer), retryable. A 200 whose body is not a message raises ``MalformedResponseError`` with the
status and an excerpt, retryable.

Errors: every SDK error becomes a ``ProviderError`` (``raise ... from`` the SDK error) with the
HTTP status kept; 408/409/429/5xx (529 "overloaded" included) are retryable. A prompt that does
not fit raises ``ContextWindowExceededError``; a network failure raises
``ProviderUnavailableError``. An error event in the middle of a stream (sent with HTTP 200) gets
the status its error type stands for, e.g. ``overloaded_error`` → 529. The server's
``retry-after-ms`` / ``Retry-After`` is kept as ``retry_after``, which ``with_retry`` honours.

The SDK's own retries are off (``max_retries=0``): retrying is ``with_retry``'s job, where it is
reported (the ``anthropic()`` factory applies it by default, ``retry=``). A ``complete`` with
a ``max_tokens`` so large that the SDK insists on streaming (over 10 minutes of expected
generation) is streamed under the hood and returns the same response.
Pass ``client=`` (an ``anthropic.AsyncAnthropic``) to reuse or test a client.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import (
    ConfigurationError,
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
from ._http import broke_off, excerpt, malformed, parse_retry_after, stream_cut, transport_errors
from ._output_tool import OUTPUT_TOOL, output_tool, take_output_call

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicProvider"]

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "content_filter",
}

# The HTTP status an error type stands for, for errors that arrive inside a 200 stream.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

_SIGNAL = "a message_stop event"
_CONTEXT_PHRASES = ("prompt is too long", "exceed context limit", "context window",
                    "context length")


class AnthropicProvider(Provider):
    """Claude models through ``anthropic.AsyncAnthropic``."""

    system_role_messages = "system_prompt"
    """System-role messages are sent in the system prompt (see the module docstring), so a
    delivery records that, not a position among the messages."""

    streams = True
    structured_output = "forced_tool"
    model: str

    def __init__(
        self,
        *,
        model: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout: float | None = None,
        max_retries: int = 0,
        client: AsyncAnthropic | None = None,
        parallel_tool_calls: bool | None = None,
        name: str = "anthropic",
    ) -> None:
        try:
            import anthropic as sdk
        except ImportError as exc:
            raise ConfigurationError(
                'the anthropic provider needs the anthropic SDK: '
                'pip install "agentfootprint[anthropic]"') from exc
        self._sdk: Any = sdk
        self.name = name
        self.model = model or "claude-sonnet-4-6"
        self.configured_model = model
        self.max_tokens = max_tokens
        self.parallel_tool_calls = parallel_tool_calls
        self._transport_errors = transport_errors()
        if client is None:
            options: dict[str, Any] = {"max_retries": max_retries}
            if api_key is not None:
                options["api_key"] = api_key
            if timeout is not None:
                options["timeout"] = timeout
            client = sdk.AsyncAnthropic(**options)
            # The SDK finds credentials itself (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN and, in
            # newer SDKs, profiles); when it found none, say so now rather than at the first call.
            if not any(getattr(client, attr, None)
                       for attr in ("api_key", "auth_token", "credentials")):
                raise ConfigurationError(
                    "the anthropic provider needs an API key: set ANTHROPIC_API_KEY or pass "
                    "api_key=")
        self.client: AsyncAnthropic = client

    async def aclose(self) -> None:
        """Close the SDK client's connections (the provider is unusable afterwards)."""
        await self.client.close()

    def close_sync(self) -> None:
        """``aclose`` for synchronous code (the loop ``*_sync`` calls ran on)."""
        from ..flow._run import run_sync

        run_sync(self.aclose())

    def __repr__(self) -> str:
        return f"<AnthropicProvider {self.name} {self.model}>"

    # -- public API ---------------------------------------------------------------------------

    async def complete(self, request: LLMRequest) -> LLMResponse:
        params = self.build_params(request)
        try:
            # The raw response keeps the status and body for an answer that does not parse.
            raw = await self.client.messages.with_raw_response.create(**params)
        except ValueError as exc:
            # The SDK refuses a non-streamed call whose max_tokens could take over 10
            # minutes; the same call streamed is allowed, so stream and keep the result.
            if "streaming is required" not in str(exc).lower():
                raise
            async for chunk in self.stream(request):
                if chunk.response is not None:
                    return chunk.response
            raise AssertionError("unreachable: stream() ends with a response or raises") from exc
        except self._sdk.AnthropicError as exc:
            raise self._error(exc, params["model"]) from exc
        where = str(self.client.base_url)
        try:
            message: Any = await _settled(raw.parse())
        except ValueError as exc:  # the body is not JSON (json.JSONDecodeError)
            raise malformed(self.name, where, status=raw.status_code,
                            body=await _body(raw)) from exc
        if isinstance(message, str) or not isinstance(getattr(message, "content", None), list):
            raise malformed(self.name, where, status=raw.status_code, body=await _body(raw),
                            expected="a message")
        return self._answer(message, request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        params = self.build_params(request)
        index = 0
        parts: list[str] = []
        try:
            async with self.client.messages.stream(**params) as stream:
                stopped = False
                async for event in stream:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        if event.delta.text:
                            parts.append(event.delta.text)
                            yield StreamChunk(index=index, content=event.delta.text)
                            index += 1
                    elif event.type == "message_stop":
                        stopped = True
                if not stopped:
                    raise self._cut("the server closed it mid-answer", parts)
                message = await stream.get_final_message()
        except self._sdk.AnthropicError as exc:
            raise self._error(exc, params["model"]) from exc
        except self._transport_errors as exc:
            raise self._cut(f"it broke off ({type(exc).__name__}: {exc})", parts) from exc
        except ValueError as exc:  # an event that is not JSON (json.JSONDecodeError)
            line = getattr(exc, "doc", None) or str(exc)
            raise self._cut(f"it sent an event that is not JSON ({excerpt(line)!r})", parts,
                            status=200) from exc
        yield StreamChunk(index=index, done=True, response=self._answer(message, request))

    def _cut(self, how: str, parts: list[str], *,
             status: int | None = None) -> StreamIncompleteError:
        return stream_cut(self.name, str(self.client.base_url), signal=_SIGNAL, how=how,
                          partial="".join(parts), status=status)

    def build_params(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments for ``messages.create`` (the JSON body, minus ``stream``)."""
        system_parts = [request.system] if request.system else []
        messages: list[dict[str, Any]] = []
        landed: list[tuple[int, int]] = []  # per wire message: where its last block went
        for message in wire_messages(request.messages):
            if message["role"] != "system":
                self._append(messages, message)
            elif message["content"]:
                system_parts.append(message["content"])
            landed.append((len(messages) - 1, _blocks(messages[-1]) - 1) if messages
                          else (-1, -1))
        params: dict[str, Any] = {
            "model": self._model(request),
            "max_tokens": request.max_tokens if request.max_tokens is not None
            else self.max_tokens,
            "messages": messages,
        }
        cache = request.cache
        if system_parts:
            params["system"] = "\n\n".join(system_parts)
            if cache and cache["system"] > 0:
                params["system"] = _cached_system(params["system"], cache["system"])
        if request.temperature is not None:
            # anthropic>=2 has no ``temperature`` argument any more; the body field still works.
            params["extra_body"] = {"temperature": request.temperature}
        if request.stop:
            params["stop_sequences"] = list(request.stop)
        if cache and 0 < cache["messages"] <= len(landed):
            _mark(messages, *landed[cache["messages"] - 1])
        if request.tools:
            params["tools"] = [{"name": tool["name"], "description": tool["description"],
                                "input_schema": tool["input_schema"]}
                               for tool in request.tools]
            if cache and 0 < cache["tools"] <= len(request.tools):
                params["tools"][cache["tools"] - 1]["cache_control"] = dict(_EPHEMERAL)
            choice = self._tool_choice(request.tool_choice)
            if choice is not None:
                params["tool_choice"] = choice
        if request.output_schema is not None:  # the answer: a final-answer tool's arguments
            tools = params.setdefault("tools", [])
            tools.append(dict(output_tool(request.output_schema)))
            params["tool_choice"] = self._tool_choice(OUTPUT_TOOL if len(tools) == 1
                                                      else "required")
        return params

    # -- request mapping ----------------------------------------------------------------------

    def _model(self, request: LLMRequest) -> str:
        if not request.model or request.model in (self.name, "anthropic"):
            return self.model
        return request.model

    def _tool_choice(self, tool_choice: str | None) -> dict[str, Any] | None:
        if tool_choice == "none":
            return {"type": "none"}
        if tool_choice in (None, "auto"):
            choice: dict[str, Any] = {"type": "auto"}
        elif tool_choice == "required":
            choice = {"type": "any"}
        else:
            choice = {"type": "tool", "name": tool_choice}
        if self.parallel_tool_calls is False:
            choice["disable_parallel_tool_use"] = True
        elif choice["type"] == "auto":
            return None  # the API's default; leave it out
        return choice

    @staticmethod
    def _append(messages: list[dict[str, Any]], message: Message) -> None:
        role = message["role"]
        if role == "user":
            messages.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message["content"]:
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls", ()):
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                               "input": call["args"]})
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""),
                     "content": message["content"]}
            previous = messages[-1] if messages else None
            if (previous is not None and previous["role"] == "user"
                    and isinstance(previous["content"], list)):
                previous["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})

    # -- response mapping ---------------------------------------------------------------------

    def _answer(self, message: Any, request: LLMRequest) -> LLMResponse:
        response = self._response(message)
        return take_output_call(response) if request.output_schema is not None else response

    @staticmethod
    def _response(message: Any) -> LLMResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args = block.input if isinstance(block.input, dict) else {}
                calls.append({"id": block.id, "name": block.name, "args": dict(args)})
        usage = message.usage
        read = getattr(usage, "cache_read_input_tokens", None) or 0
        written = getattr(usage, "cache_creation_input_tokens", None) or 0
        raw_stop = message.stop_reason or "end_turn"
        return LLMResponse(
            content="".join(texts),
            tool_calls=calls,
            usage=Usage(input=(usage.input_tokens or 0) + read + written,
                        output=usage.output_tokens or 0, cache_read=read, cache_write=written),
            stop_reason=_STOP_REASONS.get(raw_stop, raw_stop),
            model=message.model,
            provider_ref=message.id,
        )

    # -- errors -------------------------------------------------------------------------------

    def _error(self, exc: Exception, model: str) -> ProviderError:
        sdk = self._sdk
        name = self.name
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderError(f"[{name}] the Anthropic API did not answer in time: {exc}",
                                 provider=name, retryable=True)
        if isinstance(exc, sdk.APIConnectionError) and broke_off(exc):
            return ProviderError(
                f"[{name}] the answer from the Anthropic API at {self.client.base_url} broke "
                f"off before its end: {self._cause_text(exc)}; with_retry(provider) asks again",
                provider=name, retryable=True)
        if isinstance(exc, sdk.APIConnectionError):
            return ProviderUnavailableError(
                f"[{name}] could not reach the Anthropic API at {self.client.base_url}: "
                f"{self._cause_text(exc)}; check the network connection (or proxy / "
                "ANTHROPIC_BASE_URL)", provider=name)
        if isinstance(exc, sdk.APIResponseValidationError):
            return malformed(name, str(self.client.base_url), status=exc.status_code,
                             body=exc.response.text, expected="a message")
        if isinstance(exc, sdk.APIStatusError):
            kind, text = self._error_body(exc)
            status = int(exc.status_code)
            if status < 400 and kind in _ERROR_TYPE_STATUS:
                status = _ERROR_TYPE_STATUS[kind]  # an error event inside a 200 stream
            lowered = text.lower()
            if status in (400, 413) and any(p in lowered for p in _CONTEXT_PHRASES):
                return ContextWindowExceededError(
                    f"[{name}] the prompt does not fit the context window of '{model}': {text}",
                    provider=name, status=status)
            hint = ""
            if status == 401:
                hint = "; check ANTHROPIC_API_KEY (or api_key=)"
            elif status == 404 and "model" in lowered:
                hint = f"; check the model name ('{model}')"
            label = f"{status} {kind}" if kind else str(status)
            return ProviderError(
                f"[{name}] {label}: {text}{hint}", provider=name, status=status,
                retryable=status in (408, 409, 429) or status >= 500,
                retry_after=parse_retry_after(exc.response.headers))
        return ProviderError(f"[{name}] {type(exc).__name__}: {exc}", provider=name)

    @staticmethod
    def _error_body(exc: Any) -> tuple[str, str]:
        """The error's ``type`` and ``message`` from the API's error body, when it has one."""
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict):
                return str(error.get("type") or ""), str(error.get("message") or exc.message)
        return "", str(getattr(exc, "message", exc))

    @staticmethod
    def _cause_text(exc: BaseException) -> str:
        cause = exc.__cause__ or exc.__context__
        return f"{exc} ({cause})" if cause is not None else str(exc)


_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def _cached_system(system: str, stable: int) -> list[dict[str, Any]]:
    """``system`` as text blocks with a breakpoint after its first ``stable`` characters."""
    head, rest = system[:stable], system[stable:]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": head,
                                     "cache_control": dict(_EPHEMERAL)}]
    if rest.strip():  # the API refuses an empty text block
        blocks.append({"type": "text", "text": rest})
    return blocks


def _blocks(message: dict[str, Any]) -> int:
    content = message["content"]
    return len(content) if isinstance(content, list) else 1


def _mark(messages: list[dict[str, Any]], index: int, block: int) -> None:
    """Put a breakpoint on block ``block`` of message ``index`` (a string becomes one block)."""
    if index < 0:
        return
    message = messages[index]
    if isinstance(message["content"], str):
        message["content"] = [{"type": "text", "text": message["content"]}]
        block = 0
    target = message["content"][block]
    if target.get("type") == "text" and not target.get("text"):
        return  # the API refuses cache_control on an empty text block
    message["content"][block] = {**target, "cache_control": dict(_EPHEMERAL)}


async def _settled(value: Any) -> Any:
    """``value``, awaited if it is awaitable: SDK 2 parses raw responses asynchronously, 0.x not."""
    return await value if inspect.isawaitable(value) else value


async def _body(raw: Any) -> str:
    """The text of a raw SDK response (a method in SDK 2, a property in 0.x)."""
    text = raw.text
    return str(await _settled(text() if callable(text) else text))
