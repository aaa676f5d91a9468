"""A failed run explained as a failure: the error, the step that raised it, and what it held.

A run that raised has no answer, so tracing "the answer" to a source would explain nothing —
the empty text would be pinned on whatever piece of context scored best. ``failure_of`` reads
the failure instead, from the recording alone (so it works on a run the store kept after it
failed, in another process):

* the error as recorded (type and message, under the run's redaction), and the step that raised
  it — the innermost one, not the subflow mounts the error passed through;
* for a provider error (the LLM call step raised), the request that failed: the model, how many
  messages it was sent and the last of them, the system prompt's size and the tools offered;
* the context at that moment: the pieces the failing call (or, for any other step, the last LLM
  call before it) was sent, the tool calls of a batch that raised, and the state the step read.

A run counts as failed when its status says so (a ``Recording`` or ``FlowRun``), or, for a bare
commit log, when it ends on a step that recorded an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..flow._commitlog import CommitLog, CommitRecord
from ..flow._display import clip_line
from ..flow._run import FlowRun
from ..flow._values import MISSING
from ..runs import trace
from ..runs._recording import Recording
from ..runs._view import CallView, Explainable, RunView, is_stage, llm_started, log_of
from ._trace_view import preview

__all__ = ["FailedRequest", "Failure", "failure_of"]

FailureKind = Literal["provider", "tool", "stage", "run"]
_READS_SHOWN = 6


@dataclass(frozen=True, slots=True)
class FailedRequest:
    """The LLM request that failed, as the recording rebuilds it."""

    model: str | None
    provider: str | None
    messages: int
    """How many messages the call was sent (through the window)."""
    last_role: str | None
    last_message: str | None
    system_chars: int
    tools: int


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a run failed and what it held at that moment."""

    error: str
    """The error as recorded (``"ProviderError: upstream 503"``), redaction applied."""
    error_type: str
    kind: FailureKind
    """``provider``: an LLM call raised; ``tool``: the tool batch raised; ``stage``: another
    step; ``run``: no step recorded the error (a timeout, a cancellation from outside)."""
    runtime_stage_id: str | None
    stage_id: str | None
    stage: str | None
    """The raising step's name."""
    scope: str
    """The composition member's namespace the step ran in (``""`` at the top level)."""
    call: CallView | None
    """The failing LLM call (provider errors), else the last LLM call before the failure."""
    request: FailedRequest | None
    batch: tuple[str, ...]
    """For a tool batch that raised: its calls, ``name(args)``."""
    reads: tuple[tuple[str, str], ...]
    """The state the raising step read: ``(key, value preview)``."""
    calls_done: int
    """LLM calls that answered before the failure."""

    @property
    def where(self) -> str:
        if self.runtime_stage_id is None:
            return "no step recorded it"
        inside = f" in {self.scope.rsplit('#', 1)[0]}" if self.scope else ""
        return f"stage {self.stage or self.stage_id!r} ({self.runtime_stage_id}){inside}"

    def headline(self) -> str:
        """``RUN FAILED: ProviderError: … — raised by stage 'call_llm' (call_llm#12).``"""
        what = {"provider": "an LLM call failed", "tool": "the tool batch raised",
                "stage": "a step raised", "run": "the run was stopped"}[self.kind]
        return (f"RUN FAILED ({what}): {clip_line(self.error, 300)} — raised by {self.where}; "
                "the run gave no answer, so there is none to trace.")

    def context_lines(self) -> list[tuple[str, str, str | None]]:
        """``(kind, text, runtime stage id)`` for each thing the failure's context holds."""
        out: list[tuple[str, str, str | None]] = []
        request, call = self.request, self.call
        if request is not None and call is not None:
            last = (f"; last message ({request.last_role}): {_quote(request.last_message)}"
                    if request.last_message is not None else "")
            out.append(("REQUEST", f"the request that failed: model {request.model!r}"
                        + (f" via {request.provider}" if request.provider else "")
                        + f", {request.messages} message(s), system prompt "
                          f"{request.system_chars} chars, {request.tools} tool(s){last}",
                        call.runtime_stage_id))
        if self.batch:
            out.append(("BATCH", "the tool calls under way: " + "; ".join(self.batch),
                        self.runtime_stage_id))
        if call is not None:
            whose = "the failing call was sent" if self.kind == "provider" else (
                f"the last LLM call before it ({call.runtime_stage_id}) was sent")
            labels = ", ".join(dict.fromkeys(p.label for p in call.pieces)) or "no piece"
            out.append(("CONTEXT", f"{whose}: {labels}", call.runtime_stage_id))
        elif self.kind != "run":
            out.append(("CONTEXT", "no LLM call was made before it", None))
        if self.reads and self.kind != "provider":
            shown = ", ".join(f"{key} = {value}" for key, value in self.reads)
            out.append(("STATE", f"the step read: {shown}", self.runtime_stage_id))
        out.append(("DONE", f"{self.calls_done} LLM call(s) answered before the failure", None))
        return out

    def __str__(self) -> str:
        lines = [self.headline()]
        lines.extend(f"{kind:<8} {text}" for kind, text, _ in self.context_lines())
        return "\n".join(lines)


