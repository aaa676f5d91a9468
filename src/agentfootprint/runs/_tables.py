"""The rows of a run store's query tables, derived from a recording (one pure function).

Beside each run's JSON body a store keeps a few plain tables a person can query with SQL:
``runs`` (one row a run, with its totals and cost), ``llm_calls`` (one row a model call: model,
provider, latency, input/output/cached tokens, cost, stop reason; read through ``usage_of``, as
``RunResult.usage`` and the report read it), ``injections`` (which injection reached which call,
in which slot, by which trigger) and ``tool_calls`` (which tools each call asked for). They are
derived from the recording at save, so they can always be rebuilt from the bodies (a migration
does exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..flow._commitlog import CommitLog
from . import trace
from ._recording import Recording
from ._usage import usage_of
from ._view import is_stage

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
    usage = usage_of(log)
    used = iter(usage.calls)  # one per CallLLM record, in log order
    for record in log.records:
        if not is_stage(record, trace.CALL_LLM):
            continue
        ns, idx, before = record.ns, record.idx, record.idx - 1
        call = next(used)
        asked = log.value_at(trace.LLM_TOOL_CALLS, idx, ns=ns, default=[])
        asked = asked if isinstance(asked, list) else []
        calls.append({
            "run_id": run_id, "call_idx": idx, "runtime_stage_id": record.runtime_stage_id,
            "iteration": call.iteration, "model": call.model, "provider": call.provider,
            "input_tokens": call.input_tokens, "output_tokens": call.output_tokens,
            "stop_reason": log.value_at(trace.STOP_REASON, idx, ns=ns, default=None),
            "tool_calls": len(asked), "cache_read_tokens": call.cache_read_tokens,
            "cache_write_tokens": call.cache_write_tokens, "cost_usd": call.cost_usd,
            "latency_ms": call.latency_ms})
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
           "tool_calls": len(tools), "cache_read_tokens": usage.cache_read_tokens,
           "cache_write_tokens": usage.cache_write_tokens, "cost_usd": usage.cost_usd}
    return QueryRows(run=run, llm_calls=calls, injections=injections, tool_calls=tools)
