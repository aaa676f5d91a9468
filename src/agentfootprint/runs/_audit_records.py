"""A run as the typed records of its audit chain, read once from the recording.

An auditor asks what a run decided and did, not how it was assembled: which branch each decider
took and on what rule, which model each call went to and what it used and cost, which tools ran
and how they ended, what a validator or a permission rule refused, which budgets were crossed,
what the run answered, and which proofs were kept with it. ``audit_records`` reads exactly that
from a recording — through the run view, the usage reader and the trace declaration — into plain
JSON records, in the order the run made them:

``run`` (ids, status, the SHA-256 of the recording's JSON, so the chain binds every byte of it),
then per step ``decision``, ``llm_call``, ``tool_call``, ``validation_rejection``, ``permission``,
``permission_halt``, ``act_decision``, ``budget``, ``error``; then ``answer``; then ``proof``
(one per proof the store kept, when given).

**Bounded by default.** A record names things and counts them but holds no one's words: a tool's
argument *names* (not values), a result's type and ``[N chars]``, an answer's ``[N chars]``,
a rule's keys and outcomes (not the values it compared). ``full_content=True`` keeps the values.
Either way a value the recording's redaction policy masked stays the marker: records are built
from the recording as it was kept, never from the live run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..flow._commitlog import CommitLog, CommitRecord
from ..flow._redact import REDACTED
from . import trace
from ._recording import Recording
from ._usage import CallUsage, usage_of
from ._view import RunView, StepIndex, is_stage, llm_started

__all__ = ["audit_records", "bounded_text"]

_PERMISSION_EVENT = "permission.check"
"""The permission checker's verdict event (``agentfootprint.permission.check``)."""
_PROOF_WORDS = frozenset({"kind", "version", "verdict", "model", "id", "label", "labels",
                          "members", "removed", "removed_with", "uncovered"})
"""Fields of a kept proof that name things (ids, verdicts) rather than quote anyone."""


def bounded_text(value: Any) -> Any:
    """What a bounded record shows of ``value``: ``[N chars]`` for text, its shape otherwise,
    and the redaction marker as it is."""
    if value is None or value == REDACTED:
        return value
    if isinstance(value, str):
        return f"[{len(value)} chars]"
    return _type_of(value)


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return "null" if value is None else type(value).__name__


