"""Continuing a killed run: read it back from its run store and plan how to go on.

Only ``agent.resume(run_id)`` needs this (``agent/_journal.py`` imports it there), so a plain
run never loads it. See ``agent/_journal.py`` for the journal it reads and the rules it applies:
no tool call started — the turn runs again from its start; otherwise the run continues inside
its last tool batch, from the state its entries hold.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import CheckpointError, ConfigurationError
from ..flow._commitlog import CommitLog
from ..runs import trace
from ..tools._replay import ToolReplay
from ._journal import check_agent_state

if TYPE_CHECKING:
    from ..flow import Chart
    from ..flow._checkpoint import Checkpoint
    from ..flow._redact import RedactionPolicy
    from ..runs._store import RunStorePort

__all__ = ["RecoveryPlan", "plan_recovery"]


@dataclass(slots=True, eq=False)
class RecoveryPlan:
    """How to continue a killed run: from its start (``start``) or inside a tool batch."""

    start: dict[str, Any] | None = None
    checkpoint: Checkpoint | None = None
    answer: ToolReplay | None = None
    """What the journal knows of the interrupted batch's calls (``tools/_replay.py``: the
    replay an explanation's re-run uses too)."""


_RESUME_KEYS: Final = (trace.USER_MESSAGE, trace.HISTORY, trace.LLM_TOOL_CALLS,
                       trace.PAUSED_TOOL_BATCH, trace.TOOL_RESULTS)


def plan_recovery(store: RunStorePort, chart: Chart, run_id: str, *,
                  policy: RedactionPolicy | None, args: Mapping[str, Any]) -> RecoveryPlan:
    """Read ``run_id`` back from ``store`` and say how to continue it (errors name the fix)."""
    from ..flow._checkpoint import Checkpoint
    from ..runs._lifecycle import with_progress

    recording = store.load(run_id)
    if recording.status == "paused":
        raise ConfigurationError(
            f"run {run_id!r} is paused, waiting for a person: resume it with its checkpoint "
            "and the answer, agent.resume(result.checkpoint, answer)")
    if recording.status != "running":
        raise ConfigurationError(
            f"run {run_id!r} already ended (status {recording.status!r}); there is nothing to "
            "resume — start a new run")
    masked = [key for key in _RESUME_KEYS if policy is not None and policy.is_redacted(key)]
    if masked:
        raise ConfigurationError(
            f"run {run_id!r} cannot be resumed from the store: this agent's redaction policy "
            f"masks {', '.join(masked)}, which the store then holds only masked; run the turn "
            "again instead")
    entries = store.progress(run_id)
    fingerprints = [e["fingerprint"] for e in entries if "fingerprint" in e]
    known = fingerprints[-1] if fingerprints else recording.meta.get("fingerprint")
    if known is not None and known != chart.fingerprint():
        raise ConfigurationError(
            f"run {run_id!r} was started by a differently built agent (chart fingerprint "
            f"{known}, this one {chart.fingerprint()}); resume it with an agent built like "
            "the one that started it")
    calls = [e for e in entries if e.get("phase") in ("started", "done")]
    if not calls:
        start = recording.meta.get("start")
        if not isinstance(start, dict) or not isinstance(start.get(trace.MESSAGE), str):
            raise CheckpointError(
                f"run {run_id!r} in the store holds no start and no progress to resume from; "
                "it was written by another version or altered — run the turn again")
        return RecoveryPlan(start=start)
    grown = with_progress(recording, entries)
    log = _log_of(run_id, grown.log)
    iteration = calls[-1].get("iteration")
    answer = ToolReplay.from_journal(calls, iteration if isinstance(iteration, int) else -1)
    state = log.state_at(len(log) - 1)
    check_agent_state(state, run_id)
    if state.get(trace.ITERATION) != answer.iteration:
        raise CheckpointError(
            f"run {run_id!r}: its progress entries do not match its log (tool batch of "
            f"iteration {answer.iteration!r}, log at iteration {state.get(trace.ITERATION)!r}); "
            "it was altered — the row is left as it is")
    stages = [str(e.get("stage", "")) for e in calls] + [r.runtime_stage_id for r in log.records]
    visits: dict[str, int] = {}
    for rid in {r.runtime_stage_id: r.stage_id for r in log.records}.items():
        visits[rid[1]] = visits.get(rid[1], 0) + 1
    checkpoint = Checkpoint(
        chart=chart.name, fingerprint=chart.fingerprint(), run_id=run_id,
        paused_stage=trace.TOOL_CALLS, paused_runtime_stage_id=log.records[-1].runtime_stage_id,
        state=state, args=dict(args), frames=[], counter=max(map(_number, stages)) + 1,
        visits=visits, log=log.to_json(), created_at=time.time())
    return RecoveryPlan(checkpoint=checkpoint, answer=answer)


def _log_of(run_id: str, data: Mapping[str, Any]) -> CommitLog:
    try:
        log = CommitLog.from_json(dict(data))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"run {run_id!r}: its stored log is unreadable ({exc!r}); it was "
                              "altered — the row is left as it is") from exc
    if not log.records or any(r.idx != i for i, r in enumerate(log.records)):
        raise CheckpointError(f"run {run_id!r}: its stored log has gaps; it was altered — the "
                              "row is left as it is")
    return log


def _number(rid: str) -> int:
    head, _, tail = rid.rpartition("#")
    return int(tail) if head and tail.isdigit() else -1
