"""The LLM port: the request and response every provider speaks, and the provider interface.

Messages are plain JSON dicts (typed as ``Message``) because they live in run state and in
the commit log; requests and responses are Pydantic models because they cross the wire.
A provider implements one async method, ``complete``; streaming is an optional capability
(``stream``), and the default ``stream`` yields the completed response as one terminal chunk,
so every provider can be used where a stream is expected.
"""

# No ``from __future__ import annotations`` here: the wire models and TypedDicts below are
# built at import from real annotations (a string one costs a compile each, and hid
# ``NotRequired`` from the TypedDicts' optional keys).
from collections.abc import AsyncIterator, Sequence
from itertools import repeat
from operator import contains
from typing import Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from ..flow._values import FrozenList, committed_of, extends

__all__ = [
    "CachePrefix",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "OutputSchema",
    "Provider",
    "StreamChunk",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "wire_messages",
]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(TypedDict):
    """A tool the model asked for: ``args`` already parsed from JSON."""

    id: str
    name: str
    args: dict[str, Any]


class Message(TypedDict):
    """One conversation message, JSON-shaped so it can live in state and the log."""

    role: Role
    content: str
    tool_calls: NotRequired[list[ToolCall]]
    """Assistant messages that asked for tools."""
    tool_call_id: NotRequired[str]
    """Tool messages: the call this result answers."""
    tool_name: NotRequired[str]
    """Tool messages: the tool that produced it."""
    injected_by: NotRequired[str]
    """Framework-only: the injection that put this message here (stripped from the wire)."""


class ToolSchema(TypedDict):
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


class OutputSchema(TypedDict):
    """A structured output asked for: the answer must be JSON matching ``schema``."""

    name: str
    """A short name for the schema (the output type's), as OpenAI's ``json_schema`` wants."""
    schema: dict[str, Any]
    """The JSON schema; its root is always an object (``agent/_output.py`` wraps others)."""
    strict: bool
    """Whether the schema fits OpenAI's strict mode (every field required, no extras)."""


def _empty_list() -> list[Any]:
    # ``list`` itself would do, but Pydantic reads a factory's signature, and reading a builtin's
    # compiles the tokenizer's large regex: a cold-start cost paid before the first run.
    return []


class Usage(BaseModel):
    """Real token counts as the provider reported them (0 = not reported).

    ``input`` counts every prompt token, cached ones included, on every provider (Anthropic
    reports cached tokens apart; its adapter adds them in); ``cache_read`` / ``cache_write``
    say how many of them were read from / written to the provider's prompt cache.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)  # the mock constructs it

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


class CachePrefix(TypedDict):
    """How much of a request stays the same from call to call (its stable prefix)."""

    system: int
    """Leading characters of ``system``."""
    tools: int
    """Leading tools."""
    messages: int
    """Leading messages (the next call of the loop sends them again)."""


class LLMRequest(BaseModel):
    """One call to a model."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # a run makes it unvalidated

    model: str
    messages: list[Message]
    system: str | None = None
    tools: list[ToolSchema] = Field(default_factory=_empty_list)
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    tool_choice: str | None = None
    """``None``/``"auto"``, ``"none"``, ``"required"``, or a tool name to force."""
    seed: int | None = None
    """Asks a sampling server for a reproducible draw (OpenAI-compatible servers, Ollama);
    providers without one ignore it."""
    cache: CachePrefix | None = None
    """The stable prefix, for a provider with explicit prompt caching (Anthropic marks it with
    ``cache_control``); providers that cache prefixes by themselves (OpenAI) ignore it."""
    output_schema: OutputSchema | None = None
    """A structured output, for a provider whose ``structured_output`` names a native mode:
    it sends the schema its own way and answers with the JSON as ``content``."""


class LLMResponse(BaseModel):
    """What the model answered: text and/or tool calls, with usage."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # the mock constructs it

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=_empty_list)
    usage: Usage = Field(default_factory=Usage)
    stop_reason: str = "stop"
    """Normalised: ``stop``, ``tool_use``, ``max_tokens``, ``content_filter``, or the raw value."""
    model: str | None = None
    provider_ref: str | None = None
    """The provider's id for this response, when it gives one."""


