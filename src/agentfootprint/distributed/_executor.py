"""The executor port: where a run, a batch of runs, or an explanation's re-runs are executed.

A job crosses a process boundary, so it is data, never a live object:

* :class:`RunJob` — an importable agent factory (``"module:attr"``, called once per run and
  returning a fresh ``Agent``), the user's message, the run id, the run store every worker
  writes to (a SQLite file path or a ``postgresql://`` URL) and JSON options.
* a resume — a :class:`RunJob` whose ``resume`` (:class:`ResumeFrom`) carries the paused run's
  checkpoint and the person's answer, both JSON (``agent.resume`` on an executor); its run id
  is the paused run's, and the run store keeps one recording of the whole run.
* an explanation re-run — ``explain/_fanout.py``'s ``RerunJob``: the factory, the explained
  run's recording, the removed suspect ids and the re-run's seed; "wrong" is a ``WrongIf``.

An :class:`Executor` takes a batch of jobs and hands back one outcome per job, **in input
order**. One job's failure is its outcome (``status="failed"``, ``error``), never an exception
for the batch; only the executor itself failing (a broker that is down) raises. Wherever a job
lands, the same function does the work — :func:`execute` for a run, ``explain._fanout.rerun_one``
for a re-run — so an in-process executor and a fleet of workers give identical results.

**The run id is the idempotency handle.** A job may be delivered more than once (a worker killed
mid-task is re-delivered by late acknowledgement, a durable engine recovers a workflow):
:func:`execute` looks the run up in the run store first — a finished run returns its stored
answer, a run that was under way is resumed from its journal (``agent.resume(run_id)``: a tool
call with a recorded outcome is never repeated, see ``agent/_journal.py``), and only an unknown
run id starts a new run. Every recording says where it ran and in how many attempts
(``_placement.py``).

The default is :class:`InProcessExecutor`: the jobs run as asyncio tasks of the caller's loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from .._refs import callable_path, load_ref
from ..errors import ConfigurationError
from ..flow._run import run_sync

if TYPE_CHECKING:
    from ..explain._fanout import RerunJob, RerunOutcome
    from ..runs._store import RunStorePort

__all__ = ["Executor", "InProcessExecutor", "ResumeFrom", "RunJob", "RunOutcome", "continue_run",
           "execute", "open_run_store", "open_statuses", "run_many", "run_many_sync"]

RUN_OPTIONS = ("timeout", "continue_from")
"""The ``RunJob.options`` a run accepts (each is JSON): ``agent.run``'s keywords of that name."""
RESUME_OPTIONS = ("timeout",)
"""The ``RunJob.options`` a resume job accepts: ``agent.resume``'s JSON keywords."""


class ResumeFrom(BaseModel):
    """What a job continuing a run carries (``agent.resume`` on an executor), as JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint: dict[str, Any] | None = None
    """The paused run's ``RunResult.checkpoint``; ``None``: a killed run, continued from its
    run store's journal (``agent.resume(run_id)``)."""
    answer: Any = None
    """The person's answer (JSON: ``check_in_approved(by=...)``, a reply)."""


class RunJob(BaseModel):
    """One agent run as another process can start (or continue) it (plain JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    factory: str
    """``"module:attr"``: a function (sync or async) returning a fresh Agent, called per run."""
    message: str
    run_id: str
    """The run's id, and the idempotency handle of a job delivered twice."""
    store: str | None = None
    """Where the recording goes: a SQLite file path or a ``postgresql://`` URL (``None``: the
    agent's own ``Tracing(run_store=...)``, if any; a re-delivered job then starts over)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """``agent.run`` keywords that are JSON: ``timeout``, ``continue_from``."""
    resume: ResumeFrom | None = None
    """Set: the job continues run ``run_id`` (``agent.resume``) instead of starting it, and
    ``message`` is unused; delivered twice, it continues the resumed part from its journal."""


class RunOutcome(BaseModel):
    """What became of one job: the answer, or why there is none, and where it ran."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    status: Literal["done", "paused", "failed"]
    content: str | None = None
    """The answer (``None`` when the run failed)."""
    error: str | None = None
    """``"ErrorType: message"`` of a failed run."""
    placement: dict[str, Any] = Field(default_factory=dict)
    """Where and in how many attempts it ran (``_placement.py``): host, pid, worker, attempts."""
    reused: bool = False
    """The run was finished already (a job delivered again): this is its stored result."""
    checkpoint: dict[str, Any] | None = None
    """A paused run's ``RunResult.checkpoint``, so any process can resume it (``None`` for a
    stored result handed back again)."""


