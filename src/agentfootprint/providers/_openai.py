"""``openai``: the OpenAI Chat Completions API, and every server that speaks it.

Built on the official ``openai`` SDK (``pip install "agentfootprint[openai]"``), imported only
when a provider is created. With ``base_url=`` it talks to any OpenAI-compatible server
(llama.cpp / llama-cpp-python, vLLM, LM Studio, Groq, Ollama's ``/v1``...): those get
``max_tokens`` instead of ``max_completion_tokens`` and an ``api_key`` of ``"none"`` when none is
given.

Mapping (``LLMRequest`` → ``chat.completions``):

* ``system`` goes first as a system message; user and system messages map 1:1; an assistant
  message carries ``content`` (``None`` when empty) and ``tool_calls`` with JSON-string
  arguments; a tool message becomes ``{"role": "tool", "content", "tool_call_id"}``.
  Framework-only fields (``injected_by``) never reach the wire.
* ``tool_choice``: ``None`` → not sent (the server's default, ``auto``), ``"auto"``/``"none"``/
  ``"required"`` as is, any other value is a tool name to force.
* ``request.model`` wins; ``""`` or the provider's own ``name`` means "the default model".

Answers:

* Tool arguments are parsed from JSON. Arguments that are not a JSON object are **not** turned
  into ``{}``: they are kept as ``{"_raw_arguments": "<what the model sent>"}`` so the tool's
  input validation fails with a message that shows what the model actually produced. When such a
  call is sent back in the history, the raw text is sent again unchanged.
* ``stop_reason``: ``tool_calls`` → ``tool_use``, ``length`` → ``max_tokens``, ``stop`` →
  ``stop`` (or ``tool_use`` when the answer holds tool calls: OpenAI answers a *forced* tool call
  with ``stop``), ``content_filter`` as is, anything else raw.
* ``usage.input`` is ``prompt_tokens`` (OpenAI counts cached tokens inside it; the cached part is
  also given as ``cache_read``), ``usage.output`` is ``completion_tokens``. A server that reports
  nothing gives zeros, which means "not reported", never an estimate.

A stream is complete only when its choice carries a ``finish_reason`` (the SDK consumes
``[DONE]`` itself, so a finish_reason is the signal this adapter can see): a stream closed, reset
or unreadable before it raises ``StreamIncompleteError`` with the text received so far as
``partial`` (evidence, never the answer), retryable. A 200 whose body is not JSON (or not a
completion) raises ``MalformedResponseError`` with the status and an excerpt, retryable. Every
HTTP error keeps the server's ``Retry-After`` / ``retry-after-ms`` as ``retry_after``, which
``with_retry`` honours.

Streaming asks for ``stream_options={"include_usage": True}`` so the last chunk carries real
usage. Servers that ignore the option (llama-cpp-python's server does, as of 0.3.36) report no
usage for streamed calls: the terminal response then has zero usage. Pass
``stream_usage=False`` for a server that rejects the option outright.

Structured output (``request.output_schema``) is ``response_format``: ``{"type": "json_schema",
"json_schema": {name, schema, strict}}`` by default (OpenAI, vLLM, llama.cpp's server, Ollama's
``/v1``). llama-cpp-python's server (0.3.x) takes only ``{"type": "json_object", "schema": ...}``,
which it turns into a grammar, so the answer is valid JSON of that schema: build the provider with
``structured_output="json_object"`` for it (its refusal of ``json_schema`` is reported, not
retried, with that fix named). ``structured_output="tool"`` sends no ``response_format``: the agent
offers a final-answer tool instead.

Errors are translated where they leave the SDK, the SDK error kept as ``__cause__``:
``ContextWindowExceededError`` for prompts too long, ``ProviderUnavailableError`` when the server
cannot be reached (or lacks the model), ``ProviderError`` with the HTTP ``status`` otherwise
(429 and 5xx retryable). The SDK's own retries are off by default (``max_retries=0``): the
``openai()`` factory wraps the provider in ``with_retry``'s rules instead (``retry=``), so every
retry is reported.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from ..errors import (
    ConfigurationError,
    ContextWindowExceededError,
    ProviderError,
    ProviderUnavailableError,
)
from ._base import (
    LLMRequest,
    LLMResponse,
    Message,
    OutputSchema,
    Provider,
    StreamChunk,
    ToolCall,
    ToolSchema,
    Usage,
    wire_messages,
)
from ._http import broke_off, excerpt, malformed, parse_retry_after, stream_cut, transport_errors

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["RAW_ARGUMENTS_KEY", "OpenAIProvider"]

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Where unparseable tool-call arguments are kept, verbatim."""

