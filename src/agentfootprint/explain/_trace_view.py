"""The trace as a model may see it: steps, keys and scrubbed values of one recorded run.

The trace tools (``toolpack.py``) answer from this view only. It reads the recording's commit
log and chart, never a live run's state or return value (those hold the real values of
redacted keys), and scrubs every value it hands out: a key the run's policy redacted (its
committed value is the ``[REDACTED]`` marker) or one the caller declares redacted is served as
the marker wherever it appears, at the top level or nested in a dict or in a ``{"key": k,
"value": v}`` evidence row. Nothing is ever folded or reconstructed around a marker. Error
messages and break reasons are text the stage code wrote; they are served as recorded.

A failed lookup raises ``TraceLookupError`` whose message is the corrective sentence the model
reads. It names only what the trace holds (real ids, real keys), never the unknown input
itself, so an argument the model made up (or a secret it was tricked into sending) is not
echoed back.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ..errors import ConfigurationError
from ..events._dispatcher import PREFIX
from ..flow._commitlog import Change, CommitRecord
from ..flow._redact import REDACTED, RedactionPolicy
from ..flow._run import FlowRun
from ..flow._values import MISSING
from ..runs import trace
from ..runs._recording import AgentRun, Recording
from ..runs._view import Explainable, RunView

__all__ = ["RecordingLoader", "StageInfo", "TraceLookupError", "TraceView", "open_recording",
           "page", "preview", "render"]

MIN_CHARS: Final = 200
"""The smallest output cap that still holds a corrective message and a paging footer."""

_ROW_VALUES: Final = frozenset({"value", "actual", "threshold", "before", "after", "args"})
"""Fields of an evidence row ``{"key": k, ...}`` that carry ``k``'s value."""


class TraceLookupError(LookupError):
    """An id or key the trace does not hold; the message is what the model is told instead."""


class RecordingLoader(Protocol):
    """A run store: anything that loads a recording by run id (``RunStore``, Postgres...)."""

    def load(self, run_id: str) -> Recording: ...


@dataclass(frozen=True, slots=True)
class StageInfo:
    """A chart stage as the chart describes it (no functions, no values)."""

    id: str
    name: str
    kind: str
    description: str = ""


def open_recording(source: Explainable | str, *, store: RecordingLoader | None = None) -> Recording:
    """The recording behind ``source``: a Recording, a FlowRun, a RunResult or a run id.

    A run id needs ``store``. A live run is converted through ``Recording.of`` so the view
    only ever sees the committed (redacted) log, never the run's in-memory state.
    """
    if isinstance(source, Recording):
        return source
    if isinstance(source, str):
        if store is None:
            raise ConfigurationError(
                f"run id {source!r} needs a run store to load it from; pass "
                "store=RunStore(path) or the Recording itself")
        return store.load(source)
    if isinstance(source, FlowRun) or (
            isinstance(source, AgentRun) and isinstance(source.recording, FlowRun)):
        return Recording.of(source)
    raise ConfigurationError(
        f"cannot read a trace from {type(source).__name__}; pass a Recording, a FlowRun, a "
        "RunResult, or a run id with store=")


