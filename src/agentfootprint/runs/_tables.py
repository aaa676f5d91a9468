"""The rows of a run store's query tables, derived from a recording (one pure function).

Beside each run's JSON body a store keeps a few plain tables a person can query with SQL:
``runs`` (one row a run, with its totals), ``llm_calls`` (one row a model call: model, tokens,
stop reason), ``injections`` (which injection reached which call, in which slot, by which
trigger) and ``tool_calls`` (which tools each call asked for). They are derived from the
recording at save, so they can always be rebuilt from the bodies (a migration does exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..flow._commitlog import CommitLog
from . import trace
from ._recording import Recording
from ._view import is_stage, llm_started

__all__ = ["QueryRows", "query_rows"]

@dataclass(slots=True)
class QueryRows:
    """Everything one run adds to the query tables."""

    run: dict[str, Any]
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    injections: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _sources(rows: Any) -> set[str]:
    return {row["source"] for row in rows if isinstance(row, dict) and "source" in row} \
        if isinstance(rows, list) else set()


def _injected(history: Any) -> set[str]:
    if not isinstance(history, list):
        return set()
    return {m["injected_by"] for m in history
            if isinstance(m, dict) and isinstance(m.get("injected_by"), str)}


def query_rows(recording: Recording) -> QueryRows:
    """The query-table rows of ``recording`` (values redacted at the source stay redacted)."""
    log: CommitLog = recording.commit_log()
    run_id = recording.run_id
    calls: list[dict[str, Any]] = []
    injections: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    spent: dict[str, tuple[int, int]] = {}
    for record in log.records:
        if not is_stage(record, trace.CALL_LLM):
            continue
        ns, idx, before = record.ns, record.idx, record.idx - 1
        started = llm_started(record)
        totals = (int(log.value_at(trace.INPUT_TOKENS, idx, ns=ns, default=0) or 0),
                  int(log.value_at(trace.OUTPUT_TOKENS, idx, ns=ns, default=0) or 0))
        previous = spent.get(ns, (0, 0))
        spent[ns] = totals
        asked = log.value_at(trace.LLM_TOOL_CALLS, idx, ns=ns, default=[])
        asked = asked if isinstance(asked, list) else []
        calls.append({
            "run_id": run_id, "call_idx": idx, "runtime_stage_id": record.runtime_stage_id,
            "iteration": log.value_at(trace.ITERATION, before, ns=ns, default=None),
            "model": started.get("model"), "provider": started.get("provider"),
            "input_tokens": totals[0] - previous[0], "output_tokens": totals[1] - previous[1],
            "stop_reason": log.value_at(trace.STOP_REASON, idx, ns=ns, default=None),
            "tool_calls": len(asked)})
        for call in asked:
            if isinstance(call, dict):
                tools.append({"run_id": run_id, "call_idx": idx,
                              "tool_call_id": str(call.get("id", "")),
                              "name": str(call.get("name", ""))})
        evaluation = log.value_at(trace.CONTEXT_EVALUATION, before, ns=ns, default=[])
        system = _sources(log.value_at(trace.SYSTEM_SLOT, before, ns=ns, default=[]))
        listed = _sources(log.value_at(trace.TOOLS_SLOT, before, ns=ns, default=[]))
        messages = _injected(log.value_at(trace.HISTORY, before, ns=ns, default=[]))
        for row in evaluation if isinstance(evaluation, list) else ():
            if not isinstance(row, dict) or not row.get("fired"):
                continue
            injection_id = str(row.get("id"))
            slots = [slot for slot, found in (("system", system), ("messages", messages),
                                              ("tools", listed)) if injection_id in found]
            for slot in slots or ["none"]:
                injections.append({"run_id": run_id, "call_idx": idx,
                                   "injection_id": injection_id, "slot": slot,
                                   "trigger": str(row.get("trigger", ""))})
    run = {"run_id": run_id, "name": recording.name, "kind": recording.kind,
           "status": recording.status, "created_at": recording.created_at,
           "format": recording.format, "llm_calls": len(calls),
           "input_tokens": sum(c["input_tokens"] for c in calls),
           "output_tokens": sum(c["output_tokens"] for c in calls),
           "tool_calls": len(tools)}
    return QueryRows(run=run, llm_calls=calls, injections=injections, tool_calls=tools)