_SIGNAL = "a finish_reason"

_INSTALL = 'pip install "agentfootprint[openai]"'
_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
_STOP_REASONS = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "stop": "stop",
    "content_filter": "content_filter",
}
_CONTEXT_PHRASES = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "too many tokens",
)


class OpenAIProvider(Provider):
    """Chat Completions over the official SDK; ``base_url=`` for OpenAI-compatible servers.

    * ``model``: used when a request names no model (or names the provider, ``"openai"``).
    * ``api_key``: defaults to ``$OPENAI_API_KEY``; with ``base_url`` and no key, ``"none"``.
    * ``timeout``: seconds per request; ``None`` keeps the SDK's default (10 minutes).
    * ``max_retries``: the SDK's own retries, off by default; use ``with_retry``.
    * ``client``: a ready ``openai.AsyncOpenAI`` (tests, proxies, Azure). ``base_url`` still
      decides the request dialect and appears in error messages.
    * ``stream_usage``: ask for usage on streamed calls (``stream_options``); turn it off only
      for a server that rejects the option.
    * ``structured_output``: how an output schema is sent: ``json_schema`` (default),
      ``json_object`` (llama-cpp-python's server) or ``tool`` (a final-answer tool).
    """

    streams = True
    model: str

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int = 0,
        client: AsyncOpenAI | None = None,
        name: str = "openai",
        stream_usage: bool = True,
        structured_output: Literal["json_schema", "json_object", "tool"] = "json_schema",
    ) -> None:
        if structured_output not in ("json_schema", "json_object", "tool"):
            raise ConfigurationError(
                f"structured_output={structured_output!r} must be 'json_schema', 'json_object' "
                "(llama-cpp-python's server) or 'tool'")
        self.structured_output = None if structured_output == "tool" else structured_output
        try:
            import openai
        except ImportError as exc:
            raise ConfigurationError(
                f"the openai provider needs the openai SDK: {_INSTALL}") from exc
        self.name = name
        self.model = model or "gpt-4o-mini"
        self.configured_model = model
        self.base_url = base_url
        self.stream_usage = stream_usage
        self._openai = openai
        self._transport_errors = transport_errors()
        if client is not None:
            self.client = client
            return
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("none" if base_url else None)
        if key is None:
            raise ConfigurationError(
                "the openai provider needs an API key: set OPENAI_API_KEY or pass api_key=...; "
                "for an OpenAI-compatible server pass base_url=... (no key needed)")
        options: dict[str, Any] = {"api_key": key, "max_retries": max_retries}
        if base_url is not None:
            options["base_url"] = base_url
        if timeout is not None:
            options["timeout"] = timeout
        self.client = openai.AsyncOpenAI(**options)

    @property
    def _endpoint(self) -> str:
        return self.base_url or str(getattr(self.client, "base_url", "the OpenAI API"))

    async def aclose(self) -> None:
        """Close the SDK client's connections (the provider is unusable afterwards)."""
        await self.client.close()

    def close_sync(self) -> None:
        """``aclose`` for synchronous code (the loop ``*_sync`` calls ran on)."""
        from ..flow._run import run_sync

        run_sync(self.aclose())

    # ------------------------------------------------------------------ requests

    def params(self, request: LLMRequest, *, stream: bool = False) -> dict[str, Any]:
        """The exact keyword arguments given to ``chat.completions.create``."""
        model = request.model if request.model and request.model != self.name else self.model
        params: dict[str, Any] = {"model": model, "messages": _messages(request)}
        if request.tools:
            params["tools"] = [_tool(schema) for schema in request.tools]
            if request.tool_choice is not None:
                params["tool_choice"] = _tool_choice(request.tool_choice, request.tools)
        elif request.tool_choice not in (None, "auto", "none"):
            raise ConfigurationError(
                f"tool_choice={request.tool_choice!r} needs tools, but the request has none")
        if request.max_tokens is not None:
            key = "max_tokens" if self.base_url is not None else "max_completion_tokens"
            params[key] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.seed is not None:
            params["seed"] = request.seed
        if request.stop:
            params["stop"] = list(request.stop)
        if request.output_schema is not None and self.structured_output is not None:
            params["response_format"] = _response_format(request.output_schema,
                                                         self.structured_output)
        if stream:
            params["stream"] = True
            if self.stream_usage:
                params["stream_options"] = {"include_usage": True}
        return params

    # ------------------------------------------------------------------ calls

    async def complete(self, request: LLMRequest) -> LLMResponse:
        params = self.params(request)
        try:
            # The raw response keeps the status and body for an answer that does not parse.
            raw = await self.client.chat.completions.with_raw_response.create(**params)
        except self._openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        try:
            completion: Any = raw.parse()
        except ValueError as exc:  # the body is not JSON (json.JSONDecodeError)
            raise malformed(self.name, self._endpoint, status=raw.status_code,
                            body=raw.text) from exc
        if isinstance(completion, str):  # the SDK hands back a non-JSON content type as text
            raise malformed(self.name, self._endpoint, status=raw.status_code, body=completion)
        if not getattr(completion, "choices", None):
            raise malformed(self.name, self._endpoint, status=raw.status_code, body=raw.text,
                            expected="a chat completion with a choice")
        return self._response(completion)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        params = self.params(request, stream=True)
        try:
            sdk_stream = await self.client.chat.completions.create(**params)
        except self._openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Any = None
        finish: str | None = None
        model: str | None = None
        ref: str | None = None
        seen = False
        index = 0
        try:
            async for chunk in sdk_stream:
                seen = True
                ref = ref or getattr(chunk, "id", None) or None
                model = getattr(chunk, "model", None) or model
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in chunk.choices or ():
                    if choice.index != 0:
                        continue
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    for call in delta.tool_calls or ():
                        _accumulate(calls, call)
                    if delta.content:
                        parts.append(delta.content)
                        yield StreamChunk(index=index, content=delta.content)
                        index += 1
        except self._openai.APIConnectionError as exc:  # the SDK wraps a read that failed
            cause = exc.__cause__ or exc
            raise stream_cut(self.name, self._endpoint, signal=_SIGNAL,
                             how=f"it broke off ({type(cause).__name__}: {cause})",
                             partial="".join(parts)) from exc
        except self._openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        except self._transport_errors as exc:
            raise stream_cut(self.name, self._endpoint, signal=_SIGNAL,
                             how=f"it broke off ({type(exc).__name__}: {exc})",
                             partial="".join(parts)) from exc
        except ValueError as exc:  # a data line that is not JSON (json.JSONDecodeError)
            line = getattr(exc, "doc", None) or str(exc)
            raise stream_cut(self.name, self._endpoint, signal=_SIGNAL,
                             how=f"it sent a line that is not JSON ({excerpt(line)!r})",
                             partial="".join(parts), status=200) from exc
        finally:
            await sdk_stream.close()
        if not seen:
            hint = ""
            if self.base_url is not None and request.tools and request.tool_choice in (
                    None, "auto"):
                hint = ("; llama-cpp-python's server does this when tools are streamed with "
                        "tool_choice='auto' (it cannot): call complete() instead")
            raise stream_cut(self.name, self._endpoint, signal=_SIGNAL,
                             how=f"the server closed it without sending anything{hint}",
                             partial="", retryable=not hint)
        if finish is None:
            raise stream_cut(self.name, self._endpoint, signal=_SIGNAL,
                             how="the server closed it mid-answer", partial="".join(parts))
        tool_calls = [
            ToolCall(id=slot["id"] or f"call_{position}", name=slot["name"],
                     args=_parse_arguments(slot["arguments"]))
            for position, slot in sorted(calls.items())
        ]
        response = LLMResponse(
            content="".join(parts), tool_calls=tool_calls, usage=_usage(usage),
            stop_reason=_stop_reason(finish, bool(tool_calls)), model=model, provider_ref=ref)
        yield StreamChunk(index=index, done=True, response=response)

    # ------------------------------------------------------------------ answers

    def _response(self, completion: Any) -> LLMResponse:
        choice = completion.choices[0]
        message = choice.message
        calls: list[ToolCall] = []
        for position, call in enumerate(message.tool_calls or ()):
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call: not part of this port
                continue
            calls.append(ToolCall(id=call.id or f"call_{position}", name=function.name,
                                  args=_parse_arguments(function.arguments)))
        return LLMResponse(
            content=message.content or "", tool_calls=calls,
            usage=_usage(getattr(completion, "usage", None)),
            stop_reason=_stop_reason(choice.finish_reason, bool(calls)),
            model=getattr(completion, "model", None) or None,
            provider_ref=getattr(completion, "id", None) or None)

    # ------------------------------------------------------------------ errors

    def _translate(self, exc: Exception) -> ProviderError:
        openai = self._openai
        where = self._endpoint
        if isinstance(exc, openai.APITimeoutError):
            return ProviderError(f"[{self.name}] {where} did not answer in time: {exc}",
                                 provider=self.name)
        if isinstance(exc, openai.APIConnectionError) and broke_off(exc):
            cause = exc.__cause__ or exc
            return ProviderError(
                f"[{self.name}] the answer from {where} broke off before its end: "
                f"{type(cause).__name__}: {cause}; with_retry(provider) asks again",
                provider=self.name)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            fix = ("start the server (or correct base_url)" if self.base_url
                   else "check your network connection and proxy settings")
            return ProviderUnavailableError(
                f"[{self.name}] cannot reach {where}: {type(cause).__name__}: {cause}; {fix}",
                provider=self.name)
        if isinstance(exc, openai.APIResponseValidationError):
            return malformed(self.name, where, status=exc.status_code,
                             body=exc.response.text, expected="a chat completion")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = _error_text(exc)
            code = _error_code(exc)
            message = f"[{self.name}] HTTP {status} from {where}: {text}"
            if "response_format" in text and "json_object" in text:
                return ProviderError(
                    f"{message}; this server takes response_format type 'json_object' only "
                    "(llama-cpp-python): build the provider with structured_output='json_object'",
                    provider=self.name, status=status, retryable=False)
            if code == "context_length_exceeded" or (
                    status in (400, 413, 422) and _mentions_context(text)):
                return ContextWindowExceededError(message, provider=self.name, status=status)
            if status in (401, 403):
                hint = ("set OPENAI_API_KEY or pass api_key=..." if self.base_url is None
                        else "pass the api_key this server expects")
                return ProviderError(f"{message}; {hint}", provider=self.name, status=status)
            if status == 404 and (code == "model_not_found" or "model" in text.lower()):
                return ProviderUnavailableError(
                    f"{message}; the server does not have that model", provider=self.name,
                    status=status, retryable=False)
            return ProviderError(message, provider=self.name, status=status,
                                 retry_after=parse_retry_after(exc.response.headers))
        if isinstance(exc, openai.APIError):
            status = getattr(exc, "status_code", None)
            text = _error_text(exc)
            if _error_code(exc) == "context_length_exceeded" or _mentions_context(text):
                return ContextWindowExceededError(
                    f"[{self.name}] {where}: {text}", provider=self.name, status=status)
            return ProviderError(f"[{self.name}] {where}: {text}", provider=self.name,
                                 status=status)
        return ProviderError(f"[{self.name}] {type(exc).__name__}: {exc}", provider=self.name,
                             retryable=False)