@runtime_checkable
class Executor(Protocol):
    """Runs batches of jobs somewhere; outcomes come back in input order (see the module)."""

    name: str

    async def run_jobs(self, jobs: Sequence[RunJob]) -> list[RunOutcome]:
        """One outcome per job, in ``jobs`` order; a job's failure is its outcome."""
        ...

    async def rerun_jobs(self, jobs: Sequence[RerunJob]) -> list[RerunOutcome]:
        """An explanation's re-runs, one outcome per job in order (``explain/_fanout.py``)."""
        ...

    def close(self) -> None:
        """Let go of connections (idempotent)."""
        ...


class InProcessExecutor:
    """The default: jobs run as asyncio tasks of the caller's loop, at most ``concurrency`` at
    a time across every batch given to this executor, started in the order they were given
    (runs wait on their model, so tasks overlap; CPU work still shares one core)."""

    name = "in-process"
    shares_process = True
    """Jobs run in the caller's process: any agent can be named (``_refs.live_ref``)."""

    def __init__(self, *, concurrency: int = 8) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency={concurrency!r} must be an int >= 1")
        self.concurrency = concurrency
        self._gates: dict[int, asyncio.Semaphore] = {}

    async def _bounded(self, work: Sequence[Callable[[], Any]]) -> list[Any]:
        loop = id(asyncio.get_running_loop())
        gate = self._gates.get(loop)
        if gate is None:
            self._gates = {loop: asyncio.Semaphore(self.concurrency)}  # one loop at a time
            gate = self._gates[loop]

        async def one(start: Callable[[], Any]) -> Any:
            async with gate:
                return await start()
        return list(await asyncio.gather(*(one(w) for w in work)))

    async def run_jobs(self, jobs: Sequence[RunJob]) -> list[RunOutcome]:
        return await self._bounded([functools.partial(execute, job, worker="in-process")
                                    for job in jobs])

    async def rerun_jobs(self, jobs: Sequence[RerunJob]) -> list[RerunOutcome]:
        from ..explain._fanout import rerun_one

        return await self._bounded([functools.partial(rerun_one, job) for job in jobs])

    async def run_agent(self, agent: Any, message: str, *, run_id: str | None = None,
                        options: Mapping[str, Any] | None = None) -> Any:
        """One run of ``agent`` as a job here (``Agent(executor=InProcessExecutor())``)."""
        from ._agent_runs import run_agent_on

        return await run_agent_on(self, agent, message, run_id=run_id, options=options)

    async def resume_agent(self, agent: Any, checkpoint: Mapping[str, Any] | str,
                           answer: object = None, *,
                           options: Mapping[str, Any] | None = None) -> Any:
        """``agent.resume(checkpoint, answer)`` as a job here, checkpoint and answer as JSON."""
        from ._agent_runs import resume_agent_on

        return await resume_agent_on(self, agent, checkpoint, answer, options=options)

    def close(self) -> None:
        """Nothing to let go of."""


# -- the work a job does, wherever it lands ----------------------------------------------------

_stores: dict[tuple[int, int, str], RunStorePort] = {}
_stores_lock = threading.Lock()


def open_run_store(where: str) -> RunStorePort:
    """The run store at ``where`` (a SQLite path or a ``postgresql://`` URL), opened once per
    process and thread (a forked worker opens its own; SQLite connections stay in their thread)."""
    if not isinstance(where, str) or not where:
        raise ConfigurationError(f"store={where!r} must be a SQLite file path or a "
                                 "postgresql:// URL")
    url = where.startswith(("postgresql://", "postgres://"))
    key = (os.getpid(), threading.get_ident(), where if url else os.path.abspath(where))
    with _stores_lock:  # a relative path is the file it names now, not the first one it named
        found = _stores.get(key)
        if found is None:
            if url:
                from ..runs._postgres import PostgresRunStore

                found = PostgresRunStore(where)
            else:
                from ..runs._sqlite import RunStore

                found = RunStore(where)
            _stores[key] = found
    return found


