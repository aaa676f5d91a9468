"""Where a run ran, and in how many attempts: a small block in its recording's ``meta``.

A run fanned out to workers, or recovered by another process, is still one recording; this
block says where each attempt happened. Every attempt that reaches the run store appends one
progress entry ``{"phase": "placement", "placement": {...}}`` as its row is opened (a journal's
readers skip phases they do not know), and the recording saved at the end carries::

    meta["placement"] = {"host": ..., "pid": ..., "worker": ..., "attempts": 2,
                         "where": [{"host": ..., "pid": ..., "worker": ..., "at": ...}, ...]}
    meta["factory"] = "module:attr"     # so `agentfootprint prove RUN_ID` can rebuild the agent

``host``/``pid``/``worker`` are the attempt that finished it; a DBOS attempt also names its
``workflow`` (a resumed part runs in a workflow of its own). An attempt killed before its run
reached the store leaves no trace and is not counted. Every executor (in-process, Celery, DBOS)
writes the block with :func:`placed`; the normal form two recordings are compared in drops it.
"""

from __future__ import annotations

import builtins
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..runs._recording import Recording
    from ..runs._store import RunField, RunSource, RunStorePort, RunSummary

__all__ = ["PLACEMENT_META", "PLACEMENT_PHASE", "PlacedStore", "Placement", "placed",
           "placement_of"]

PLACEMENT_META: Final = "placement"
"""The key of the block in ``Recording.meta``."""
PLACEMENT_PHASE: Final = "placement"
"""The ``phase`` of the progress entry each attempt appends."""


@dataclass(frozen=True, slots=True)
class Placement:
    """One attempt's whereabouts."""

    host: str
    pid: int
    worker: str
    """The executor's name for the process: a Celery node name, ``"in-process"``, a DBOS
    executor id."""
    note: str | None = None
    """What the executor knows about this delivery (e.g. ``"redelivered"``)."""
    workflow: str | None = None
    """The durable engine's id of the workflow the attempt ran in (DBOS: the run id for the
    run, ``{run_id}.resume-...`` for a resumed part)."""

    @classmethod
    def here(cls, worker: str, *, note: str | None = None,
             workflow: str | None = None) -> Placement:
        return cls(socket.gethostname(), os.getpid(), worker, note, workflow)

    def entry(self) -> dict[str, Any]:
        found: dict[str, Any] = {"host": self.host, "pid": self.pid, "worker": self.worker,
                                 "at": time.time()}
        if self.note:
            found["note"] = self.note
        if self.workflow:
            found["workflow"] = self.workflow
        return found

    def as_meta(self, *, attempts: int | None,
                where: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        meta = {"host": self.host, "pid": self.pid, "worker": self.worker,
                "attempts": attempts, "where": where if where is not None else [self.entry()]}
        if self.workflow:
            meta["workflow"] = self.workflow
        return meta


def placement_of(entries: list[dict[str, Any]], last: Placement) -> dict[str, Any]:
    """The block for a run whose progress entries are ``entries`` and whose attempt ``last``
    is finishing it."""
    where = [dict(e[PLACEMENT_META]) for e in entries
             if e.get("phase") == PLACEMENT_PHASE and isinstance(e.get(PLACEMENT_META), dict)]
    return last.as_meta(attempts=max(len(where), 1), where=where or [last.entry()])


class PlacedStore:
    """A run store that stamps each attempt's placement on the runs it keeps (delegates the
    rest). One per attempt: it is the store the attempt's agent records to."""

    def __init__(self, store: RunStorePort, placement: Placement, *,
                 factory: str | None = None) -> None:
        self.store = store
        self.placement = placement
        self.factory = factory

    def __repr__(self) -> str:
        return f"{self.store!r} (placed: {self.placement.worker})"

    @property
    def wrapped_store(self) -> RunStorePort:
        """The store this one records to (its writer thread is this one's too)."""
        return self.store

    def placement_of(self, run_id: str) -> dict[str, Any]:
        try:
            entries = self.store.progress(run_id)
        except KeyError:
            entries = []
        return placement_of(entries, self.placement)

    def _meta(self, run_id: str, meta: Mapping[str, Any] | None) -> dict[str, Any]:
        out = dict(meta or {})
        out[PLACEMENT_META] = self.placement_of(run_id)
        if self.factory is not None:
            out.setdefault("factory", self.factory)
        return out

    def save(self, result: RunSource, *, meta: dict[str, Any] | None = None) -> Recording:
        from ..runs._store import recording_of

        recording = recording_of(result, meta)
        merged = {**recording.meta, **self._meta(recording.run_id, recording.meta)}
        return self.store.save(recording.model_copy(update={"meta": merged}))

    def begin(self, recording: Recording, *, reopen: str | None = None) -> None:
        self.store.begin(recording, reopen=reopen)
        self.store.append_progress(recording.run_id, {"phase": PLACEMENT_PHASE,
                                                      PLACEMENT_META: self.placement.entry()})

    def load(self, run_id: str) -> Recording:
        return self.store.load(run_id)

    def append_progress(self, run_id: str, entry: Mapping[str, Any]) -> None:
        self.store.append_progress(run_id, entry)

    def progress(self, run_id: str) -> list[dict[str, Any]]:
        return self.store.progress(run_id)

    def add_proof(self, run_id: str, proof: Mapping[str, Any]) -> None:
        self.store.add_proof(run_id, proof)

    def proofs(self, run_id: str) -> list[dict[str, Any]]:
        return self.store.proofs(run_id)

    def list(self, *, limit: int = 20) -> list[RunSummary]:
        return self.store.list(limit=limit)

    def list_runs(self, **options: Any) -> builtins.list[RunSummary]:
        return self.store.list_runs(**options)

    def count_runs(self, **filters: Any) -> int:
        return self.store.count_runs(**filters)

    def run_values(self, field: RunField) -> builtins.list[str]:
        return self.store.run_values(field)

    def close(self) -> None:
        """The wrapped store is shared by the process's attempts: it stays open."""


def placed(store: RunStorePort, placement: Placement, *, factory: str | None = None
           ) -> PlacedStore:
    """``store`` as one attempt records to it (see the module)."""
    return PlacedStore(store, placement, factory=factory)
