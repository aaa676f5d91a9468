"""``dbos_executor``: agent runs as DBOS durable workflows that survive a killed process.

Each :class:`~._executor.RunJob` is one DBOS workflow (its id is the run id); its steps are the
run's model calls, tool calls and memory claims/writes, recorded by DBOS in its system database
(SQLite for one machine, PostgreSQL for several) through the seam of ``flow/_durable.py``. When
a process dies mid-run, a process that launches the executor with the same system database
(and DBOS executor id) recovers the workflow: the run is replayed from its start, finished
steps answer from DBOS's step records and are not executed again, and the run store keeps one
continuous recording of it (``_durable.py``). A step killed mid-execution has no record and
runs again (DBOS steps are at least once): a tool keeps its effect once with
``ctx.idempotency_key``, the same ``{run_id}:{tool_call_id}`` on the re-run.

What DBOS keeps is a sink like the run store: with ``seal_key=`` (a Fernet key) everything the
executor hands DBOS (workflow inputs and outputs, step results and errors) is sealed with it,
and an agent whose ``Tracing(redaction=...)`` masks anything is refused without one, so the
system database never holds in the clear what the run store masks.

Usage — an agent whose every run is durable (``myapp/agents.py``, a module the recovering
process imports too)::

    agent = Agent(..., executor=dbos_executor())   # .agentfootprint/dbos.sqlite and runs.db
    agent.executor.launch()  # at start-up: recovers the runs a killed process left under way
    result = await agent.run("...")                # the usual RunResult
    done = await agent.resume(paused.checkpoint, check_in_approved(by="ana"))  # durable too

or a batch: ``await run_many(agent, messages, executor=executor, store="runs.sqlite")`` (a
factory ``"myapp:make_agent"`` works as well). An agent defined in the script being run
(``__main__``) or inside a function is refused: the recovering process finds the agent by its
module-level name.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigurationError
from ..flow._durable import step_runner
from ._durable import Raised, execute_durable
from ._executor import RunJob, RunOutcome

if TYPE_CHECKING:
    from ..explain._fanout import RerunJob, RerunOutcome

try:
    from dbos import DBOS, SetWorkflowID
    from dbos._serialization import Serializer
except ImportError as exc:  # pragma: no cover - the message is the contract
    raise ConfigurationError(
        'dbos_executor needs the dbos package: pip install "agentfootprint[dbos]"') from exc

__all__ = ["DBOSExecutor", "DBOSSteps", "dbos_executor", "workflow_id_of"]

T = TypeVar("T")
DEFAULT_SYSTEM_DATABASE = "sqlite:///.agentfootprint/dbos.sqlite"
"""DBOS's system database when none is given: a SQLite file beside the default run store."""
WORKFLOW = "agentfootprint.agent_run"
"""The DBOS workflow name every process registers (the same code recovers it)."""


class DBOSSteps:
    """The step runner of a run executed as a DBOS workflow: each step is
    ``DBOS.run_step_async``, its result (or its error, as :class:`~._durable.Raised`) kept."""

    async def step(self, kind: str, fn: Callable[[], Awaitable[T]]) -> T:
        async def body() -> Any:
            token = step_runner.set(None)  # a step's inner steps are part of it
            try:
                return await fn()
            except Exception as exc:
                return Raised.of(exc)
            finally:
                step_runner.reset(token)

        got = await DBOS.run_step_async({"name": kind}, body)
        if isinstance(got, Raised):
            raise got.rebuild()
        return got  # type: ignore[no-any-return]


class _SealedSerializer(Serializer):
    """What DBOS stores, pickled then sealed with a Fernet key (see the module)."""

    def __init__(self, key: bytes | str) -> None:
        from ..flow._seal import _fernet

        self._fernet = _fernet(key)

    def serialize(self, data: Any) -> str:
        return self._fernet.encrypt(pickle.dumps(data)).decode("ascii")

    def deserialize(self, serialized_data: str) -> Any:
        return pickle.loads(self._fernet.decrypt(serialized_data.encode("ascii")))  # noqa: S301

    def name(self) -> str:
        return "agentfootprint_sealed"


CHECKPOINT = "checkpoint"
"""The DBOS event a workflow whose run paused publishes: the run's checkpoint."""


def _worker() -> str:
    return f"dbos:{DBOS.executor_id}" if hasattr(DBOS, "executor_id") else "dbos"


async def _publish(checkpoint: dict[str, Any]) -> None:
    await DBOS.set_event_async(CHECKPOINT, checkpoint)


@DBOS.workflow(name=WORKFLOW)
async def _agent_run(job: dict[str, Any]) -> dict[str, Any]:
    """One agent run as a DBOS workflow (registered at import, so every process has it); a
    job with ``resume`` is the resumed part of a paused run, a workflow of its own."""
    outcome = await execute_durable(RunJob.model_validate(job), DBOSSteps(), worker=_worker(),
                                    on_pause=_publish, workflow=DBOS.workflow_id)
    return outcome.model_dump()