class StreamChunk(BaseModel):
    """A piece of a streamed answer; the last chunk has ``done=True`` and the ``response``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on the first stream

    index: int
    content: str = ""
    done: bool = False
    response: LLMResponse | None = None
    restart: bool = False
    """A marker (no content) sent when ``with_retry`` starts a cut-off answer over: the text
    streamed before it is superseded by what follows. The final ``response`` is whole either way."""


class Provider:
    """Base class of every provider. Subclasses implement ``complete``; ``stream`` is optional."""

    name: str = "provider"
    model: str | None = None
    """The model used when a request names none (an agent built without ``model=``)."""
    configured_model: str | None = None
    """The model the caller named when building the provider (``openai(model=...)``), if any:
    an agent naming a different one is refused rather than silently overriding it."""
    streams: bool = False
    """True when ``stream`` yields tokens as they arrive (not just one terminal chunk)."""
    structured_output: str | None = None
    """The provider's native structured-output mode (``json_schema``, ``forced_tool``,
    ``format``, ``text``...): it honours ``LLMRequest.output_schema`` itself. ``None``: it has
    none, and an agent with an ``output_type`` offers the model a final-answer tool instead."""
    deterministic: bool = False
    """True only when the same request always gets the same reply (a scripted model): an
    explanation then needs one re-run per probe and may answer a repeated call from a cache.
    A sampling model (every real one) leaves it False; its re-runs are independent draws."""

    def fork(self) -> "Provider":
        """A provider for an independent re-run: one with state (a script's cursor) starts
        afresh; a stateless one returns itself."""
        return self

    async def complete(self, request: LLMRequest) -> LLMResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement complete()")

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        """Default: complete, then one terminal chunk carrying the whole response."""
        response = await self.complete(request)
        if response.content:
            yield StreamChunk(index=0, content=response.content)
        yield StreamChunk(index=1 if response.content else 0, done=True, response=response)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def wire_messages(messages: Sequence[Message]) -> list[Message]:
    """Messages as the provider should see them: framework-only fields removed.

    A new list; messages without such fields are the same objects, the others fresh copies.
    """
    out: list[Message] = []
    for message in messages:
        if "injected_by" in message:
            clean = dict(message)
            del clean["injected_by"]
            out.append(clean)  # type: ignore[arg-type]
        else:
            out.append(message)
    return out


class WireMemo:
    """``wire_messages`` for a history that grows call after call, at the cost of the growth.

    It remembers the committed history it last converted and where in it the messages with
    framework-only fields are. When the next history is known to extend it (``flow.extends``:
    constant time, committed lists only), only the new messages are looked at; anything else
    is looked at whole. The result is always exactly ``wire_messages(messages)``: a new list,
    holding the history's own messages except for fresh cleaned copies of the others.
    What is remembered is one immutable tuple, replaced whole, so runs sharing a memo (one
    agent, several runs at once, even on threads) only cost each other the cache.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[FrozenList, tuple[int, ...]] | None = None

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        committed = messages if type(messages) is FrozenList else committed_of(messages)
        if committed is None:
            return wire_messages(messages)
        last = self._last
        if last is not None and extends(committed, last[0]):
            source, cleaned = last
            start = len(source)
            tail = committed[start:]
            if any(map(contains, tail, repeat("injected_by"))):  # (C speed when none is)
                cleaned += tuple(
                    start + i for i, m in enumerate(tail) if "injected_by" in m)
        else:
            cleaned = tuple(i for i, m in enumerate(committed) if "injected_by" in m)
        self._last = (committed, cleaned)
        out = list(committed)
        for index in cleaned:  # the caller gets its own copies of what it may change
            clean = dict(out[index])
            del clean["injected_by"]
            out[index] = clean
        return out