def failure_of(source: Explainable) -> Failure | None:
    """The failure of ``source``, or ``None`` when the run did not fail."""
    log = log_of(source)
    status = source.status if isinstance(source, Recording | FlowRun) else None
    if status is not None and status != "failed":
        return None
    failing = _raising_record(log)
    if status is None and failing is None:
        return None
    recorded = source.error if isinstance(source, FlowRun) else None
    error = (failing.error if failing is not None else None) or recorded or (
        "no step recorded an error: the run was stopped from outside (a timeout or a "
        "cancellation)")
    if error.startswith("CancelledError"):  # the step under way when the run was stopped
        error = (f"{recorded} (the step under way was cancelled)" if recorded else
                 "CancelledError: the run was cancelled or timed out while this step ran")
    view = RunView.of(log)
    if failing is None:
        last = view.records[-1] if view.records else None
        return Failure(error, _type_of(error), "run", None, None, None, "",
                       view.call(last) if last is not None else None, None, (), (),
                       len(view.records))
    kind: FailureKind = ("provider" if is_stage(failing, trace.CALL_LLM)
                         else "tool" if is_stage(failing, trace.TOOL_CALLS) else "stage")
    before = [r for r in view.records if r.idx < failing.idx]
    if kind == "provider":
        failed = view.call(failing)
        call: CallView | None = failed
        request: FailedRequest | None = _request(failed, failing)
    else:
        call = view.call(before[-1]) if before else None
        request = None
    batch = _batch(log, failing) if kind == "tool" else ()
    return Failure(error, _type_of(error), kind, failing.runtime_stage_id, failing.stage_id,
                   failing.stage, failing.ns, call, request, batch, _reads(log, failing),
                   len(before))


def _raising_record(log: CommitLog) -> CommitRecord | None:
    """The innermost step of the error the run ended on: the first of the trailing records
    that carry an error (the mounts it passed through record it again after it)."""
    records = log.records
    end = len(records)
    while end > 0 and (records[end - 1].error or records[end - 1].kind == "subflow-exit"):
        end -= 1
    trailing = [r for r in records[end:] if r.error]
    if trailing:
        return trailing[0]
    return next((r for r in reversed(records) if r.error), None)


def _request(call: CallView, record: CommitRecord) -> FailedRequest:
    started = llm_started(record)
    last = call.messages[-1] if call.messages else None
    role = str(last.get("role")) if isinstance(last, dict) else None
    content = last.get("content") if isinstance(last, dict) else last
    text = content if isinstance(content, str) else (None if content is None
                                                      else preview(content, 200))
    model = started.get("model") if isinstance(started.get("model"), str) else call.model
    provider = started.get("provider") if isinstance(started.get("provider"), str) \
        else call.provider
    return FailedRequest(model, provider, len(call.messages), role, text, len(call.system),
                         len(call.tools))


def _batch(log: CommitLog, record: CommitRecord) -> tuple[str, ...]:
    asked = log.value_at(trace.LLM_TOOL_CALLS, record.idx - 1, ns=record.ns, default=[])
    out = []
    for call in asked if isinstance(asked, list) else []:
        if isinstance(call, dict):
            out.append(f"{call.get('name')}({preview(call.get('args') or {}, 120)})")
    return tuple(out)


def _reads(log: CommitLog, record: CommitRecord) -> tuple[tuple[str, str], ...]:
    ns = record.read_namespace
    out = []
    for key in record.reads[:_READS_SHOWN]:
        value: Any = log.value_at(key, record.idx - 1, ns=ns, default=MISSING)
        out.append((key, preview(value, 80)))
    return tuple(out)


def _type_of(error: str) -> str:
    head, sep, _ = error.partition(":")
    return head if sep and head.isidentifier() else "error"


def _quote(text: str | None, limit: int = 120) -> str:
    return '"' + clip_line(text or "", limit) + '"'