def workflow_id_of(job: RunJob) -> str:
    """The DBOS workflow id of ``job``: its run id for a run (and for a killed run continued
    from its journal: that run's own workflow), ``{run_id}.resume-{digest}`` for the resumed
    part of a paused run — the digest of its checkpoint, so the same checkpoint resumed again
    (a caller retrying after a crash) joins the workflow already there instead of running
    the paused tool a second time."""
    if job.resume is None or job.resume.checkpoint is None:
        return job.run_id
    text = json.dumps(job.resume.checkpoint, sort_keys=True, separators=(",", ":"))
    return f"{job.run_id}.resume-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


@DBOS.workflow(name=WORKFLOW + ".resume")
async def _agent_resume(job: dict[str, Any], paused_in: str, answer: Any) -> dict[str, Any]:
    """A paused run continued with a person's answer, as a workflow of its own: the
    checkpoint is the event the workflow that paused published (a durable read; none: the
    run did not pause there, and its stored outcome or an error is the answer)."""
    checkpoint = await DBOS.get_event_async(paused_in, CHECKPOINT, timeout_seconds=0)
    outcome = await execute_durable(RunJob.model_validate(job), DBOSSteps(), worker=_worker(),
                                    on_pause=_publish, resume=(checkpoint, answer),
                                    workflow=DBOS.workflow_id)
    return outcome.model_dump()


class DBOSExecutor:
    """The executor port on DBOS (see the module). One per process: DBOS is configured once
    per process; :meth:`launch` recovers the runs a killed process left under way."""

    name = "dbos"

    def __init__(self, *, system_database: str = DEFAULT_SYSTEM_DATABASE,
                 app_name: str = "agentfootprint", seal_key: bytes | str | None = None,
                 executor_id: str | None = None, log_level: str = "WARNING",
                 store: str | None = None) -> None:
        if not isinstance(system_database, str) or not system_database.startswith(
                ("sqlite:///", "postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ConfigurationError(
                f"system_database={system_database!r} must be a 'sqlite:///path' or "
                "'postgresql://...' URL of DBOS's system database")
        if seal_key is not None:
            from ..flow._seal import check_seal_key

            check_seal_key(seal_key)
        self.system_database = system_database
        self.seal_key = seal_key
        if store is None:
            from ..runs._sqlite import DEFAULT_RUN_STORE

            store = str(DEFAULT_RUN_STORE)
        self.store = store
        """Where ``agent.run`` records a durable run whose agent has no run store."""
        self.config: dict[str, Any] = {
            "name": app_name, "system_database_url": _sqlalchemy_url(system_database),
            "log_level": log_level, "application_version": "agentfootprint-1"}
        if executor_id is not None:
            self.config["executor_id"] = executor_id
        if seal_key is not None:
            self.config["serializer"] = _SealedSerializer(seal_key)
        self._launched = False
        self._checked: dict[str, None] = {}
        self._loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()

    def __repr__(self) -> str:
        sealed = ", sealed" if self.seal_key is not None else ""
        return f"<DBOSExecutor {self.system_database.split('@')[-1]!r}{sealed}>"

    def launch(self) -> None:
        """Configure DBOS and launch it; DBOS then recovers this executor id's pending runs
        (in the background; :meth:`wait` for them by run id). Idempotent."""
        if self._launched:
            return
        _write_ahead(self.system_database)
        DBOS(config=self.config)  # type: ignore[arg-type]
        DBOS.launch()
        self._launched = True

    async def run_jobs(self, jobs: Sequence[RunJob]) -> list[RunOutcome]:
        """Start one workflow per job (its id the run id, :func:`workflow_id_of` for a
        resume: a job given again joins the workflow already there) and wait for each;
        outcomes in ``jobs`` order."""
        self.launch()
        self._loops.add(asyncio.get_running_loop())
        for job in jobs:
            await self._check_sealing(job.factory)
        handles: list[Any] = []
        for job in jobs:
            with SetWorkflowID(workflow_id_of(job)):
                handles.append(await DBOS.start_workflow_async(_agent_run, job.model_dump()))
        done = await asyncio.gather(*(h.get_result() for h in handles))
        return [RunOutcome.model_validate(d) for d in done]

    async def run_agent(self, agent: Any, message: str, *, run_id: str | None = None,
                        options: Mapping[str, Any] | None = None) -> Any:
        """One durable run of ``agent`` (``Agent(executor=dbos_executor())``), recorded to
        the agent's run store or else :attr:`store`; its ``RunResult``."""
        from ._agent_runs import run_agent_on

        return await run_agent_on(self, agent, message, run_id=run_id, options=options,
                                  store=self.store)

    async def resume_agent(self, agent: Any, checkpoint: Mapping[str, Any] | str,
                           answer: object = None, *,
                           options: Mapping[str, Any] | None = None) -> Any:
        """``agent.resume(checkpoint, answer)`` as a durable workflow of its own
        (:func:`workflow_id_of`, named in the attempt's placement): a process killed during
        the resumed part is recovered like a run (finished steps answer from DBOS's records;
        the paused tool, once run, is not run again), and the run store's recording goes on.
        A killed run's id instead of a checkpoint joins that run's own workflow."""
        from ._agent_runs import resume_agent_on

        return await resume_agent_on(self, agent, checkpoint, answer, options=options,
                                     store=self.store)

    async def resume(self, job: RunJob, answer: object) -> RunOutcome:
        """Continue the paused run ``job.run_id`` with ``answer`` (``check_in_approved(...)``,
        a reply): a workflow ``{run_id}.resume-{k}`` resumes it from the checkpoint the
        workflow that paused kept in DBOS — from any process, killed and recovered like a
        run — and the run store's recording of the run goes on (one recording)."""
        self.launch()
        self._loops.add(asyncio.get_running_loop())
        await self._check_sealing(job.factory)
        k = 0
        while await DBOS.get_workflow_status_async(f"{job.run_id}.resume-{k}") is not None:
            k += 1
        paused_in = job.run_id if k == 0 else f"{job.run_id}.resume-{k - 1}"
        with SetWorkflowID(f"{job.run_id}.resume-{k}"):
            handle = await DBOS.start_workflow_async(_agent_resume, job.model_dump(),
                                                     paused_in, answer)
        return RunOutcome.model_validate(await handle.get_result())

    async def wait(self, run_ids: Sequence[str]) -> list[RunOutcome]:
        """The outcomes of runs already started (by this process or one that died), waiting
        for those under way — recovered ones included."""
        self.launch()
        self._loops.add(asyncio.get_running_loop())
        handles: list[Any] = [await DBOS.retrieve_workflow_async(run_id) for run_id in run_ids]
        done = await asyncio.gather(*(h.get_result() for h in handles))
        return [RunOutcome.model_validate(d) for d in done]

    async def rerun_jobs(self, jobs: Sequence[RerunJob]) -> list[RerunOutcome]:
        """An explanation's re-runs are thought experiments with no side effect to keep:
        they run in this process (a lost one is simply run again)."""
        from ._executor import InProcessExecutor

        return await InProcessExecutor().rerun_jobs(jobs)

    def close(self) -> None:
        """Shut DBOS down in this process (idempotent). The event loops it ran on get a
        default executor of their own back: DBOS lends them its thread pool, which it shuts
        down here, and a loop that lives on (``run_sync``'s, one per thread) would otherwise
        fail every later ``to_thread`` (a sync tool's call) with "cannot schedule new
        futures after shutdown"."""
        if self._launched:
            DBOS.destroy()
            self._launched = False
        for loop in list(self._loops):
            lent = getattr(loop, "_default_executor", None)
            if not loop.is_closed() and type(lent).__name__ == "_SharedExecutor":
                loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="asyncio"))
        self._loops.clear()

    async def _check_sealing(self, factory: str) -> None:
        if self.seal_key is not None or factory in self._checked:
            return
        from ._executor import _agent_of

        agent = await _agent_of(factory)
        if getattr(agent, "redaction", None) is not None:
            raise ConfigurationError(
                f"{factory}'s agent records under a redaction policy, and DBOS's system "
                "database would hold its inputs and step results in the clear; give "
                "dbos_executor(..., seal_key=KEY) (a Fernet key) so they are sealed")
        self._checked[factory] = None