def is_built_agent(found: object) -> bool:
    """``found`` is an agent instance (not a function that builds one)."""
    return callable(getattr(found, "run", None)) and hasattr(found, "_init_kwargs")


async def _agent_of(factory: str) -> Any:
    """The agent a job names, fresh for this run: the factory's, or a copy of the module-level
    agent found there (its listeners kept; see ``agent/_executor_option.py``)."""
    found = load_ref(factory)
    if is_built_agent(found):
        from ..agent._executor_option import fresh_copy

        return fresh_copy(found)
    if not callable(found):
        raise ConfigurationError(f"{factory!r} is neither an agent nor a function that builds "
                                 "one; name 'module:make_agent' or a module-level Agent")
    made = found()
    if inspect.isawaitable(made):
        made = await made
    if not callable(getattr(made, "run", None)) or not hasattr(made, "_init_kwargs"):
        raise ConfigurationError(
            f"{factory}() returned {made!r}; it must return an Agent (or LLMCall) built afresh "
            "for each run")
    if getattr(made, "executor", None) is not None:  # the job runs here, not on it again
        from ..agent._executor_option import run_copy

        made = run_copy(made)
    return made


def _check_options(job: RunJob) -> dict[str, Any]:
    allowed = RESUME_OPTIONS if job.resume is not None else RUN_OPTIONS
    unknown = sorted(set(job.options) - set(allowed))
    if unknown:
        kind = "resume" if job.resume is not None else "run"
        raise ConfigurationError(
            f"RunJob options {unknown} are not {kind} options; use {list(allowed)}")
    return dict(job.options)


def open_statuses(job: RunJob) -> tuple[str, ...]:
    """The stored statuses under which ``job`` does work (any other: its stored result is
    the answer): a run under way (a job delivered again), and a paused run it resumes."""
    return ("running", "paused") if job.resume is not None else ("running",)


async def continue_run(agent: Any, job: RunJob, stored: str | None,
                       options: Mapping[str, Any]) -> Any:
    """Continue ``job``'s run with ``agent`` (the stored row's status ``stored``): a resume
    job's checkpoint while the row is paused (or absent), else the journal of a run that was
    under way when its process died (``agent.resume(run_id)``)."""
    resume = job.resume
    if resume is not None and resume.checkpoint is not None and stored in (None, "paused"):
        return await agent.resume(resume.checkpoint, resume.answer, **options)
    return await agent.resume(job.run_id, **options)


async def execute(job: RunJob, *, worker: str, attempt_note: str | None = None) -> RunOutcome:
    """Do ``job`` here: the stored result of a finished run, a killed run resumed from its
    journal, or a new run — recorded to ``job.store`` with where it ran (``worker`` names the
    process, e.g. a Celery worker's node name)."""
    from ._placement import Placement, placed

    options = _check_options(job)
    here = Placement.here(worker, note=attempt_note)
    try:
        agent = await _agent_of(job.factory)
        tracing = agent._init_kwargs.get("tracing")
        store = (open_run_store(job.store) if job.store is not None
                 else getattr(tracing, "run_store", None))
        if store is None:
            result = (await continue_run(agent, job, None, options) if job.resume is not None
                      else await agent.run(job.message, run_id=job.run_id, **options))
            hand_over(job.run_id, result)
            return _outcome(job.run_id, result, here.as_meta(attempts=1))
        stored = _stored(store, job.run_id)
        if stored is not None and stored.status not in open_statuses(job):
            return _reused(stored)
        wrapped = placed(store, here, factory=job.factory)
        from ..agent._executor_option import run_copy
        from ..agent._options import Tracing

        agent = run_copy(agent, tracing=dataclasses.replace(tracing or Tracing(),
                                                            run_store=wrapped))
        if stored is not None or job.resume is not None:  # paused, or its worker died
            result = await continue_run(agent, job, None if stored is None else stored.status,
                                        options)
        else:
            result = await agent.run(job.message, run_id=job.run_id, **options)
        hand_over(job.run_id, result)
        return _outcome(job.run_id, result, wrapped.placement_of(job.run_id))
    except Exception as exc:  # one job's failure is its outcome, never the batch's
        hand_over(job.run_id, exc)
        return RunOutcome(run_id=job.run_id, status="failed",
                          error=f"{type(exc).__name__}: {exc}"[:2000],
                          placement=here.as_meta(attempts=None))


