"""Prove jobs: the isolated re-runs behind the browser's "prove" button, off the request path.

A job proves one stored run against one criterion with ``prove_stored_run`` — the code path of
``agentfootprint prove`` — on a worker thread with its own event loop and its own store handle,
so a request only starts it and reads its progress. The proof is kept in the run store by that
same call, so a reload (or ``agentfootprint explain`` in another process) reads it from there.
One worker: re-runs are heavy, so jobs queue; a second request to prove a run that is already
being proven gets the job under way rather than a duplicate.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import AgentFootprintError
from ...explain._criterion import WrongIf
from ...explain._kept import is_redacted, kept_proof
from ...explain._localize import DEFAULT_BUDGET
from ...explain._prove import prove_stored_run
from ...explain._verdict import DEFAULT_ALPHA
from ...flow._display import terminal_text
from ...flow._run import run_sync
from ...runs._store import RunStorePort

__all__ = ["ProveJob", "ProveJobs"]

State = Literal["queued", "running", "done", "failed"]
Opener = Callable[[], AbstractContextManager[RunStorePort]]


@dataclass(slots=True)
class ProveJob:
    """One prove request and how far it got; read under the jobs' lock."""

    id: str
    run_id: str
    criterion: WrongIf
    state: State = "queued"
    done: int = 0
    """Re-runs finished so far."""
    total: int = 0
    """Re-runs planned at the last progress report (the search may add more)."""
    label: str = ""
    """What the latest re-run removed."""
    lines: list[str] = field(default_factory=list)
    """The kept proof as ``agentfootprint explain`` leads with it (when done)."""
    verdict: str | None = None
    """``CAUSAL`` when a cause was proven, ``NOTHING PROVEN`` otherwise (when done)."""
    error: str | None = None
    """The one-sentence reason the job failed."""

    def as_json(self) -> dict[str, Any]:
        return {"job": self.id, "run_id": self.run_id, "criterion": self.criterion.describe(),
                "state": self.state, "done": self.done, "total": self.total,
                "label": self.label, "lines": list(self.lines), "verdict": self.verdict,
                "error": self.error}


class ProveJobs:
    """The browser's prove jobs, run one at a time on a worker thread."""

    def __init__(self, opener: Opener, *, factory: str | None,
                 budget: int | None = DEFAULT_BUDGET, alpha: float = DEFAULT_ALPHA) -> None:
        self._open = opener
        self._factory = factory
        self._budget = budget
        self._alpha = alpha
        self._lock = threading.Lock()
        self._jobs: dict[str, ProveJob] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentfootprint-prove")

    def submit(self, run_id: str, criterion: WrongIf) -> ProveJob:
        """Queue a proof of ``run_id``; the job already proving it when there is one."""
        with self._lock:
            for job in self._jobs.values():
                if job.run_id == run_id and job.state in ("queued", "running"):
                    return job
            job = ProveJob(secrets.token_urlsafe(12), run_id, criterion)
            self._jobs[job.id] = job
        self._pool.submit(self._run, job)
        return job

    def get(self, job_id: str) -> dict[str, Any] | None:
        """A snapshot of the job as JSON, or None for an unknown id."""
        with self._lock:
            job = self._jobs.get(job_id)
            return None if job is None else job.as_json()

    def active(self, run_id: str) -> str | None:
        """The id of the job queued or running for ``run_id``, if any."""
        with self._lock:
            return next((j.id for j in self._jobs.values()
                         if j.run_id == run_id and j.state in ("queued", "running")), None)

    def close(self) -> None:
        """Drop queued jobs; a job under way finishes (its proof is kept) on its thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, job: ProveJob) -> None:
        def progress(done: int, total: int, label: str) -> None:
            with self._lock:
                job.done, job.total, job.label = done, total, terminal_text(label)[:200]

        with self._lock:
            job.state = "running"
        try:
            with self._open() as store:
                report = run_sync(prove_stored_run(
                    store, job.run_id, is_wrong=job.criterion, factory=self._factory,
                    budget=self._budget, alpha=self._alpha, progress=progress))
                proof = kept_proof(report, redacted=is_redacted(store.load(job.run_id)))
        except AgentFootprintError as exc:
            self._fail(job, terminal_text(str(exc)))
            return
        except Exception as exc:  # a user's agent or predicate failing: said, never a crash
            self._fail(job, f"the re-runs failed ({type(exc).__name__}: "
                            f"{terminal_text(str(exc))[:300]}); fix the agent factory or the "
                            "criterion and prove again")
            return
        with self._lock:
            job.lines = [terminal_text(line) for line in proof.lines()] if proof else []
            job.verdict = "CAUSAL" if proof is not None and proof.causes else "NOTHING PROVEN"
            job.state = "done"

    def _fail(self, job: ProveJob, reason: str) -> None:
        with self._lock:
            job.error, job.state = reason, "failed"
