"""The recording: a run as portable JSON — chart, delta commit log, events, ids, requests.

A ``Recording`` is what leaves the process: it is built from a finished run (agent or plain
flowchart), stored by a run store, and loaded anywhere else to be narrated, backtracked or
re-examined. Everything an explanation needs is rebuilt from it (the exact request each LLM
call sent included); values redacted at the source stay redacted.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from ..agent.window import windowed_messages
from ..flow.commitlog import CommitLog
from ..flow.redact import redacted_values, scrub
from ..flow.run import FlowRun
from ..flow.values import copy_value
from ..providers.base import wire_messages
from ..runs import trace

__all__ = ["RECORDING_FORMAT", "Recording"]

RECORDING_FORMAT: Final = "agentfootprint.recording.v1"


class Recording(BaseModel):
    """One run, complete and self-contained."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    format: Literal["agentfootprint.recording.v1"] = RECORDING_FORMAT
    run_id: str
    kind: Literal["agent", "flow"]
    name: str
    status: str
    created_at: float
    chart: dict[str, Any]
    log: dict[str, Any]
    output: Any = None
    meta: dict[str, Any] = {}
    _log: CommitLog | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, result: Any, *, meta: dict[str, Any] | None = None) -> Recording:
        """The recording of an agent ``RunResult`` or a flowchart ``FlowRun``."""
        run: FlowRun = result.recording if hasattr(result, "content") else result
        if not isinstance(run, FlowRun):
            raise TypeError(f"{result!r} is not a run; pass a RunResult or a FlowRun")
        is_agent = hasattr(result, "content")
        output = result.content if is_agent else _jsonable(run.output)
        if run.redaction is not None and run.redaction.has_key_rules:
            secrets = redacted_values(run.redaction, run.state)
            if secrets:  # the output repeats state (an answer); keep the record redacted
                output = scrub(output, secrets)
        return cls(run_id=run.run_id, kind="agent" if is_agent else "flow",
                   name=run.chart.description or run.chart.name, status=run.status,
                   created_at=time.time(), chart=run.chart.spec(),
                   log=json.loads(json.dumps(run.log.to_json())), output=output,
                   meta=dict(meta or {}))

    def commit_log(self) -> CommitLog:
        """The commit log, rebuilt once from the JSON."""
        if self._log is None:
            self._log = CommitLog.from_json(self.log)
        return self._log

    def requests(self) -> list[dict[str, Any]]:
        """What each LLM call sent: system prompt, wire messages and tools, rebuilt from the log."""
        log = self.commit_log()
        out = []
        for record in log.records:
            if record.stage_id != trace.CALL_LLM:
                continue
            before = record.idx - 1
            wrapped = bool(log.value_at(trace.WRAP_UP_ASKED, before, default=False))
            out.append({
                "runtime_stage_id": record.runtime_stage_id,
                "iteration": log.value_at(trace.ITERATION, before),
                "system": log.value_at(trace.SYSTEM_PROMPT, before, default="") or None,
                "messages": wire_messages(windowed_messages(
                    log.value_at(trace.HISTORY, before, default=[]),
                    log.value_at(trace.WINDOW, before, default=None))),
                "tools": [] if wrapped else log.value_at(trace.TOOL_SCHEMAS, before, default=[]),
            })
        return out

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Recording:
        return cls.model_validate_json(text)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return copy_value(value)
