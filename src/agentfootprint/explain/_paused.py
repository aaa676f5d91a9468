"""A paused run explained as a pause: where it stopped, what it waits on, and what asked for it.

A paused run has no answer yet, so tracing "the answer" (an empty string) to a source would
pin nothing on whatever piece of context happened to rank first. What a paused run holds is
the thing it stopped at, and that is what ``pause_of`` reads — from the commit log alone, so a
live result, a recording kept in a store and a recording loaded in another process all give
the same explanation:

* the step that paused (the record the engine marked ``paused``; the innermost one in a
  composition), its stage and the member it ran in;
* for a tool batch that paused (a check-in before a consequential tool, a tool that called
  ``ask_human`` or ``pause_here``): the pending tool call — its name and its arguments exactly
  as recorded (masked where the run's redaction masked them), its id, the kind of pause, and
  the LLM call that asked for it (``call``); ``pending`` is the text the candidates of that
  call are ranked against (the same ``name {args}`` the check-in's evidence pack ranks);
* for any other pausable stage (a plain flow chart's approval step): the state it read, each
  value with the step that wrote it — what made the run stop there.

A run counts as paused when its status says so (a ``Recording``, ``FlowRun`` or
``RunResult``), or, for a bare commit log, when its last record is a paused step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..flow._commitlog import CommitLog, CommitRecord
from ..flow._display import clip_line
from ..flow._values import MISSING
from ..runs import trace
from ..runs._view import CallView, Explainable, RunView, is_stage, log_of
from ._trace_view import preview

__all__ = ["Paused", "PauseKind", "pause_of"]

PauseKind = Literal["check_in", "ask", "pause", "stage"]
"""``check_in``: consent asked before a tool runs; ``ask``: a tool asked a person a question
(``ask_human``); ``pause``: a tool paused with data (``pause_here``); ``stage``: a pausable
stage of a flow chart returned ``pause()``."""

_PAUSE_EVENT = "pause.requested"
_READS_SHOWN = 6


@dataclass(frozen=True, slots=True)
class Paused:
    """Where a run paused and what it is waiting on, read from its commit log."""

    kind: PauseKind
    runtime_stage_id: str
    stage_id: str
    stage: str
    """The pausing step's name (``ToolCalls``, or the flow stage's own name)."""
    scope: str
    """The composition member's namespace the step ran in (``""`` at the top level)."""
    tool: str | None = None
    """The pending tool call's name (tool pauses only)."""
    tool_call_id: str | None = None
    args: Any = None
    """The pending call's arguments exactly as recorded (a mask where the run masked them)."""
    question: str | None = None
    """What ``ask_human`` asked the person, as recorded (``ask`` pauses only)."""
    call: CallView | None = None
    """The LLM call that asked for the pending tool call (tool pauses only)."""
    reads: tuple[tuple[str, str, str | None], ...] = ()
    """For a stage pause: ``(key, value preview, runtime id of the step that wrote it)``."""

    @property
    def where(self) -> str:
        """The step id, with the member it ran in when the id does not already say so."""
        member = self.scope.rsplit("#", 1)[0]
        said = not member or self.runtime_stage_id.startswith(f"{member}/")
        return self.runtime_stage_id if said else f"{self.runtime_stage_id} in {member}"

    @property
    def pending(self) -> str:
        """The pending tool call as one text, ``name {args}`` — what the candidates that
        reached ``call`` are ranked against (empty for a stage pause)."""
        if self.tool is None:
            return ""
        return f"{self.tool} {_args_text(self.args)}".strip()

    def hop(self) -> tuple[str, str, str | None]:
        """The PAUSED hop: ``(kind, text, runtime stage id)``."""
        return "PAUSED", f"{self.where} — {self.describe()}", self.runtime_stage_id

    def describe(self) -> str:
        """What the run stopped at, in one sentence (without the step id)."""
        call = f" (tool call {self.tool_call_id})" if self.tool_call_id else ""
        shown = clip_line(_args_text(self.args), 160)
        if self.kind == "check_in":
            return (f"check-in before tool {self.tool!r} {shown}{call}: it has not run; a "
                    "person approves or declines it")
        if self.kind == "ask":
            asked = f" {_quote(self.question)}" if self.question else ""
            return (f"tool {self.tool!r} {shown}{call} asked a person{asked}; their answer "
                    "becomes its result")
        if self.kind == "pause":
            return (f"tool {self.tool!r} {shown}{call} paused the run; whoever resumes it "
                    "gives its result")
        return f"stage {self.stage!r} paused the run, waiting for a person's input"

    def brief(self) -> str:
        """What the run stopped at without the arguments or the question (for a reader whose
        own redaction may mask what the run recorded readable)."""
        call = f" (tool call {self.tool_call_id})" if self.tool_call_id else ""
        if self.kind == "check_in":
            return f"a check-in before tool {self.tool!r}{call}"
        if self.kind == "ask":
            return f"tool {self.tool!r} asked a person{call}"
        if self.kind == "pause":
            return f"tool {self.tool!r} paused the run{call}"
        return f"stage {self.stage!r} paused the run"

    def overview_line(self) -> str:
        """The trace toolpack's overview line: where it paused and what to ask next."""
        traced = "the pending tool call" if self.tool is not None else "the pause"
        return (f"PAUSED: at {self.where} — {self.brief()}; the run has no answer yet, so "
                f"explain what it stopped at: backtrack() traces {traced}, "
                f"trace_node('{self.runtime_stage_id}') shows that step")

    def headline(self) -> str:
        """``RUN PAUSED at tool_calls#7 — it gave no answer yet; the pending tool call is
        what to explain.``"""
        what = ("the pending tool call" if self.tool is not None else "the pause")
        return (f"RUN PAUSED at {self.where} — it gave no answer yet; {what} is what to "
                "explain.")

    def state_line(self) -> tuple[str, str, str | None] | None:
        """The STATE hop of a stage pause: what the step read and who wrote each value."""
        if not self.reads:
            return None
        shown = ", ".join(f"{key} = {value}" + (f" (written by {writer})" if writer else "")
                          for key, value, writer in self.reads)
        return "STATE", f"the step read: {shown}", self.runtime_stage_id


