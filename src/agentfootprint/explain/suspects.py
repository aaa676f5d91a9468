"""Suspects: the context sources that provably reached an LLM call.

The candidate set of an explanation is read from the log, never guessed: every piece of the
system prompt the call sent (the base prompt and each injection, with its exact text), every
tool result and delivered message in the conversation it sent, and the user's message. Each
suspect can be removed by a rebuild (an injection by id, a tool by name), except the base
prompt and the user's message, which have no ablation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..flow.commitlog import CommitLog, CommitRecord
from ..runs import trace

if TYPE_CHECKING:
    from ..agent.agent import RunResult
    from ..flow.run import FlowRun

__all__ = ["Suspect", "final_call", "is_stage", "log_of", "suspects_of"]

SuspectKind = Literal["injection", "tool", "base", "user", "message"]


@dataclass(frozen=True, slots=True)
class Suspect:
    """One source that reached the call, with the exact text the model saw."""

    kind: SuspectKind
    id: str
    """Injection id, tool name, ``"base"`` or ``"user"``."""
    text: str
    flavor: str | None = None
    slot: str = "system"
    """``system``, ``messages`` or ``tools`` (tool results arrive in ``messages``)."""
    runtime_stage_id: str | None = None
    """The step that wrote it into state (for a tool result: the ToolCalls step)."""
    removable: bool = True
    """Whether a rebuild can leave it out (the base prompt and user message cannot)."""

    @property
    def label(self) -> str:
        """``fact 'vip-override'``: an injection is named by its flavor, as it was defined."""
        kind = self.flavor if self.kind == "injection" and self.flavor else self.kind
        return f"{kind} {self.id!r}"


def log_of(source: RunResult | FlowRun | CommitLog | Any) -> CommitLog:
    """The commit log behind a result, a run, a recording or a log."""
    if isinstance(source, CommitLog):
        return source
    recording = getattr(source, "recording", None)
    if recording is not None and hasattr(recording, "log"):
        return recording.log  # type: ignore[no-any-return]
    log = getattr(source, "log", None)
    if isinstance(log, CommitLog):
        return log
    commit_log = getattr(source, "commit_log", None)
    if callable(commit_log):
        found = commit_log()
        if isinstance(found, CommitLog):
            return found
    raise TypeError(f"{source!r} carries no commit log; pass a RunResult, FlowRun or Recording")


def final_call(log: CommitLog) -> CommitRecord:
    """The LLM call whose answer the run handed back (the one being explained).

    In a composition the last call is not always the one that answered: a critic, a scorer or
    a sibling sample may run after it. The latest call whose content is the run's final answer
    wins; when none matches (a function rewrote the answer), the last call of the run.
    """
    calls = [record for record in log.records if is_stage(record, trace.CALL_LLM)]
    if not calls:
        raise ValueError("this run made no LLM call; there is no answer to explain")
    answer = log.value_at(trace.FINAL_CONTENT, len(log.records) - 1, default=None)
    if isinstance(answer, str) and answer:
        for record in reversed(calls):
            if log.value_at(trace.LLM_CONTENT, record.idx, ns=record.ns, default=None) == answer:
                return record
    return calls[-1]


def is_stage(record: CommitRecord, stage_id: str) -> bool:
    """True for ``stage_id`` at the top level or inside a subflow (``sf/stage_id``)."""
    return record.stage_id == stage_id or record.stage_id.endswith("/" + stage_id)


def suspects_of(source: Any, call: CommitRecord | None = None) -> list[Suspect]:
    """Every source that reached ``call`` (default: the final LLM call), in prompt order."""
    log = log_of(source)
    call = call or final_call(log)
    before = call.idx - 1
    ns = call.ns
    out: list[Suspect] = []
    system = log.value_at(trace.SYSTEM_PROMPT, before, ns=ns, default="")
    rows = log.value_at(trace.SYSTEM_SLOT, before, ns=ns, default=None)
    slot_writer = log.last_writer(trace.SYSTEM_SLOT if rows is not None else "system_prompt",
                                  call.idx, ns=ns)
    writer_rid = log[slot_writer].runtime_stage_id if slot_writer is not None else None
    if rows is None and system:
        out.append(Suspect("base", "base", system, "base", "system", writer_rid, False))
    for row in rows or ():
        text = system[row["start"]:row["end"]]
        if row["source"] == "base":
            out.append(Suspect("base", "base", text, "base", "system", writer_rid, False))
        else:
            out.append(Suspect("injection", row["source"], text, row["flavor"], "system",
                               writer_rid))
    history = log.value_at(trace.HISTORY, before, ns=ns, default=[])
    writers = _history_writers(log, call.idx, ns)
    writers += [None] * (len(history) - len(writers))
    window = log.value_at(trace.WINDOW, before, ns=ns, default=None)
    sent = set(window["kept"]) if window is not None else None
    for index, message in enumerate(history):
        if sent is not None and index not in sent:
            continue  # left out of the window: the model never read it
        marker = message.get("injected_by")
        if message["role"] == "user" and marker is None:
            out.append(Suspect("user", "user", message["content"], None, "messages",
                               writers[index], False))
        elif message["role"] == "tool":
            out.append(Suspect("tool", message.get("tool_name") or "?", message["content"],
                               None, "messages", writers[index]))
        elif marker is not None and marker not in ("wrap-up", "step-nudge"):
            out.append(Suspect("message", marker, message["content"], None, "messages",
                               writers[index]))
    return _dedupe(out)


def _history_writers(log: CommitLog, before: int, ns: str = "") -> list[str | None]:
    """For each message of ``history`` as of ``before``: the step whose commit added it.

    One pass over the log: appends own their tail; a whole rewrite keeps the owners of the
    unchanged prefix and gives the rest to the rewriting step.
    """
    current: list[Any] = list(log.initial.get(ns, {}).get("history", []))
    owners: list[str | None] = [None] * len(current)
    for record in log.records[:before]:
        if record.ns != ns:
            continue
        for change in record.changes:
            if change.key != "history":
                continue
            rid = record.runtime_stage_id
            if change.op == "append":
                current.extend(change.value)
                owners.extend([rid] * len(change.value))
            elif change.op == "delete":
                current, owners = [], []
            else:
                new = list(change.value)
                keep = 0
                for old, fresh in zip(current, new, strict=False):
                    if old is not fresh and old != fresh:
                        break
                    keep += 1
                owners = owners[:keep] + [rid] * (len(new) - keep)
                current = new
    return owners


def _dedupe(suspects: list[Suspect]) -> list[Suspect]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for suspect in suspects:
        key = (suspect.kind, suspect.id, suspect.text)
        if key not in seen:
            seen.add(key)
            out.append(suspect)
    return out
