"""``mock``: a deterministic provider for tests and offline examples.

Replies come from ``script`` (consumed in order; running out is an error that says so),
else ``reply`` (the same answer forever), else ``respond(request)`` (a function), else an echo
of the last user message. A scripted reply is a string (the answer), a dict with ``content``
and/or ``tool_calls`` (``[{"name": ..., "args": {...}}]``), an ``LLMResponse``, or an
exception instance to raise (for testing failures). Every request received is kept in
``requests``, so a test can compare exactly what was sent.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Sequence
from operator import itemgetter
from typing import Any

from ..errors import ConfigurationError, listed
from ._base import LLMRequest, LLMResponse, Provider, StreamChunk, ToolCall, Usage
from ._construct import set_dict, set_extra, set_fields_set, set_private

__all__ = ["MockProvider", "mock"]

Reply = str | dict[str, Any] | LLMResponse | BaseException


class MockProvider(Provider):
    """Scripted or function-backed replies; records every request."""

    streams = True
    model = "mock"
    structured_output = "text"
    """Its native structured output is its text: a scripted reply that validates against the
    agent's ``output_type`` is the output (``requests`` keep the ``output_schema`` asked for)."""

    def __init__(self, *, script: Sequence[Reply] | None = None, reply: Reply | None = None,
                 respond: Callable[[LLMRequest], Any] | None = None, name: str = "mock",
                 deterministic: bool = True) -> None:
        self.name = name
        self.deterministic = deterministic
        self.script = (list(listed(script, argument="script", example="'hello'"))
                       if script is not None else None)
        self.reply = reply
        self.respond = respond
        self.requests: list[LLMRequest] = []
        self._cursor = 0
        self._call_ids = 0
        self._counted: tuple[list[Any], int] = ([], 0)
        """The messages of the last request and their characters (a loop resends them)."""

    def fork(self) -> MockProvider:
        """A fresh copy: the same script from its start, no requests received."""
        return MockProvider(script=self.script, reply=self.reply, respond=self.respond,
                            name=self.name, deterministic=self.deterministic)

    def reset(self) -> None:
        """Rewind the script and forget received requests."""
        self._cursor = 0
        self._call_ids = 0
        self.requests.clear()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        script = self.script
        if script is not None:
            cursor = self._cursor
            if cursor >= len(script):
                raise ConfigurationError(
                    f"mock provider {self.name!r} ran out of scripted replies after "
                    f"{len(script)}; add replies to script= or lower max_iterations")
            item: Any = script[cursor]
            self._cursor = cursor + 1
        elif self.reply is not None:
            item = self.reply
        elif self.respond is not None:
            item = self.respond(request)
            if inspect.isawaitable(item):
                item = await item
        else:
            last = next((m["content"] for m in reversed(request.messages)
                         if m["role"] == "user"), "")
            item = f"echo: {last}"
        if type(item) is dict:  # the usual reply: no exception, nothing to convert
            return self._response(item, request)
        if isinstance(item, BaseException):
            raise item
        return self._response(item, request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        response = await self.complete(request)
        index = 0
        for piece in re.findall(r"\S+\s*|\s+", response.content):
            yield StreamChunk(index=index, content=piece)
            index += 1
        yield StreamChunk(index=index, done=True, response=response)

    def _response(self, item: Any, request: LLMRequest) -> LLMResponse:
        if type(item) is not dict:  # (a plain dict, the usual reply, skips the checks)
            if isinstance(item, LLMResponse):
                return item
            if isinstance(item, str):
                item = {"content": item}
            if not isinstance(item, dict):
                raise ConfigurationError(
                    f"mock reply {item!r} must be a str, a dict with content/tool_calls, "
                    "an LLMResponse or an exception")
        if not item.keys() <= _REPLY_SET:
            _check_keys(item, _REPLY_KEYS, "mock reply")
        calls: list[ToolCall] = []
        plain = True  # every value already what validation would make of it
        asked = item.get("tool_calls", ())
        if type(asked) is not list and type(asked) is not tuple:  # (a list needs no check)
            asked = listed(asked, argument="tool_calls",
                           example="{'name': 'lookup', 'args': {...}}")
        for raw in asked:
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                raise ConfigurationError(
                    f"mock tool call {raw!r} must be a dict with a 'name' (and 'args')")
            if not raw.keys() <= _CALL_SET:
                _check_keys(raw, _CALL_KEYS, "mock tool call")
            self._call_ids = number = self._call_ids + 1
            call_id = raw.get("id") or f"call_{number}"
            args = dict(raw.get("args", ()))
            if type(call_id) is not str or not _STR.issuperset(map(type, args)):
                plain = False  # validation would refuse or convert it: it decides
            calls.append({"id": call_id, "name": raw["name"], "args": args})
        content = item.get("content", "") or ""
        usage: Any = item.get("usage")
        stop = item.get("stop_reason", "tool_use" if calls else "stop")
        if usage is None:
            # The prompt's characters, counting only what the last request did not send: an
            # agent's next call resends its messages and adds to their end. The earlier ones
            # are compared with ``==`` (identical objects at once, at C speed), so equal
            # messages have equal counts and the answer is always the full sum.
            messages = request.messages
            seen, count = self._counted
            start = len(seen)
            if not (start and len(messages) >= start and messages[:start] == seen):
                start, count = 0, 0
            count += sum(map(len, map(_CONTENT, messages[start:])))  # (C speed)
            self._counted = (list(messages), count)
            # tokens: ceil(characters / 4), in integers (exactly what math.ceil gives)
            inputs = (len(request.system or "") + count + 3) // 4
            outputs = (len(content) + 3) // 4
            if (plain and type(content) is str and type(stop) is str
                    and type(request.model) is str):
                # every value is already what validation would make of it: built as is, so
                # a plain run never builds LLMResponse's and Usage's validators (cold start)
                return _reply(content, calls, inputs, outputs, stop, request.model)
            usage = {"input": inputs, "output": outputs}
        elif isinstance(usage, dict):
            usage = Usage(**usage)  # (its own errors: a misspelt usage key is named)
        return LLMResponse(content=content, tool_calls=calls, usage=usage, stop_reason=stop,
                           model=request.model)


_REPLY_KEYS = ("content", "tool_calls", "usage", "stop_reason")
_CALL_KEYS = ("id", "name", "args")
_REPLY_SET = frozenset(_REPLY_KEYS)
_CALL_SET = frozenset(_CALL_KEYS)
_STR = frozenset((str,))
_CONTENT = itemgetter("content")
_new = object.__new__


def _reply(content: str, calls: list[ToolCall], inputs: int, outputs: int, stop: str,
           model: str) -> LLMResponse:
    """``LLMResponse.model_construct(content=..., tool_calls=..., usage=Usage.model_construct(
    input=inputs, output=outputs), stop_reason=..., model=...)`` — the same ``__dict__``s,
    fields sets, no extra, no private values — in straight-line code: the mock answers every
    call (tests/providers/test_mock_fast_reply.py pins it against ``model_construct``)."""
    usage: Usage = _new(Usage)
    set_dict(usage, {"input": inputs, "output": outputs, "cache_read": 0, "cache_write": 0})
    set_fields_set(usage, {"input", "output"})
    set_extra(usage, None)
    set_private(usage, None)
    response: LLMResponse = _new(LLMResponse)
    set_dict(response, {"content": content, "tool_calls": calls, "usage": usage,
                        "stop_reason": stop, "model": model, "provider_ref": None})
    set_fields_set(response, {"content", "tool_calls", "usage", "stop_reason", "model"})
    set_extra(response, None)
    set_private(response, None)
    return response


def _check_keys(item: dict[str, Any], known: tuple[str, ...], what: str) -> None:
    """A misspelt key would otherwise be dropped and the reply silently come out empty
    (called for a dict whose keys are not all ``known``)."""
    unknown = sorted(set(item) - set(known))
    if unknown:
        raise ConfigurationError(
            f"{what} {item!r} has unknown key(s) {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(map(repr, known))}")


def mock(*, script: Sequence[Reply] | None = None, reply: Reply | None = None,
         respond: Callable[[LLMRequest], Any] | None = None, name: str = "mock",
         deterministic: bool = True) -> MockProvider:
    """A deterministic provider: ``script=[...]``, ``reply="..."`` or ``respond=fn``.

    A ``respond`` function that samples (a simulated noisy model) says
    ``deterministic=False``, so explanations treat its re-runs as independent draws.
    """
    return MockProvider(script=script, reply=reply, respond=respond, name=name,
                        deterministic=deterministic)
