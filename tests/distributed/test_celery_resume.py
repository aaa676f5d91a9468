"""``agent.resume(checkpoint, answer)`` on ``Agent(..., executor=celery_executor(app))`` runs on a
real ``celery worker``: a run that paused for consent on a worker comes back with a checkpoint
(carried by the job's outcome), and its resumed part — the approved tool and the model call
after it — runs in the worker's pool process, not in the caller's, and is recorded in the shared
run store as one recording."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

import pytest
from celery_fleet import Fleet

from agentfootprint import RunResult, check_in_approved

pytestmark = pytest.mark.e2e
pytest.importorskip("celery")


async def test_a_paused_run_is_resumed_on_a_worker(
        own_fleet: Callable[[float], Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = own_fleet(30.0)
    worker = fleet.start("r1", concurrency=1)
    for name, value in fleet.env().items():
        if name.startswith(("AF_", "AGENTFOOTPRINT_")):
            monkeypatch.setenv(name, value)
    sys.modules.pop("resume_celery_agent", None)
    module = importlib.import_module("resume_celery_agent")
    agent = module.agent
    try:
        paused = await agent.run("refund 50", run_id="celery-resume-1")
        assert paused.paused and paused.pause["tool_name"] == "refund"
        assert paused.checkpoint["status"] == "paused" and module.refunds() == []

        done = await agent.resume(paused.checkpoint, check_in_approved(by="alice@ops"))
        assert isinstance(done, RunResult) and done.content == "refund done"
        assert done.run_id == "celery-resume-1" and done.iterations == 2
        assert agent.last is done
        [(key, pid)] = module.refunds()
        assert key == "celery-resume-1:r1"
        assert pid != os.getpid() and pid in fleet.children("r1")  # the worker's pool child

        recording = agent.run_store.load("celery-resume-1")
        assert recording.status == "done" and recording.output == "refund done"
        where = recording.meta["placement"]["where"]
        assert [w["pid"] for w in where] == [pid, pid]  # the run and its resumed part
        assert all(w["worker"] == f"r1@{os.uname().nodename}" for w in where)
        assert worker.poll() is None
    finally:
        agent.executor.close()
        agent.run_store.close()
        sys.modules.pop("resume_celery_agent", None)
