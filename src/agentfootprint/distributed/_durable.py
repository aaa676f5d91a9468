"""A durable run: an agent run replayed from its start by whichever process recovers it.

A durable engine (DBOS, ``_dbos.py``) runs a :class:`~._executor.RunJob` as a workflow and
puts its :class:`~agentfootprint.flow._durable.StepRunner` in the run's context, so the run's
effectful steps (model calls, tool calls, memory claims and writes) are recorded by the engine
(``flow/_durable.py`` is the seam). A process that recovers the run executes
:func:`execute_durable` again, from the start: the chart walks the same stages, every finished
step answers from the engine's record, the first unfinished one runs for real. Because the
stages are deterministic given their steps' results, the replay rebuilds the very commit log
the killed attempt had, so the run store keeps **one** recording of the run:

* the replay re-opens the row it finds ``running`` (not refused as another run's id);
* progress entries the killed attempt appended are not appended twice (a replay's entries
  equal them one for one, see :class:`ReplayStore`);
* each attempt adds a placement entry, and the saved recording says where and in how many
  attempts it ran (``_placement.py``).
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..errors import ConfigurationError, RunError
from ..flow._durable import StepRunner, step_runner
from ._placement import PLACEMENT_PHASE, PlacedStore, Placement

if TYPE_CHECKING:
    from ..runs._recording import Recording
    from ..runs._store import RunSource, RunStorePort
    from ._executor import RunJob, RunOutcome

__all__ = ["Raised", "ReplayStore", "execute_durable"]


@dataclass(frozen=True, slots=True)
class Raised:
    """A step that raised, as the engine records it: the exception itself when it survives a
    pickle round trip, else its type and message (a tool's pause request is kept whole)."""

    error: BaseException | None = None
    kind: str = ""
    data: Any = None
    text: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> Raised:
        from ..tools._pause import PauseRequest

        if isinstance(exc, PauseRequest):
            return cls(kind=exc.kind, data=exc.data)
        try:
            pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes, just made
        except Exception:
            return cls(text=f"{type(exc).__name__}: {exc}")
        return cls(error=exc)

    def rebuild(self) -> BaseException:
        if self.kind:
            from ..tools._pause import PauseRequest

            return PauseRequest(self.kind, self.data)  # type: ignore[arg-type]
        if self.error is not None:
            return self.error
        return RunError(f"a durable step failed: {self.text}")


_locks: dict[int, tuple[object, threading.RLock]] = {}
_locks_guard = threading.Lock()


def _lock_of(store: object) -> threading.RLock:
    """One lock per underlying store, shared by every run of the process. A run's writes go
    through the store's one writer thread (its wrapper shares it, ``runs/_writer.py``), but
    ``execute_durable`` also reads the store on the event loop's thread (the stored row before
    an attempt, the placement after it); a PostgreSQL store's one connection must not run
    those reads' transactions inside a write's, so every call through a ``ReplayStore`` and
    those reads take this lock."""
    with _locks_guard:
        found = _locks.get(id(store))
        if found is None or found[0] is not store:
            found = _locks[id(store)] = (store, threading.RLock())
        return found[1]


class ReplayStore(PlacedStore):
    """The run store as one attempt of a durable run records to it.

    ``reopen`` is the status the attempt found the row in (``None``: there was none).
    ``"running"`` (a recovery): the row is begun again under its id, and the progress
    entries the killed attempt left are matched one for one by the replay's equal entries,
    which are then not appended again; the first entry that differs (the replay went past
    where the killed attempt stopped) and all after it are appended. Every call holds the
    underlying store's lock (see :func:`_lock_of`).
    """

    def __init__(self, store: RunStorePort, placement: Placement, *, factory: str | None,
                 reopen: str | None) -> None:
        super().__init__(store, placement, factory=factory)
        self.reopen = reopen
        self.lock = _lock_of(store)
        self._kept: Counter[str] = Counter()

    def begin(self, recording: Recording, *, reopen: str | None = None) -> None:
        reopen = self.reopen or reopen  # the row's status as found wins (a resume recovered)
        with self.lock:
            if reopen == "running":
                self._kept = Counter(_canonical(e) for e in self.store.progress(
                    recording.run_id) if e.get("phase") != PLACEMENT_PHASE)
            super().begin(recording, reopen=reopen)

    def append_progress(self, run_id: str, entry: Mapping[str, Any]) -> None:
        if self._kept:
            key = _canonical(entry)
            if self._kept[key] > 0:
                self._kept[key] -= 1
                return
            self._kept.clear()  # past the killed attempt: everything from here is new
        with self.lock:
            self.store.append_progress(run_id, entry)

    def save(self, result: RunSource, *, meta: dict[str, Any] | None = None) -> Recording:
        with self.lock:
            return super().save(result, meta=meta)

    def load(self, run_id: str) -> Recording:
        with self.lock:
            return self.store.load(run_id)

    def progress(self, run_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return self.store.progress(run_id)

    def placement_of(self, run_id: str) -> dict[str, Any]:
        with self.lock:
            return super().placement_of(run_id)


def _canonical(entry: Mapping[str, Any]) -> str:
    return json.dumps(dict(entry), sort_keys=True, default=repr)


async def execute_durable(job: RunJob, runner: StepRunner, *, worker: str,
                          on_pause: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
                          resume: tuple[Mapping[str, Any] | None, object] | None = None,
                          workflow: str | None = None) -> RunOutcome:
    """Do ``job`` as one attempt of a durable run whose steps go through ``runner``.

    A run the store holds finished (a workflow recovered after its run was saved) returns its
    stored result; a run the store holds ``running`` is replayed from its start (see the
    module); otherwise it starts. ``resume=(checkpoint, answer)``, or the job's own
    ``resume``, continues a paused run instead (``agent.resume``: the same run id, one
    recording); a job's ``resume`` without a checkpoint continues a killed run from its
    journal. A run that pauses hands its checkpoint to ``on_pause`` (the engine keeps it for
    the resume). A failure is the outcome (``status="failed"``), so the engine records the
    workflow as done either way and never retries a run that failed. ``workflow`` is the
    engine's id of the workflow, kept in the attempt's placement.
    """
    from ._executor import (
        RunOutcome,
        _agent_of,
        _check_options,
        _outcome,
        _reused,
        _stored,
        hand_over,
        open_run_store,
        open_statuses,
    )

    here = Placement.here(worker, workflow=workflow)
    try:
        options = _check_options(job)
        agent = await _agent_of(job.factory)
        tracing = agent._init_kwargs.get("tracing")
        store = (open_run_store(job.store) if job.store is not None
                 else getattr(tracing, "run_store", None))
        if store is None:
            raise ConfigurationError(
                f"durable run {job.run_id!r} has no run store, so the process that recovers "
                "it could not continue its recording; give the job store= (a SQLite path or a "
                "postgresql:// URL) or build the agent with Tracing(run_store=...)")
        with _lock_of(store):
            stored = _stored(store, job.run_id)
        if resume is None and job.resume is not None and job.resume.checkpoint is not None:
            # a recovery replays from the checkpoint too: the same steps, in the same order
            resume = (job.resume.checkpoint, job.resume.answer)
        allowed = ("running", "paused") if resume is not None else open_statuses(job)
        if stored is not None and stored.status not in allowed:
            return _reused(stored)
        if resume is not None and not isinstance(resume[0], Mapping):
            raise ConfigurationError(
                f"run {job.run_id!r} has no paused checkpoint to resume from; resume a run "
                "whose outcome was 'paused'")
        wrapped = ReplayStore(store, here, factory=job.factory,
                              reopen=None if stored is None else stored.status)
        from ..agent._executor_option import run_copy
        from ..agent._options import Tracing

        agent = run_copy(agent, tracing=dataclasses.replace(tracing or Tracing(),
                                                            run_store=wrapped))
        token = step_runner.set(runner)
        try:
            if resume is not None:
                timeout = options.get("timeout")
                checkpoint = cast("Mapping[str, Any]", resume[0])  # checked above
                result = await agent.resume(checkpoint, resume[1], timeout=timeout)
            elif job.resume is not None:  # a killed run's id: continued from its journal
                result = await agent.resume(job.run_id, **options)
            else:
                result = await agent.run(job.message, run_id=job.run_id, **options)
        finally:
            step_runner.reset(token)
        if result.paused and on_pause is not None:
            await on_pause(result.checkpoint)
        hand_over(job.run_id, result)
        return _outcome(job.run_id, result, wrapped.placement_of(job.run_id))
    except Exception as exc:  # one run's failure is its outcome
        hand_over(job.run_id, exc)
        return RunOutcome(run_id=job.run_id, status="failed",
                          error=f"{type(exc).__name__}: {exc}"[:2000],
                          placement=here.as_meta(attempts=None))