def pause_of(source: Explainable, view: RunView | None = None) -> Paused | None:
    """The pause of ``source``, or ``None`` when the run is not paused. ``view`` is the run
    already read (its calls are reused for the call that asked for the pending tool call)."""
    log = log_of(source)
    status = _status(source)
    if status is not None and status != "paused":
        return None
    record = next((r for r in reversed(log.records) if r.paused), None)
    if record is None or (status is None and record is not log.records[-1]):
        return None
    if is_stage(record, trace.TOOL_CALLS):
        found = _tool_pause(view if view is not None else RunView.of(log), record)
        if found is not None:
            return found
    return Paused("stage", record.runtime_stage_id, record.stage_id, record.stage, record.ns,
                  reads=_reads(log, record))


def _status(source: Explainable) -> str | None:
    """The status of the run the log belongs to: a result's recording says it (a
    composition's result may not), else the source's own; None for a bare log."""
    for holder in (getattr(source, "recording", None), source):
        status = getattr(holder, "status", None)
        if isinstance(status, str):
            return status
    return None


def _tool_pause(view: RunView, record: CommitRecord) -> Paused | None:
    """A tool batch's pause: the pending call from the batch it filed (``paused_tool_batch``)
    and the pause event it emitted, both as recorded."""
    log = view.log
    event: Mapping[str, Any] = next(
        (payload for name, payload in reversed(record.emits)
         if name.endswith(_PAUSE_EVENT) and isinstance(payload, Mapping)), {})
    batch = log.value_at(trace.PAUSED_TOOL_BATCH, record.idx, ns=record.ns, default=None)
    pending: Mapping[str, Any] = {}
    if isinstance(batch, Mapping) and isinstance(batch.get("calls"), list):
        index = batch.get("index")
        calls = batch["calls"]
        if isinstance(index, int) and 0 <= index < len(calls) and isinstance(calls[index],
                                                                               Mapping):
            pending = calls[index]
    name = pending.get("name", event.get("tool_name"))
    if not isinstance(name, str):
        return None
    call_id = pending.get("id", event.get("tool_call_id"))
    call_id = call_id if isinstance(call_id, str) else None
    data = event.get("data")
    args: Any = pending.get("args", MISSING)
    if args is MISSING:  # the batch was masked whole: the check-in's pack keeps the args
        will = data.get("will_do") if isinstance(data, Mapping) else None
        args = will.get("args") if isinstance(will, Mapping) else batch
    raw = event.get("kind", batch.get("kind") if isinstance(batch, Mapping) else None)
    kind: PauseKind = raw if raw in ("check_in", "ask", "pause") else "pause"
    question = data.get("question") if kind == "ask" and isinstance(data, Mapping) else None
    return Paused(kind, record.runtime_stage_id, record.stage_id, record.stage, record.ns,
                  name, call_id, args, question if isinstance(question, str) else None,
                  _asking_call(view, record, call_id))


def _asking_call(view: RunView, record: CommitRecord, call_id: str | None) -> CallView | None:
    """The LLM call that asked for the pending tool call: the latest call of the same scope
    before the batch whose tool calls name it (else the latest call of that scope)."""
    log = view.log
    before = [r for r in view.records if r.ns == record.ns and r.idx < record.idx]
    for candidate in reversed(before):
        asked = log.value_at(trace.LLM_TOOL_CALLS, candidate.idx, ns=candidate.ns, default=[])
        if isinstance(asked, list) and any(isinstance(c, Mapping) and c.get("id") == call_id
                                           for c in asked):
            return view.call(candidate)
    return view.call(before[-1]) if before else None


def _reads(log: CommitLog, record: CommitRecord) -> tuple[tuple[str, str, str | None], ...]:
    ns = record.read_namespace
    out = []
    for key in record.reads[:_READS_SHOWN]:
        value: Any = log.value_at(key, record.idx - 1, ns=ns, default=MISSING)
        writer = log.last_writer(key, record.idx, ns=ns)
        out.append((key, preview(value, 80),
                    log[writer].runtime_stage_id if writer is not None else None))
    return tuple(out)


def _args_text(args: Any) -> str:
    """The arguments as the check-in's evidence pack writes them (sorted JSON)."""
    if args is None or args is MISSING:
        return ""
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(args)


def _quote(text: str | None, limit: int = 120) -> str:
    return '"' + clip_line(text or "", limit) + '"'
