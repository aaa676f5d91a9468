"""Reading the context record back: what / who / when / how, for every injection of every call.

Everything here is rebuilt from the commit log alone (a recording reloaded from JSON works the
same), so an explanation never depends on live state. For each LLM call the report gives, per
declared injection: *what* it contributed (the exact text span of the system prompt, the
messages delivered, the tools offered), *who* let it in (its trigger and the evaluator's
reason, also when it did not fire), *when* (the iteration, the tool batch it was judged
against, and the first iteration it fired), and *how* it landed (slot, position, cache).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..flow._commitlog import CommitLog
from ..runs import trace

if TYPE_CHECKING:
    from ..flow._run import FlowRun

__all__ = ["context_report"]


def context_report(source: FlowRun | CommitLog) -> list[dict[str, Any]]:
    """One entry per LLM call: its iteration, system prompt and a row per injection."""
    log = source if isinstance(source, CommitLog) else source.log
    calls: list[dict[str, Any]] = []
    first_fired: dict[str, int] = {}
    for record in log.records:
        if record.stage_id != trace.CALL_LLM:
            continue
        before = record.idx - 1
        iteration = log.value_at(trace.ITERATION, before)
        system = log.value_at(trace.SYSTEM_PROMPT, before, default="")
        evaluation = log.value_at(trace.CONTEXT_EVALUATION, before, default=[])
        system_rows = log.value_at(trace.SYSTEM_SLOT, before, default=[])
        tool_rows = log.value_at(trace.TOOLS_SLOT, before, default=[])
        batch = log.value_at(trace.TOOL_RESULTS, before, default=[])
        history = log.value_at(trace.HISTORY, before, default=[])
        rows = []
        for row in evaluation:
            injection_id = row["id"]
            if row["fired"]:
                first_fired.setdefault(injection_id, iteration)
            landed = []
            for piece in system_rows:
                if piece["source"] == injection_id:
                    landed.append({"slot": "system", "position": piece["position"],
                                   "span": [piece["start"], piece["end"]],
                                   "cache": piece["cache"],
                                   "text": system[piece["start"]:piece["end"]]})
            tools = [t["name"] for t in tool_rows if t["source"] == injection_id]
            if tools:
                landed.append({"slot": "tools", "tools": tools,
                               "positions": [t["position"] for t in tool_rows
                                             if t["source"] == injection_id]})
            messages = [{"index": i, "role": m["role"], "content": m["content"]}
                        for i, m in enumerate(history) if m.get("injected_by") == injection_id]
            if messages:
                landed.append({"slot": "messages", "messages": messages})
            rows.append({
                "id": injection_id, "flavor": row["flavor"],
                "who": {"trigger": row["trigger"], "fired": row["fired"],
                        "reason": row["reason"]},
                "when": {"iteration": iteration,
                         "tool_batch": [b["tool_name"] for b in batch],
                         "first_fired_iteration": first_fired.get(injection_id)},
                "how": landed,
                "what": [piece.get("text") or piece.get("tools") or piece.get("messages")
                         for piece in landed],
            })
        calls.append({"runtime_stage_id": record.runtime_stage_id, "iteration": iteration,
                      "system_prompt": system, "injections": rows})
    return calls