class TraceView:
    """The run as the trace tools may see it: ``RunView``'s step index, scrubbed on the way out.

    The one view of a run is ``runs.RunView``; this adds what a model-facing reader needs on
    top — scrubbing, corrective lookups, the chart's stage descriptions.
    """

    def __init__(self, recording: Recording, *, redaction: RedactionPolicy | None = None) -> None:
        self.recording = recording
        self.run = RunView.of(recording)
        self.log = self.run.log
        self.policy = redaction
        index = self.run.steps
        self.steps = index.by_runtime_id
        self.runs_of = index.runs_of
        self.keys = index.keys
        self.writes = index.writes
        self._marked = index.redacted
        self.stages = _chart_stages(recording.chart)
        self._calls: dict[str, dict[str, Any]] | None = None

    # -- redaction ------------------------------------------------------------------------

    def is_secret(self, key: str) -> bool:
        """True for a key redacted at the source or declared redacted by the caller."""
        return key in self._marked or (self.policy is not None and self.policy.is_redacted(key))

    @property
    def secret_keys(self) -> list[str]:
        """Every redacted key this trace holds (names only)."""
        return sorted({k for keys in self.keys.values() for k in keys if self.is_secret(k)})

    def scrub(self, value: object) -> Any:
        """``value`` with every nested redacted key (and evidence row about one) masked."""
        if isinstance(value, dict):
            named = value.get("key")
            row = isinstance(named, str) and self.is_secret(named)
            return {k: REDACTED if self.is_secret(k) or (row and k in _ROW_VALUES)
                    else self.scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value

    def value(self, key: str, step: int, ns: str = "") -> Any:
        """``key`` once record ``step`` committed (``-1`` = initial), scrubbed; or MISSING."""
        raw = self.log.value_at(key, step, ns=ns)
        if raw is MISSING:
            return MISSING
        return REDACTED if self.is_secret(key) else self.scrub(raw)

    def written(self, change: Change) -> Any:
        """What one change committed (the tail for an append), scrubbed."""
        if change.op == "delete":
            return MISSING
        return REDACTED if self.is_secret(change.key) else self.scrub(change.value)

    # -- steps ----------------------------------------------------------------------------

    def stage(self, record: CommitRecord) -> StageInfo:
        found = self.stages.get(record.stage_id)
        return found or StageInfo(record.stage_id, record.stage, record.kind)

    def label(self, rid: str) -> str:
        records = self.steps.get(rid)
        return f'{rid} "{records[0].stage}"' if records else rid

    def resolve(self, text: object) -> tuple[str, list[CommitRecord], str]:
        """The step named by ``text`` (a runtime id, or a stage that ran exactly once)."""
        wanted = text.strip() if isinstance(text, str) else ""
        found = self.steps.get(wanted)
        if found:
            return wanted, found, ""
        stage = wanted.rsplit("#", 1)[0] if "#" in wanted else wanted
        runs = self.runs_of.get(stage) or [
            rid for rid, records in self.steps.items() if records[0].stage == stage]
        if len(runs) == 1 and "#" not in wanted:
            return runs[0], self.steps[runs[0]], (
                f"(stage '{stage}' ran once; showing its execution {runs[0]})")
        if runs:
            number = wanted.rsplit("#", 1)[-1] if "#" in wanted else ""
            if number.isdigit():  # nearest executions first: 'call_llm#300' -> #299, #306...
                runs = sorted(runs, key=lambda r: abs(_execution(r) - int(number)))
            raise TraceLookupError(
                f"unknown runtime_stage_id. Stage '{stage}' has {len(runs)} execution(s): "
                f"{_some(runs, 8)}. Retry with one of those ids.")
        near = self.near(wanted, [*self.steps, *self.runs_of])
        hint = f" Closest ids: {', '.join(near)}." if near else ""
        raise TraceLookupError(
            "unknown runtime_stage_id: no step of this run has that id." + hint
            + " Ids look like 'stage#N'; run_overview lists every stage with its ids and "
            "find_in_trace('<word>') finds steps by name.")

    def tool_calls(self) -> dict[str, dict[str, Any]]:
        """Every tool call of an agent run (nested agents too), joined from four records."""
        if self._calls is not None:
            return self._calls
        view, log = self, self.log
        calls: dict[str, dict[str, Any]] = {}
        for record in log.records:
            for change in record.changes:
                if change.key != trace.LLM_TOOL_CALLS or change.op != "set":
                    continue
                proposed = view.written(change)
                for raw in proposed if isinstance(proposed, list) else ():
                    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                        calls.setdefault(raw["id"], {
                            "name": str(raw.get("name")), "args": raw.get("args"),
                            "proposed_by": record.runtime_stage_id, "ns": record.ns})
            for name, payload in record.emits:
                cid = payload.get("tool_call_id") if isinstance(payload, dict) else None
                call = calls.get(cid) if isinstance(cid, str) else None
                if call is None or not isinstance(payload, dict):
                    continue
                call["step"] = record.runtime_stage_id
                call["step_idx"] = record.idx
                if name == PREFIX + "stream.tool_end":
                    call["status"] = payload.get("status")
                elif name == PREFIX + "validation.args_invalid":
                    call["issues"] = list(payload.get("issues") or ())
        for cid, call in calls.items():
            idx = call.get("step_idx")
            if idx is None:
                continue
            history = view.value(trace.HISTORY, idx, call["ns"])
            if isinstance(history, str):
                call["result"] = history  # the conversation itself is redacted
            for message in history if isinstance(history, list) else ():
                if isinstance(message, dict) and message.get("tool_call_id") == cid \
                        and message.get("role") == "tool":
                    call["result"] = message.get("content")
            ledger = view.value(trace.ACT_LEDGER, idx, call["ns"])
            call["ledger"] = [r for r in ledger if isinstance(r, dict)
                              and r.get("tool_call_id") == cid] \
                if isinstance(ledger, list) else []
        self._calls = calls
        return calls

    # -- keys -----------------------------------------------------------------------------

    def locate(self, key: object, prefer: str | None = None) -> tuple[str, str, list[str]]:
        """(namespace, top-level key, path below it) for ``key``; dots reach nested fields."""
        wanted = key.strip() if isinstance(key, str) else ""
        order = [ns for ns in (prefer, "") if ns is not None]
        order += [ns for ns in self.keys if ns not in order]
        for ns in order:
            if wanted in self.keys.get(ns, {}):
                return ns, wanted, []
        parts = wanted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            top = ".".join(parts[:cut])
            for ns in order:
                if top in self.keys.get(ns, {}):
                    return ns, top, parts[cut:]
        everything = list(dict.fromkeys(k for keys in self.keys.values() for k in keys))
        near = self.near(wanted, everything, n=12)
        hint = f" Closest keys: {', '.join(near)}." if near else ""
        raise TraceLookupError(
            "no state key by that name was seeded or written in this run." + hint
            + " Run input (args), env and values a stage never wrote to state are not "
            "recorded; run_overview lists the keys.")

    def namespace_label(self, ns: str) -> str:
        return "run state" if ns == "" else f"subflow namespace '{ns}'"

    @staticmethod
    def near(text: str, candidates: Iterable[str], n: int = 8) -> list[str]:
        """Real names close to ``text``: substring matches first, then similar spellings."""
        pool = list(dict.fromkeys(candidates))
        low = text.lower()
        hits = [c for c in pool if low and (low in c.lower() or c.lower() in low)]
        hits += difflib.get_close_matches(text, pool, n=n, cutoff=0.5)
        return list(dict.fromkeys(hits))[:n]


def descend(value: object, path: list[str]) -> Any:
    """The field at ``path`` inside ``value`` (dict keys, list indexes), or MISSING."""
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and \
                -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def render(value: object) -> str:
    """A value as compact JSON text (strings quoted), the form every tool serves."""
    if value is MISSING:
        return "(no value)"
    return json.dumps(value, ensure_ascii=False, default=str)


def preview(value: object, limit: int, *, more: str = "") -> str:
    """``render(value)`` cut to ``limit`` chars, saying the true size and where the rest is."""
    text = render(value)
    if len(text) <= limit:
        return text
    where = f" — {more} for all" if more else ""
    return f"{text[:limit]}… ({len(text)} chars{where})"


def page(text: str, *, cap: int, offset: int, again: str) -> str:
    """At most ``cap`` chars of ``text`` from ``offset``, saying when and how it was cut.

    ``again`` is the call that fetches the next part (``offset=`` is appended by the footer).
    """
    total = len(text)
    offset = max(0, offset)
    if offset == 0 and total <= cap:
        return text
    if len(again) > 80:
        again = again[:79] + "…"
    if offset >= total:
        return (f"⚠ offset {offset} is past the end: this answer is {total} chars; "
                f"call {again} with an offset below {total}.")[:cap]
    widest = f"\n⚠ truncated: showed chars {total}–{total} of {total}; call {again} with " \
             f"offset={total} for the next part."
    room = max(cap - len(widest), 1)
    body = text[offset: offset + room]
    end = offset + len(body)
    if end >= total:
        tail = f"\n(end of answer: chars {offset}–{total} of {total})"
        body = text[offset: offset + max(cap - len(tail), 1)]
        end = offset + len(body)
        if end >= total:
            return (body + tail)[:cap]
    footer = f"\n⚠ truncated: showed chars {offset}–{end} of {total}; call {again} with " \
             f"offset={end} for the next part."
    return (body + footer)[:cap]


def _execution(rid: str) -> int:
    tail = rid.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _some(ids: list[str], n: int) -> str:
    shown = ", ".join(ids[:n])
    return shown + (f", … ({len(ids) - n} more)" if len(ids) > n else "")


def _chart_stages(spec: dict[str, Any]) -> dict[str, StageInfo]:
    """Every stage of the chart spec, by id (the spec nests ``next``, branches, subflows)."""
    out: dict[str, StageInfo] = {}
    stack: list[Any] = [spec]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or "id" not in node:
            continue
        out[str(node["id"])] = StageInfo(str(node["id"]), str(node.get("name", node["id"])),
                                         str(node.get("type", "stage")),
                                         str(node.get("description") or ""))
        stack.append(node.get("next"))
        stack.extend((node.get("branches") or {}).values())
        stack.extend(node.get("parallel") or ())
        stack.append(node.get("subflow"))
    return out
