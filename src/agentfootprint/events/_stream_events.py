"""The typed events of ``run_stream``: what an SSE or WebSocket endpoint forwards.

Each is a frozen Pydantic model told apart by its ``type``; ``model_dump_json()`` is its wire
form and ``sse()`` a ready Server-Sent Events frame (``event: <type>``). Every event but the
last is one catalogue event of the run (``catalogue`` names it) and carries ``step``, the
runtime stage id whose commit record holds that same event in the recording; text deltas are
the exception: tokens are delivered live, never recorded (the answer they add up to is).

    TextDelta       stream.token       a piece of the model's answer as it arrives
    ToolCalled      stream.tool_start  a tool call the model asked for, about to run
    ToolReturned    stream.tool_end    what the tool returned (or the error the model reads)
    InjectionFired  context.injected   a piece of declared context that landed in a slot
    RunFinished     (the run's end)    the ``RunResult`` summary; always the last event
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from ._dispatcher import PREFIX

__all__ = [
    "InjectionFired",
    "RunFinished",
    "StreamEvent",
    "TextDelta",
    "ToolCalled",
    "ToolReturned",
    "stream_event",
]


class StreamEvent(BaseModel):
    """Base of every ``run_stream`` event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalogue: ClassVar[str | None] = None
    """The catalogue event this kind carries (``None``: not a catalogue event)."""

    type: str
    """What kind of event this is: also the SSE ``event:`` name."""
    run_id: str
    """The run it belongs to (the id of its recording in a run store)."""

    def sse(self) -> str:
        """This event as one Server-Sent Events frame: ``event: <type>`` and JSON ``data``."""
        return f"event: {self.type}\ndata: {self.model_dump_json()}\n\n"


class _StepEvent(StreamEvent):
    step: str
    """The runtime stage id (``call_llm#4``) whose commit record holds this event."""
    iteration: int
    """The loop iteration it happened in (1 for the first model call)."""


class TextDelta(_StepEvent):
    """A piece of the model's answer, in order; the pieces of one call join to its text."""

    catalogue: ClassVar[str | None] = PREFIX + "stream.token"
    type: Literal["text_delta"] = "text_delta"
    index: int
    """Position of this piece within its model call's answer."""
    text: str
    restart: bool = False
    """A marker (empty ``text``): a retry started this call's answer over, so the text this
    step delivered before it is void. ``RunFinished`` always holds the answer itself."""


class ToolCalled(_StepEvent):
    """The model asked for a tool; it runs next (unless a rule or a check-in stops it)."""

    catalogue: ClassVar[str | None] = PREFIX + "stream.tool_start"
    type: Literal["tool_call"] = "tool_call"
    tool_name: str
    tool_call_id: str
    args: dict[str, Any]


class ToolReturned(_StepEvent):
    """A tool's result as the model will read it (an error is a result too)."""

    catalogue: ClassVar[str | None] = PREFIX + "stream.tool_end"
    type: Literal["tool_result"] = "tool_result"
    tool_name: str
    tool_call_id: str
    result: str
    error: bool
    status: str


class InjectionFired(_StepEvent):
    """A declared piece of context (fact, steering, instruction, skill, memory) landed."""

    catalogue: ClassVar[str | None] = PREFIX + "context.injected"
    type: Literal["injection"] = "injection"
    injection_id: str
    slot: str
    """``system``, ``messages`` or ``tools``."""
    trigger: str
    """What let it in: ``always``, ``rule``, ``on_tool_return`` or ``llm_activated``."""


class RunFinished(StreamEvent):
    """The run's outcome, as ``RunResult`` has it; the last event of every stream that ends."""

    type: Literal["result"] = "result"
    turn: int
    status: Literal["done", "paused"]
    """``paused``: a tool asked a person (``pause`` says what); resume with ``agent.resume``."""
    content: str
    """The final answer (empty when the run paused)."""
    output: Any = None
    """The typed answer when the agent has an ``output_type``, else ``None``."""
    iterations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    stopped_early: str | None = None
    pause: dict[str, Any] | None = None


_KINDS: dict[str, type[_StepEvent]] = {
    kind.catalogue: kind for kind in (TextDelta, ToolCalled, ToolReturned, InjectionFired)
    if kind.catalogue is not None}
STREAMED: tuple[str, ...] = tuple(_KINDS)
"""The catalogue events a ``run_stream`` delivers (its final ``RunFinished`` aside)."""


def stream_event(name: str, payload: Mapping[str, Any], *, run_id: str,
                 step: str) -> StreamEvent | None:
    """The stream event of one catalogue event (``None`` for names the stream leaves out)."""
    kind = _KINDS.get(name)
    if kind is None:
        return None
    fields = dict(payload)
    if kind is TextDelta:
        fields["text"] = fields.pop("content", "")
    return kind.model_validate({**fields, "run_id": run_id, "step": step})
