"""Fan-out on Celery: the executor port over a Redis broker, workers writing to one run store.

Start workers (each with the factories' modules importable, and the broker in the environment)::

    AGENTFOOTPRINT_BROKER_URL=redis://localhost:6379/0 \\
        celery -A agentfootprint.distributed.worker worker --loglevel=INFO

and submit from anywhere: ``await run_many(agent, messages, executor=celery_executor(app),
store="runs.db")`` — ``agent`` assigned at the top level of a module the workers import (or a
factory ``"myapp:make_agent"``), ``app`` your Celery app (or ``broker="redis://..."``). Workers
started with your own app (``celery -A myapp.tasks worker``) serve our tasks when that module
calls ``celery_executor(app)`` (which registers them) as it is imported.

Delivery is at-least-once, and that is safe here. The app is configured for it: **late
acknowledgement** (``task_acks_late``: a message is acknowledged when its task ends, not when it
starts), **reject on worker lost** (``task_reject_on_worker_lost``: a pool child killed mid-task
puts its message back on the queue instead of acknowledging it), **prefetch 1**
(``worker_prefetch_multiplier``: a worker holds no more messages than it runs, so a killed worker
strands few), and the Redis transport's **visibility timeout** (a message a dead worker held is
handed out again once it has been unacknowledged that long — set it above your longest run, or a
slow run is started twice). A task delivered twice runs ``_executor.execute`` twice with the
same run id: the second returns the stored answer, or resumes the run from its journal, so a
tool call with a recorded outcome is never repeated and an idempotent tool sees the same key.

``Agent(..., executor=celery_executor(app))`` sends each ``agent.run`` and each
``agent.resume(checkpoint, answer)`` to a worker the same way (a resume is a job carrying the
checkpoint and the answer as JSON), so the part of a run after a person's approval runs on a
worker too, and its result comes back through the run store the workers share.

With ``seal_key`` (``AGENTFOOTPRINT_SEAL_KEY`` on the workers) every payload — the jobs, with
the users' messages, and the outcomes, with the answers — crosses the broker and rests in the
result backend as one Fernet token, never in the clear.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConfigurationError, RunError
from ..flow._seal import check_seal_key
from ._executor import RunJob, RunOutcome, execute

if TYPE_CHECKING:
    from celery import Celery  # type: ignore[import-untyped]

    from ..explain._fanout import RerunJob, RerunOutcome

__all__ = ["RERUN_TASK", "RUN_TASK", "CeleryExecutor", "celery_app", "celery_executor"]

RUN_TASK: Final = "agentfootprint.run"
"""One task runs a chunk of jobs (a list of ``RunJob``), concurrently in one event loop."""
RERUN_TASK: Final = "agentfootprint.rerun"
DEFAULT_QUEUE: Final = "agentfootprint"
SEALED: Final = "sealed"
INSTALL: Final = 'pip install "agentfootprint[celery]"'


def _celery() -> Any:
    try:
        import celery
    except ImportError as exc:
        raise ConfigurationError(f"celery_executor needs Celery: {INSTALL}") from exc
    return celery


def celery_app(broker: str, backend: str | None = None, *, queue: str = DEFAULT_QUEUE,
               visibility_timeout: float = 3600.0, restore_interval: float | None = None,
               app: Celery | None = None, seal_key: str | bytes | None = None) -> Celery:
    """A Celery app configured for safe re-delivery (see the module), with our two tasks.

    ``backend`` defaults to the broker. ``restore_interval`` is how often a worker looks for
    messages whose visibility timeout passed (default: a tenth of the timeout, at most 10 s).
    Given ``app``, its configuration is updated and the tasks are registered on it.
    ``seal_key`` (a Fernet key) seals every payload and result (see the module).
    """
    if not isinstance(broker, str) or "://" not in broker:
        raise ConfigurationError(f"broker={broker!r} must be a URL such as "
                                 "'redis://localhost:6379/0'")
    if visibility_timeout <= 0:
        raise ConfigurationError(f"visibility_timeout={visibility_timeout!r} must be > 0 s")
    restore = restore_interval or min(10.0, max(0.5, visibility_timeout / 10))
    if seal_key is not None:
        check_seal_key(seal_key)
    made = app if app is not None else _celery().Celery("agentfootprint")
    made.conf.agentfootprint_seal_key = seal_key
    transport = {"visibility_timeout": visibility_timeout, "unacked_restore_interval": restore,
                 "unacked_restore_throttle": 1}
    made.conf.update(
        broker_url=broker, result_backend=backend or broker,
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        task_serializer="json", result_serializer="json", accept_content=["json"],
        task_default_queue=queue, broker_transport_options=transport,
        result_backend_transport_options={"visibility_timeout": visibility_timeout},
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        task_track_started=False, result_expires=24 * 3600)
    _register(made)
    return made


def _register(app: Celery) -> None:
    if RUN_TASK in app.tasks:
        return

    @app.task(name=RUN_TASK, bind=True)  # type: ignore[untyped-decorator]
    def run_task(self: Any, payload: Any) -> Any:
        key = self.app.conf.get("agentfootprint_seal_key")
        try:
            jobs = [RunJob.model_validate(p) for p in unseal(payload, key)]
        except ConfigurationError as exc:
            return {"refused": str(exc)}
        note = "redelivered" if (self.request.delivery_info or {}).get("redelivered") else None
        worker = str(self.request.hostname or "celery")

        async def chunk() -> list[RunOutcome]:
            return list(await asyncio.gather(*(execute(job, worker=worker, attempt_note=note)
                                               for job in jobs)))
        return seal([outcome.model_dump(mode="json") for outcome in asyncio.run(chunk())], key)

    @app.task(name=RERUN_TASK, bind=True)  # type: ignore[untyped-decorator]
    def rerun_task(self: Any, payload: Any) -> Any:
        from ..explain._fanout import RerunJob, rerun_one

        key = self.app.conf.get("agentfootprint_seal_key")
        try:
            job = RerunJob.model_validate(unseal(payload, key))
        except ConfigurationError as exc:
            return {"refused": str(exc)}
        outcome = asyncio.run(rerun_one(job))
        where = {"worker": str(self.request.hostname or "celery"), "pid": os.getpid()}
        return seal(outcome.model_copy(update={"where": where}).model_dump(mode="json"), key)


def seal(value: Any, key: str | bytes | None) -> Any:
    """``value`` as it crosses the broker: itself, or ``{"sealed": token}`` under ``key``."""
    if key is None:
        return value
    from ..flow._seal import _fernet

    return {SEALED: _fernet(key).encrypt(json.dumps(value).encode()).decode()}


def unseal(value: Any, key: str | bytes | None) -> Any:
    """What :func:`seal` made, opened; a sealed payload without the key (or with another) and a
    plain one where a key is set are refused, naming the fix."""
    sealed = isinstance(value, dict) and set(value) == {SEALED}
    if key is None and not sealed:
        return value
    if key is None or not sealed:
        raise ConfigurationError(
            "a Celery payload is sealed on one side only; give the submitter "
            "(celery_executor(seal_key=...)) and the workers (AGENTFOOTPRINT_SEAL_KEY) the same "
            "key, or neither")
    from cryptography.fernet import InvalidToken

    from ..flow._seal import _fernet

    try:
        return json.loads(_fernet(key).decrypt(str(value[SEALED]).encode()))
    except InvalidToken:
        raise ConfigurationError(
            "a Celery payload was sealed with another key; give the submitter and the workers "
            "the same AGENTFOOTPRINT_SEAL_KEY") from None


class CeleryExecutor:
    """The executor port on a Celery app: each job is one task; outcomes in input order."""

    name = "celery"

    def __init__(self, app: Celery, *, queue: str = DEFAULT_QUEUE,
                 timeout: float | None = None, chunk: int = 1) -> None:
        self.key: str | bytes | None = app.conf.get("agentfootprint_seal_key")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ConfigurationError(f"chunk={chunk!r} must be an int >= 1 (runs per task)")
        self.app = app
        self.queue = queue
        self.timeout = timeout
        self.chunk = chunk

    def __repr__(self) -> str:
        return f"<CeleryExecutor queue={self.queue!r} broker={self.app.conf.broker_url!r}>"

    async def _map(self, task: str, payloads: Sequence[Any]) -> list[Any]:
        if not payloads:
            return []
        celery = _celery()
        try:
            sent = [self.app.send_task(task, args=[seal(p, self.key)], queue=self.queue)
                    for p in payloads]
            results = celery.result.ResultSet(sent, app=self.app)
            values = list(await asyncio.to_thread(results.join, timeout=self.timeout,
                                                  propagate=False))
        except Exception as exc:  # the broker or backend, not a job
            if isinstance(exc, ConfigurationError):
                raise
            raise RunError(f"the Celery executor on {self.app.conf.broker_url!r} failed to run "
                           f"{len(payloads)} job(s) ({type(exc).__name__}: {exc}); check the "
                           "broker and that workers are started") from exc
        out = []
        for value in values:
            if isinstance(value, dict) and "refused" in value:
                raise ConfigurationError(str(value["refused"]))
            out.append(unseal(value, self.key) if isinstance(value, dict | list) else value)
        return out

    def _travels(self, factories: set[str]) -> None:
        local = sorted(f for f in factories if f.startswith("__main__:"))
        if local:
            raise ConfigurationError(
                f"factory {local[0]!r} lives in the script being run, which a Celery worker "
                "cannot import; move it into a module on the workers' PYTHONPATH")

    async def run_jobs(self, jobs: Sequence[RunJob]) -> list[RunOutcome]:
        self._travels({job.factory for job in jobs})
        chunks = [list(jobs[i:i + self.chunk]) for i in range(0, len(jobs), self.chunk)]
        values = await self._map(RUN_TASK, [[job.model_dump(mode="json") for job in chunk]
                                            for chunk in chunks])
        out: list[RunOutcome] = []
        for chunk, value in zip(chunks, values, strict=True):
            if isinstance(value, list) and len(value) == len(chunk):
                out += [RunOutcome.model_validate(v) for v in value]
            else:  # the task itself failed: every job of its chunk says so
                out += [RunOutcome(run_id=job.run_id, status="failed",
                                   error=f"the task failed: {value!r}"[:2000]) for job in chunk]
        return out

    async def run_agent(self, agent: Any, message: str, *, run_id: str | None = None,
                        options: Mapping[str, Any] | None = None) -> Any:
        """One run of ``agent`` on a worker (``Agent(executor=celery_executor(app))``); its
        result is read back from the agent's run store, which the workers must share."""
        from ._agent_runs import run_agent_on

        return await run_agent_on(self, agent, message, run_id=run_id, options=options)

    async def resume_agent(self, agent: Any, checkpoint: Mapping[str, Any] | str,
                           answer: object = None, *,
                           options: Mapping[str, Any] | None = None) -> Any:
        """``agent.resume(checkpoint, answer)`` on a worker: the checkpoint and the answer
        cross the broker as JSON (sealed with ``seal_key``), the worker continues the run in
        the shared run store, and its result is read back from there (a task re-delivered
        mid-resume continues from the run's journal, as a run's does)."""
        from ._agent_runs import resume_agent_on

        return await resume_agent_on(self, agent, checkpoint, answer, options=options)

    async def rerun_jobs(self, jobs: Sequence[RerunJob]) -> list[RerunOutcome]:
        from ..explain._fanout import RerunOutcome

        self._travels({job.factory for job in jobs})
        values = await self._map(RERUN_TASK, [job.model_dump(mode="json") for job in jobs])
        return [RerunOutcome.model_validate(v) if isinstance(v, dict) else RerunOutcome(
                    complete=False, reason=f"the re-run's task failed: {v!r}"[:300])
                for v in values]

    def close(self) -> None:
        self.app.close()


