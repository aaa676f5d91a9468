"""The checkpoint of a paused run: plain, versioned JSON that another process can resume.

It carries the run's state, the commit log so far (redacted, as recorded), the id counter and
visit counts (so runtime ids keep climbing after resume), and the stack of unfinished
nesting levels between the top of the chart and the paused stage (a decider's branch, a
parallel child, a subflow with its own state), outermost first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import CheckpointError

__all__ = ["CHECKPOINT_VERSION", "Checkpoint", "ResumeFrame", "load_checkpoint"]

CHECKPOINT_VERSION = 1


class ResumeFrame(BaseModel):
    """One unfinished nesting level around the paused stage."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    kind: Literal["after", "after_fork", "subflow"]
    """``after``: a decider whose ``next`` still runs; ``after_fork``: a parallel stage whose
    ``next`` still runs; ``subflow``: a mounted chart whose output mapping still runs."""
    node: str
    """The chart node id of that level (decider, fork stage or mount)."""
    rid: str
    """Its runtime stage id."""
    ns: str | None = None
    """Subflow only: the subflow's namespace."""
    state: dict[str, Any] | None = None
    """Subflow only: the subflow's state when the run paused."""
    args: dict[str, Any] | None = None
    """Subflow only: the subflow's mapped input."""


class Checkpoint(BaseModel):
    """Everything needed to continue a paused run; ``model_dump_json()`` is the wire form."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    version: int = CHECKPOINT_VERSION
    chart: str
    fingerprint: str
    run_id: str
    paused_stage: str
    paused_runtime_stage_id: str
    pause_data: Any = None
    state: dict[str, Any]
    args: dict[str, Any] = Field(default_factory=dict)
    frames: list[ResumeFrame] = Field(default_factory=list)
    counter: int
    visits: dict[str, int] = Field(default_factory=dict)
    log: dict[str, Any] = Field(default_factory=dict)
    created_at: float

    def to_json(self) -> str:
        return self.model_dump_json()


def load_checkpoint(data: Checkpoint | Mapping[str, Any] | str | bytes) -> Checkpoint:
    """Validate a checkpoint from its object, dict or JSON text, with an error that says why."""
    if isinstance(data, Checkpoint):
        return data
    try:
        raw = json.loads(data) if isinstance(data, (str, bytes)) else dict(data)
    except (ValueError, TypeError) as exc:
        raise CheckpointError(
            f"checkpoint is not valid JSON ({exc}); pass the text from checkpoint.to_json()"
        ) from exc
    version = raw.get("version") if isinstance(raw, dict) else None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"checkpoint version {version!r} is not supported (expected {CHECKPOINT_VERSION}); "
            "resume it with the agentfootprint version that wrote it"
        )
    try:
        checkpoint = Checkpoint.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "checkpoint"
        raise CheckpointError(
            f"checkpoint field {where!r} is invalid: {first['msg']}; "
            "it was changed or truncated after it was written"
        ) from exc
    _check_log(checkpoint)
    return checkpoint


def _check_log(cp: Checkpoint) -> None:
    """The log must be whole: every record at its own position, ending with the paused step.

    A log cut short (or with records dropped) would resume a run whose record no longer shows
    how it got there; it is refused rather than resumed.
    """
    records = cp.log.get("records", [])
    problem = None
    if isinstance(records, list) and any(not isinstance(r, dict) or "idx" not in r
                                         for r in records):
        return  # not records at all: the log reader refuses it as unreadable
    if not isinstance(records, list) or not records:
        problem = "it has no records"
    elif any(r.get("idx") != i for i, r in enumerate(records)):
        problem = "a record is missing or out of place"
    else:
        last = records[-1]
        if last.get("runtime_stage_id") != cp.paused_runtime_stage_id or not last.get("paused"):
            problem = (f"it does not end with the paused step {cp.paused_runtime_stage_id!r} "
                       "(records were cut from its end)")
        elif cp.counter <= max(_number(str(r.get("runtime_stage_id", ""))) for r in records):
            problem = f"its step counter ({cp.counter}) is behind its records"
    if problem is not None:
        raise CheckpointError(
            f"checkpoint of run {cp.run_id!r} has an incomplete log: {problem}; it was changed "
            "or truncated after it was written — resume the checkpoint the run returned")


def _number(rid: str) -> int:
    head, _, tail = rid.rpartition("#")
    return int(tail) if head and tail.isdigit() else -1
