"""Distributed: where runs execute — in-process by default, Celery workers to fan out.

* ``Executor`` — the port: a batch of jobs in, one outcome per job back in input order
  (``_executor.py`` states the contract: jobs are JSON, the run id is the idempotency handle).
* ``run_many(agent, messages, executor=..., store=...)`` — a batch of runs of an agent (a
  module-level one, found by reference on workers) or of an importable factory;
  ``localize_context_bug(..., executor=..., factory=...)`` fans out re-runs.
* ``Agent(..., executor=dbos_executor())`` — every ``agent.run`` and ``agent.resume`` is the
  executor's job (``_agent_runs.py``), handing back the usual ``RunResult``.
* ``celery_executor(app)`` (or ``broker=..., backend=...``) — Celery workers on Redis; start
  them with ``celery -A agentfootprint.distributed.worker worker`` (see ``_celery.py``).
* ``dbos_executor(system_database=...)`` — durable runs on DBOS: a killed run is recovered by
  another process, no finished step runs again, one recording (see ``_dbos.py``).
* ``normal_form(recording)`` — what two recordings of the same work agree on (``_normal_form.py``).

Nothing here imports Celery or DBOS until it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._celery import celery_executor
    from ._dbos import dbos_executor
    from ._executor import Executor, InProcessExecutor, RunJob, RunOutcome, run_many, run_many_sync
    from ._normal_form import normal_form

__all__ = [
    "Executor",
    "InProcessExecutor",
    "RunJob",
    "RunOutcome",
    "celery_executor",
    "dbos_executor",
    "normal_form",
    "run_many",
    "run_many_sync",
]

__getattr__, __dir__ = _lazy_names(__name__, {
    "Executor": "_executor", "InProcessExecutor": "_executor", "RunJob": "_executor",
    "RunOutcome": "_executor", "run_many": "_executor", "run_many_sync": "_executor",
    "celery_executor": "_celery",
    "dbos_executor": "_dbos", "normal_form": "_normal_form",
})