def _write_ahead(url: str) -> None:
    """Put a SQLite system database in write-ahead-log mode (kept in the file) before DBOS
    opens it: each step's commit then writes the log once instead of a rollback journal and
    the database (measured ~3x fewer milliseconds per run here); processes on one machine
    still share it."""
    if not url.startswith("sqlite:///"):
        return
    import sqlite3

    path = url[len("sqlite:///"):]
    if path in ("", ":memory:"):
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    from ..runs._wal import enter_wal

    conn = sqlite3.connect(path)
    try:
        enter_wal(conn)  # processes launched at once on a fresh file: each waits its turn
    finally:
        conn.close()


def _sqlalchemy_url(url: str) -> str:
    """DBOS takes SQLAlchemy URLs; a plain ``postgresql://`` one is given the psycopg 3
    driver this package installs."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain):]
    return url


def dbos_executor(*, system_database: str = DEFAULT_SYSTEM_DATABASE,
                  app_name: str = "agentfootprint", seal_key: bytes | str | None = None,
                  executor_id: str | None = None, log_level: str = "WARNING",
                  store: str | None = None) -> DBOSExecutor:
    """Durable runs on DBOS (see the module): ``system_database`` is ``sqlite:///path`` or a
    ``postgresql://`` URL; ``seal_key`` seals what DBOS stores; ``executor_id`` names this
    process to DBOS (recovery at launch takes over the pending runs of that id); ``store``
    (default ``.agentfootprint/runs.db``) records ``agent.run``'s durable runs whose agent has
    no run store of its own."""
    return DBOSExecutor(system_database=system_database, app_name=app_name, seal_key=seal_key,
                        executor_id=executor_id, log_level=log_level, store=store)