_awaited: dict[str, list[Any]] = {}
"""Run id -> what a caller in this process waits for besides the outcome: the live
``RunResult`` (or the exception) of a job that ran here (``_agent_runs.py``)."""


def hand_over(run_id: str, value: Any) -> None:
    """Give a caller of this process that awaits ``run_id`` its live result (or error)."""
    slot = _awaited.get(run_id)
    if slot is not None:
        slot.append(value)


def _stored(store: RunStorePort, run_id: str) -> Any:
    try:
        return store.load(run_id)
    except KeyError:
        return None


def _reused(recording: Any) -> RunOutcome:
    status: Literal["done", "paused", "failed"] = (
        "done" if recording.status == "done" else
        "paused" if recording.status == "paused" else "failed")
    return RunOutcome(
        run_id=recording.run_id, status=status,
        content=str(recording.output) if recording.output is not None else None,
        error=None if status != "failed" else f"the run ended {recording.status!r}",
        placement=dict(recording.meta.get("placement") or {}), reused=True)


def _outcome(run_id: str, result: Any, placement: dict[str, Any]) -> RunOutcome:
    paused = bool(getattr(result, "paused", False))
    return RunOutcome(run_id=run_id, status="paused" if paused else "done",
                      content=result.content, placement=placement,
                      checkpoint=result.checkpoint if paused else None)


# -- batches ---------------------------------------------------------------------------------


async def run_many(factory: str | Callable[[], Any] | Any, messages: Sequence[str], *,
                   executor: Executor | None = None, store: str | None = None,
                   run_ids: Sequence[str] | None = None,
                   options: Mapping[str, Any] | None = None) -> list[RunOutcome]:
    """Run ``factory()``'s agent once per message on ``executor`` (default: in-process);
    outcomes in ``messages`` order.

    ``factory`` may be the agent itself: each run gets a fresh copy of it. An executor that runs
    jobs elsewhere (Celery, DBOS) finds it by reference, so it must be assigned at the top level
    of an importable module (``agent = Agent(...)`` in ``myapp/agents.py``).

    ``store`` is the run store every worker records to. ``run_ids`` (default: fresh ones)
    make a batch safe to submit again: a run id already finished returns its stored answer.
    """
    if isinstance(messages, str) or not all(isinstance(m, str) for m in messages):
        raise ConfigurationError("messages= must be a list of str (one run per message)")
    ids = list(run_ids) if run_ids is not None else [uuid.uuid4().hex for _ in messages]
    if len(ids) != len(messages) or len(set(ids)) != len(ids):
        raise ConfigurationError(
            f"run_ids= must give one distinct id per message ({len(messages)} messages, "
            f"{len(ids)} ids, {len(set(ids))} distinct)")
    executor = executor or InProcessExecutor()
    if is_built_agent(factory):
        from ..agent._executor_option import reference_of

        path = reference_of(factory, shares_process=getattr(executor, "shares_process", False))
    elif not isinstance(factory, str) and not callable(factory):
        raise ConfigurationError(
            f"run_many() takes the agent or the function that builds it ('module:make_agent' "
            f"or make_agent), not a {type(factory).__name__}")
    else:
        path = callable_path(factory)
    jobs = [RunJob(factory=path, message=m, run_id=i, store=store, options=dict(options or {}))
            for m, i in zip(messages, ids, strict=True)]
    return await executor.run_jobs(jobs)


def run_many_sync(factory: str | Callable[[], Any] | Any, messages: Sequence[str],
                  **options: Any) -> list[RunOutcome]:
    """``run_many`` from a script (refuses inside a running event loop)."""
    return run_sync(run_many(factory, messages, **options))
