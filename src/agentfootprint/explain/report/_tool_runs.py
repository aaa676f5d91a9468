"""The tool calls an LLM call asked for, paired with the results the run fed back.

Read from the commit log only: the call's ``llm_tool_calls`` (name, id, arguments) and the
conversation right after the agent's next tool step (the ``tool`` messages, matched by call
id). A value redacted at the source is shown as recorded, masked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...flow._commitlog import CommitLog, CommitRecord
from ...runs import trace
from .._suspects import is_stage
from ._text import as_text, dicts

__all__ = ["ToolRun", "tool_runs_of"]


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool call a model asked for, with the arguments it gave and the result it got back
    (as recorded: a value redacted at the source stays masked)."""

    call_id: str
    name: str
    arguments: str
    """The arguments as JSON text (or the recorded value as text)."""
    result: str | None
    """The tool result the run fed back; ``None`` when no result was recorded (the run stopped,
    paused or failed before the tool ran)."""
    status: str | None = None
    """``success`` / ``error`` / ... as the tool step recorded it."""


def tool_runs_of(log: CommitLog, call: CommitRecord, asked: Any) -> tuple[ToolRun, ...]:
    """The tool calls ``call`` asked for, each paired with the result the next tool step of
    the same agent added to the conversation (matched by call id, else by name)."""
    wanted = dicts(asked)
    if not wanted:
        return ()
    step: CommitRecord | None = None
    for record in log.records[call.idx + 1:]:
        if record.ns != call.ns:
            continue
        if is_stage(record, trace.CALL_LLM):
            break
        if is_stage(record, trace.TOOL_CALLS):
            step = record
            break
    results: list[dict[str, Any]] = []
    statuses: dict[str, str] = {}
    if step is not None:
        before = log.value_at(trace.HISTORY, step.idx - 1, ns=step.ns, default=[])
        after = log.value_at(trace.HISTORY, step.idx, ns=step.ns, default=[])
        added = after[len(before):] if isinstance(after, list) and isinstance(before, list) \
            and after[:len(before)] == before else after
        results = [m for m in dicts(added) if m.get("role") == "tool"]
        for change in step.changes:
            if change.key == trace.TOOL_RESULTS:
                for row in dicts(change.value):
                    statuses[str(row.get("tool_call_id"))] = str(row.get("status") or "")
    out = []
    used: set[int] = set()
    for want in wanted:
        call_id = str(want.get("id") or "")
        name = str(want.get("name"))
        found = next((i for i, m in enumerate(results) if call_id
                      and m.get("tool_call_id") == call_id and i not in used), None)
        if found is None:
            same = [i for i, m in enumerate(results) if m.get("tool_name") == name
                    and i not in used and not m.get("tool_call_id")]
            found = same[0] if same else None
        result = None
        if found is not None:
            used.add(found)
            result = as_text(results[found].get("content", ""))
        args = want.get("args", want.get("arguments"))
        shown = json.dumps(args, ensure_ascii=False, indent=2, default=repr) \
            if isinstance(args, dict) and args else as_text(args)
        out.append(ToolRun(call_id, name, shown,
                           result, statuses.get(call_id) or None))
    return tuple(out)

