"""One agent run as an executor's job, handed back as the ``RunResult`` ``agent.run`` gives.

What ``Agent(..., executor=...)`` does on each ``await agent.run(msg)`` and each
``await agent.resume(checkpoint, answer)`` (a job whose ``resume`` carries both; the port is
``agent/_executor_option.py``). The agent goes as a reference (``"myapp.agents:agent"``, see
``reference_of``) in a :class:`~._executor.RunJob`, so the same job works on every executor:

* the job ran in this process (the in-process executor; a DBOS workflow this process started):
  the live ``RunResult`` is handed over as the run ends (``_executor.hand_over``), and a run that
  raised raises its own error here, as ``agent.run`` would;
* it ran elsewhere (a Celery worker), or it had finished before (a run id given again): the
  result is read back from the run store the job recorded to, a paused run's checkpoint from
  the job's outcome.

The run store is the agent's own (``Tracing(run_store=...)``), else ``store`` (a DBOS executor's
default). An executor that runs jobs in other processes needs one, since that is where the result
comes back from.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigurationError, RunError
from ._executor import ResumeFrom, RunJob, _awaited, open_run_store

__all__ = ["resume_agent_on", "run_agent_on"]


async def run_agent_on(executor: Any, agent: Any, message: str, *, run_id: str | None,
                       options: Mapping[str, Any] | None, store: str | None = None) -> Any:
    """Run ``agent`` on ``message`` as one job of ``executor``; its ``RunResult`` (see the
    module). ``store`` is where the run is recorded when the agent has no run store."""
    return await _through(executor, agent, store, lambda ref, where: RunJob(
        factory=ref, message=message, run_id=run_id or uuid.uuid4().hex, store=where,
        options=dict(options or {})))


async def resume_agent_on(executor: Any, agent: Any, checkpoint: Mapping[str, Any] | str,
                          answer: object, *, options: Mapping[str, Any] | None,
                          store: str | None = None) -> Any:
    """``agent.resume(checkpoint, answer)`` as one job of ``executor`` (checkpoint and answer
    JSON, checked by ``agent/_executor_option.resume_through``); its ``RunResult``. A run id
    instead of a checkpoint continues a killed run from its run store's journal."""
    if isinstance(checkpoint, str):
        run_id, resume = checkpoint, ResumeFrom()
    else:
        run_id, resume = str(checkpoint["run_id"]), ResumeFrom(checkpoint=dict(checkpoint),
                                                               answer=answer)
    return await _through(executor, agent, store, lambda ref, where: RunJob(
        factory=ref, message="", run_id=run_id, store=where, options=dict(options or {}),
        resume=resume))


async def _through(executor: Any, agent: Any, store: str | None,
                   make: Callable[[str, str | None], RunJob]) -> Any:
    """The job ``make(reference, store)`` on ``executor``; the run's ``RunResult``."""
    from ..agent._executor_option import reference_of, result_from_recording

    shares = bool(getattr(executor, "shares_process", False))
    ref = reference_of(agent, shares_process=shares)
    own = agent.run_store
    if own is None and store is None and not shares:
        raise ConfigurationError(
            f"agent {agent.name!r} runs on the {executor.name} executor in other processes, and "
            "its result comes back through a run store they share; build it with "
            "tracing=Tracing(run_store=RunStore(path)) or PostgresRunStore(url)")
    job = make(ref, None if own is not None else store)
    if job.run_id in _awaited:
        raise ConfigurationError(f"run {job.run_id!r} is already being awaited in this process; "
                                 "give each run its own run_id")
    slot: list[Any] = []
    _awaited[job.run_id] = slot
    try:
        [outcome] = await executor.run_jobs([job])
    finally:
        del _awaited[job.run_id]
    if slot:
        if isinstance(slot[-1], BaseException):
            raise slot[-1]
        return slot[-1]
    if outcome.status == "failed":
        raise RunError(f"run {job.run_id!r} failed on the {executor.name} executor: "
                       f"{outcome.error}")
    runs = own if own is not None else open_run_store(job.store) if job.store else None
    if runs is None:
        raise RunError(f"run {job.run_id!r} ended on the {executor.name} executor with no run "
                       "store to read its result from; give the agent a run store")
    return result_from_recording(agent, runs.load(job.run_id), checkpoint=outcome.checkpoint)