# ---------------------------------------------------------------------- helpers


def _messages(request: LLMRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for position, message in enumerate(wire_messages(request.messages)):
        out.append(_message(message, position))
    return out


def _message(message: Message, position: int) -> dict[str, Any]:
    role = message["role"]
    if role == "assistant":
        wire: dict[str, Any] = {"role": "assistant", "content": message["content"] or None}
        calls = message.get("tool_calls")
        if calls:
            wire["tool_calls"] = [
                {"id": call["id"], "type": "function",
                 "function": {"name": call["name"], "arguments": _dump_arguments(call["args"])}}
                for call in calls
            ]
        return wire
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not call_id:
            raise ConfigurationError(
                f"tool message #{position} has no tool_call_id; OpenAI needs it to match the "
                "result to the assistant's tool call")
        return {"role": "tool", "content": message["content"], "tool_call_id": call_id}
    return {"role": role, "content": message["content"]}


def _tool(schema: ToolSchema) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": schema["name"], "description": schema["description"],
        "parameters": schema["input_schema"]}}


def _tool_choice(choice: str, tools: list[ToolSchema]) -> str | dict[str, Any]:
    if choice in _TOOL_CHOICE_KEYWORDS:
        return choice
    names = [tool["name"] for tool in tools]
    if choice not in names:
        raise ConfigurationError(
            f"tool_choice={choice!r} is not one of the request's tools {names} "
            "(or 'auto', 'none', 'required')")
    return {"type": "function", "function": {"name": choice}}


