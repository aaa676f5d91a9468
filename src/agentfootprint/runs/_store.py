"""What every run store offers, and the shape of a line of ``agentfootprint runs list``.

A run store keeps recordings so that another process — the CLI, an analyst, a re-run — can list
and load them. Two ship: :class:`~agentfootprint.runs.RunStore` (a SQLite file, the default)
and :class:`~agentfootprint.runs.PostgresRunStore` (shared by a fleet). Both keep each run's
JSON body and the query tables of ``_tables.py``, and both carry a schema version they upgrade
from older files and refuse when newer. How a run's row lives from its start to its end is
``_lifecycle.py``.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from ..errors import RunError
from ..flow._run import FlowRun
from ._recording import AgentRun, Recording

__all__ = ["RUN_STORE_SCHEMA", "RunField", "RunSource", "RunStorePort", "RunSummary",
           "parse_proof", "parse_stored", "preview_of", "proof_json", "recording_of"]

RUN_STORE_SCHEMA: Final = 6
"""The run-store schema this release writes: 1 held bodies only; 2 adds the query tables;
3 adds the append-only proofs and progress of each run; 4 adds cached tokens, cost and latency
to the query tables; 5 keeps each run's audit chain head (``runs.chain_head``); 6 keeps each
large string of a run once (``contents``, see ``_content.py``), bodies referencing it."""

RunSource = AgentRun | FlowRun | Recording
"""What a store saves: an agent's result, a flowchart run, or a recording."""

RunField = Literal["status", "agent"]
"""What ``run_values`` lists the distinct values of (``agent``: the run's name)."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A line of ``agentfootprint runs list`` (and of ``list_runs``, which fills in the cost
    and the proofs)."""

    run_id: str
    name: str
    kind: str
    status: str
    created_at: float
    preview: str
    cost_usd: float | None = None
    """US dollars; ``None``: a model without a price, or not read (``list()`` leaves it)."""
    proofs: int = 0
    """How many proofs are kept with the run (``list_runs`` counts them; ``list()`` does not)."""


@runtime_checkable
class RunStorePort(Protocol):
    """Save, load and list recordings; keep a run from its start (``begin``, then progress
    entries as it goes); add proofs (verdicts) to a saved run and read them. A run id names one
    run: its row only grows, and another run under the same id is refused."""

    def save(self, result: RunSource, *, meta: dict[str, Any] | None = None) -> Recording: ...

    def load(self, run_id: str) -> Recording: ...

    def begin(self, recording: Recording, *, reopen: str | None = None) -> None: ...

    def append_progress(self, run_id: str, entry: Mapping[str, Any]) -> None: ...

    def progress(self, run_id: str) -> list[dict[str, Any]]: ...

    def add_proof(self, run_id: str, proof: Mapping[str, Any]) -> None: ...

    def proofs(self, run_id: str) -> list[dict[str, Any]]: ...

    def list(self, *, limit: int = 20) -> list[RunSummary]: ...

    def list_runs(self, *, status: str | None = None, agent: str | None = None,
                  since: float | None = None, until: float | None = None,
                  min_cost: float | None = None, max_cost: float | None = None,
                  limit: int = 20, offset: int = 0) -> builtins.list[RunSummary]:
        """The runs matching every filter given, newest first (see ``_listing.py``)."""
        ...

    def count_runs(self, *, status: str | None = None, agent: str | None = None,
                   since: float | None = None, until: float | None = None,
                   min_cost: float | None = None, max_cost: float | None = None) -> int: ...

    def run_values(self, field: RunField) -> builtins.list[str]: ...

    def close(self) -> None: ...


def recording_of(result: RunSource, meta: dict[str, Any] | None = None) -> Recording:
    """``result`` as a recording (a recording is taken as it is)."""
    return result if isinstance(result, Recording) else Recording.of(result, meta=meta)


def parse_stored(run_id: str, body: str | dict[str, Any], where: str) -> Recording:
    """A stored body (its JSON, or that JSON parsed) as a recording; unreadable, it is an error
    naming the run and the store."""
    try:
        return Recording.from_json(body) if isinstance(body, str) else Recording.from_data(body)
    except RunError as exc:
        raise RunError(f"run {run_id!r} in {where} is unreadable ({exc}); it was written by "
                       "another version or altered — the row is left as it is") from exc


def proof_json(run_id: str, proof: Mapping[str, Any]) -> str:
    """``proof`` as strict JSON text; anything else is refused before the store is touched."""
    if not isinstance(proof, Mapping):
        raise TypeError(f"a proof for run {run_id!r} must be a JSON object (a dict), got "
                        f"{type(proof).__name__}")
    try:
        return json.dumps(dict(proof), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the proof for run {run_id!r} is not plain JSON ({exc}); pass "
                        "str, numbers, bools, None, lists and dicts only") from exc


def parse_proof(run_id: str, body: str, where: str) -> dict[str, Any]:
    """A stored proof as a dict; unreadable, it is an error naming the run and the store."""
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise RunError(f"a proof of run {run_id!r} in {where} is unreadable ({exc}); it was "
                       "altered — the row is left as it is") from exc
    if not isinstance(value, dict):
        raise RunError(f"a proof of run {run_id!r} in {where} is not a JSON object; it was "
                       "altered — the row is left as it is")
    return value


def preview_of(recording: Recording) -> str:
    """The first 120 characters of the answer, for a listing."""
    return str(recording.output if recording.output is not None else "")[:120]