class _Reader:
    """One pass over the log, each step turned into its records."""

    def __init__(self, recording: Recording, *, full: bool) -> None:
        self.recording = recording
        self.view = RunView.of(recording)
        self.log: CommitLog = self.view.log
        self.full = full
        self.asked: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.seen_tools: set[tuple[str, str]] = set()
        self.counts: dict[tuple[str, str], int] = {}
        self.usage: Iterator[CallUsage] = iter(usage_of(self.log).calls)  # one per call
        self.calls = 0

    def text(self, value: Any) -> Any:
        return value if self.full else bounded_text(value)

    # -- records ------------------------------------------------------------------------

    def run(self, body: str | None) -> dict[str, Any]:
        rec = self.recording
        data = (body if body is not None else rec.to_json()).encode("utf-8", "surrogatepass")
        return {
            "type": "run", "run_id": rec.run_id, "kind": rec.kind, "name": rec.name,
            "status": rec.status, "recording_format": rec.format, "created_at": rec.created_at,
            "steps": len(self.log.records), "content": "full" if self.full else "bounded",
            "recording_sha256": hashlib.sha256(data).hexdigest(),
            "redacted_keys": sorted(StepIndex.of(self.log).redacted)}

    def steps(self) -> Iterator[dict[str, Any]]:
        for record in self.log.records:
            where = {"step": record.runtime_stage_id}
            if record.ns:
                where["scope"] = record.ns
            if record.decision is not None:
                yield {"type": "decision", **where, **self.decision(record.decision)}
            if is_stage(record, trace.CALL_LLM):
                yield self.llm_call(record, where)
            if is_stage(record, trace.TOOL_CALLS):
                yield from self.tool_calls(record, where)
            for name, payload in record.emits:
                if name.endswith(_PERMISSION_EVENT) and isinstance(payload, Mapping):
                    yield {"type": "permission", **where, **self.permission(payload)}
            for change in record.changes:
                yield from self.change(record, change.key, where)
            if record.error is not None:
                kind = record.error.split(":", 1)[0]
                yield {"type": "error", **where, "error": kind,
                       "message": self.text(record.error)}

    def decision(self, decision: Mapping[str, Any]) -> dict[str, Any]:
        if self.full:
            return {"decision": dict(decision)}
        evidence = decision.get("evidence")
        rules = evidence.get("rules") if isinstance(evidence, Mapping) else None
        out: dict[str, Any] = {"chosen": decision.get("chosen", decision.get("selected"))}
        shown = []
        for rule in rules if isinstance(rules, list) else ():
            if not isinstance(rule, Mapping):
                continue
            row = {k: rule[k] for k in ("rule", "branch", "matched", "label", "type")
                   if k in rule}
            conditions = rule.get("conditions")
            if isinstance(conditions, list):
                row["conditions"] = [{k: c.get(k) for k in ("key", "op", "result")}
                                     for c in conditions if isinstance(c, Mapping)]
            inputs = rule.get("inputs")
            if isinstance(inputs, list):
                row["inputs"] = [i.get("key") for i in inputs if isinstance(i, Mapping)]
            shown.append(row)
        out["rules"] = shown
        return out

    def llm_call(self, record: CommitRecord, where: dict[str, Any]) -> dict[str, Any]:
        idx, ns = record.idx, record.ns
        self.calls += 1
        used = next(self.usage, None)  # what RunResult.usage and the store's tables read
        started = llm_started(record)
        asked = self.log.value_at(trace.LLM_TOOL_CALLS, idx, ns=ns, default=[])
        calls = []
        for call in asked if isinstance(asked, list) else ():
            if isinstance(call, Mapping):
                self.asked[(ns, str(call.get("id")))] = call
                calls.append({"id": call.get("id"), "name": call.get("name")})
        out: dict[str, Any] = {
            "type": "llm_call", "call": self.calls, **where,
            "iteration": self.log.value_at(trace.ITERATION, idx - 1, ns=ns, default=None),
            "model": used.model if used else started.get("model"),
            "provider": used.provider if used else started.get("provider"),
            "stop_reason": self.log.value_at(trace.STOP_REASON, idx, ns=ns, default=None),
            "answer": self.text(self.log.value_at(trace.LLM_CONTENT, idx, ns=ns, default=None)),
            "tool_calls": calls}
        if used is not None:
            out.update(input_tokens=used.input_tokens, output_tokens=used.output_tokens,
                       cache_read_tokens=used.cache_read_tokens,
                       cache_write_tokens=used.cache_write_tokens, cost_usd=used.cost_usd,
                       latency_ms=used.latency_ms)
        return out

    def tool_calls(self, record: CommitRecord, where: dict[str, Any]
                   ) -> Iterator[dict[str, Any]]:
        ns = record.ns
        statuses: dict[str, Any] = {}
        for change in record.changes:
            if change.key == trace.TOOL_RESULTS and isinstance(change.value, list):
                statuses.update((str(r.get("tool_call_id")), r.get("status"))
                                for r in change.value if isinstance(r, Mapping))
        for change in record.changes:
            if change.key != trace.HISTORY or not isinstance(change.value, list):
                continue
            for message in change.value:
                if not isinstance(message, Mapping) or message.get("role") != "tool":
                    continue
                call_id = str(message.get("tool_call_id"))
                if (ns, call_id) in self.seen_tools:
                    continue
                self.seen_tools.add((ns, call_id))
                yield from self.tool_call(message, call_id, statuses.get(call_id), where)

    def tool_call(self, message: Mapping[str, Any], call_id: str, status: Any,
                  where: dict[str, Any]) -> Iterator[dict[str, Any]]:
        asked = self.asked.get((where.get("scope", ""), call_id), {})
        given = asked.get("args")
        if self.full:
            shown: Any = given
        elif isinstance(given, Mapping):
            shown = sorted(str(name) for name in given)
        else:
            shown = bounded_text(given)
        content = message.get("content")
        name = message.get("tool_name") or asked.get("name")
        yield {"type": "tool_call", **where, "tool_call_id": call_id, "name": name,
               "arguments": shown, "status": status, "result_type": _type_of(content),
               "result": self.text(content)}
        if status == "invalid":
            yield {"type": "validation_rejection", **where, "what": "tool_arguments",
                   "tool_call_id": call_id, "name": name, "message": self.text(content)}

    def permission(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(payload)
        if not self.full and "rationale" in out:
            out["rationale"] = bounded_text(out["rationale"])
        return out

    def change(self, record: CommitRecord, key: str, where: dict[str, Any]
               ) -> Iterator[dict[str, Any]]:
        if key == trace.PERMISSION_HALT:
            halt = self.log.value_at(key, record.idx, ns=record.ns, default=None)
            if isinstance(halt, Mapping):
                shown = dict(halt)
                if not self.full:
                    shown["tell_model"] = bounded_text(shown.get("tell_model"))
                yield {"type": "permission_halt", **where, **shown}
        elif key == trace.ACT_LEDGER:
            for row in self.new_rows(record, key):
                yield {"type": "act_decision", **where, **self.act(row)}
        elif key == trace.BUDGET_CROSSED:
            for row in self.new_rows(record, key):
                yield {"type": "budget", **where, **row}
        elif key == trace.OUTPUT_ATTEMPTS:
            for row in self.new_rows(record, key):
                if row.get("valid") is False:
                    yield {"type": "validation_rejection", **where, **self.attempt(row)}

    def new_rows(self, record: CommitRecord, key: str) -> list[Mapping[str, Any]]:
        """The rows ``record`` added to the list under ``key`` (its namespace's)."""
        value = self.log.value_at(key, record.idx, ns=record.ns, default=None)
        rows = [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []
        seen = self.counts.get((record.ns, key), 0)
        self.counts[(record.ns, key)] = max(seen, len(rows))
        return rows[seen:]

    def act(self, row: Mapping[str, Any]) -> dict[str, Any]:
        if self.full:
            return dict(row)
        out = {k: row.get(k) for k in ("moment", "rule", "iteration", "tool_call_id",
                                       "tool_name", "decision") if k in row}
        for name in ("reason", "question", "error"):
            if name in row:
                out[name] = bounded_text(row[name])
        for name in ("before", "after", "kept_result"):
            if name in row:
                out[name] = _type_of(row[name])
        return out

    def attempt(self, row: Mapping[str, Any]) -> dict[str, Any]:
        errors = row.get("errors")
        errors = [e for e in errors if isinstance(e, Mapping)] if isinstance(errors, list) else []
        out: dict[str, Any] = {"what": "output", "attempt": row.get("attempt"),
                               "iteration": row.get("iteration"), "call": row.get("call"),
                               "fields": sorted({str(e.get("field")) for e in errors}),
                               "errors": len(errors), "text": self.text(row.get("text"))}
        if self.full:
            out["messages"] = [e.get("message") for e in errors]
        return out

    def answer(self) -> dict[str, Any]:
        log, view, rec = self.log, self.view, self.recording
        last = len(log.records) - 1
        out: dict[str, Any] = {
            "type": "answer", "status": rec.status, "step": self.answered_by(),
            "answer": self.text(view.answer),
            "stopped_early": log.value_at(trace.STOPPED_EARLY, last, default=None)
            if last >= 0 else None}
        if rec.output != view.answer:
            out["output"] = rec.output if self.full else bounded_text(rec.output)
        return out

    def answered_by(self) -> str | None:
        """The step that handed the run's answer back (Finalize after the answering call)."""
        final = self.view.final_record
        if final is None:
            return None
        for record in self.log.records[final.idx:]:
            if is_stage(record, trace.FINALIZE) and record.ns == final.ns:
                return record.runtime_stage_id
        return None

    def proof(self, index: int, proof: Mapping[str, Any]) -> dict[str, Any]:
        return {"type": "proof", "index": index,
                "proof": dict(proof) if self.full else _bounded_proof(proof)}


def _bounded_proof(value: Any, name: str = "") -> Any:
    """A kept proof with its verdicts, counts and ids, and every quoted text bounded."""
    if isinstance(value, Mapping):
        return {str(k): _bounded_proof(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded_proof(v, name) for v in value]
    if isinstance(value, str) and name not in _PROOF_WORDS:
        return bounded_text(value)
    return value


def audit_records(recording: Recording, *, full_content: bool = False,
                  proofs: Sequence[Mapping[str, Any]] = (),
                  body: str | None = None) -> list[dict[str, Any]]:
    """The typed records of ``recording``'s audit chain, in run order (see the module doc).

    ``body`` is the recording's JSON when the caller already has it (a store saving it), so it
    is not serialized twice; ``proofs`` are the ones a run store kept with the run.
    """
    reader = _Reader(recording, full=full_content)
    records = [reader.run(body), *reader.steps(), reader.answer()]
    records.extend(reader.proof(index, proof) for index, proof in enumerate(proofs, start=1))
    return records