def _response_format(output: OutputSchema, dialect: str) -> dict[str, Any]:
    if dialect == "json_object":  # llama-cpp-python: the schema becomes a grammar
        return {"type": "json_object", "schema": output["schema"]}
    return {"type": "json_schema", "json_schema": {
        "name": output["name"], "schema": output["schema"], "strict": output["strict"]}}


def _dump_arguments(args: dict[str, Any]) -> str:
    raw = args.get(RAW_ARGUMENTS_KEY)
    if len(args) == 1 and isinstance(raw, str):
        return raw  # what the model sent, unchanged
    return json.dumps(args)


def _parse_arguments(raw: str | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}
    if not isinstance(parsed, dict):
        return {RAW_ARGUMENTS_KEY: raw}
    return parsed


def _accumulate(calls: dict[int, dict[str, str]], delta: Any) -> None:
    """Merge one streamed tool-call delta into its call (matched by ``index``)."""
    slot = calls.setdefault(int(delta.index or 0), {"id": "", "name": "", "arguments": ""})
    if delta.id:
        slot["id"] = delta.id
    function = delta.function
    if function is None:
        return
    if function.name and function.name != slot["name"]:
        # OpenAI sends the name once; some servers (llama-cpp-python) repeat it on every
        # delta. A repeat is ignored; a different piece continues a name split over deltas.
        slot["name"] += function.name
    if function.arguments:
        slot["arguments"] += function.arguments


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(input=int(getattr(usage, "prompt_tokens", 0) or 0),
                 output=int(getattr(usage, "completion_tokens", 0) or 0),
                 cache_read=int(cached or 0))


def _stop_reason(finish: str | None, has_calls: bool) -> str:
    if has_calls and finish in (None, "stop"):
        return "tool_use"
    if finish is None:
        return "stop"
    return _STOP_REASONS.get(finish, finish)


def _error_body(exc: Exception) -> dict[str, Any]:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body
    return {}


def _error_text(exc: Exception) -> str:
    message = _error_body(exc).get("message")
    return str(message) if message else str(getattr(exc, "message", exc))


def _error_code(exc: Exception) -> str | None:
    code = getattr(exc, "code", None) or _error_body(exc).get("code")
    return str(code) if code else None


def _mentions_context(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in _CONTEXT_PHRASES)