def celery_executor(broker: str | Celery = "redis://localhost:6379/0",
                    backend: str | None = None, *, app: Celery | None = None,
                    queue: str = DEFAULT_QUEUE, visibility_timeout: float = 3600.0,
                    timeout: float | None = None, chunk: int = 1,
                    seal_key: str | bytes | None = None) -> CeleryExecutor:
    """Run jobs on Celery workers started with ``celery -A agentfootprint.distributed.worker
    worker`` (same broker, same ``queue``), or on your own app's workers:
    ``celery_executor(app)`` takes the broker and result backend from ``app``'s configuration,
    configures it for safe re-delivery and registers our tasks on it (see the module).
    ``timeout`` bounds how long a batch is waited for
    (``None``: as long as it takes); ``chunk`` runs go in one task (run concurrently there: fewer
    broker round trips, model waits overlapped; a chunk re-delivered returns its finished runs'
    stored answers); ``app`` is your own Celery app, configured and given our tasks;
    ``seal_key`` seals what crosses the broker (the workers need it as
    ``AGENTFOOTPRINT_SEAL_KEY``)."""
    if not isinstance(broker, str):
        if app is not None or not hasattr(broker, "conf") or not hasattr(broker, "send_task"):
            raise ConfigurationError(
                f"celery_executor() takes a Celery app or a broker URL first, not {broker!r}; "
                "pass celery_executor(app) or celery_executor(broker='redis://...')")
        app, url = broker, broker.conf.broker_url
        if not isinstance(url, str) or "://" not in url:
            raise ConfigurationError(
                f"the Celery app {app.main!r} has no broker URL (broker_url={url!r}); "
                "set app.conf.broker_url = 'redis://...' before celery_executor(app)")
        broker = url
        if backend is None:
            found = app.conf.result_backend
            backend = found if isinstance(found, str) and "://" in found else None
    return CeleryExecutor(celery_app(broker, backend, queue=queue,
                                     visibility_timeout=visibility_timeout, app=app,
                                     seal_key=seal_key),
                          queue=queue, timeout=timeout, chunk=chunk)
