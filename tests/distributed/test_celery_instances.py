"""Agents by reference on real Celery workers: ``run_many(agent, ..., executor=
celery_executor(app))`` with a module-level instance gives the in-process results, and
``Agent(..., executor=celery_executor(app)).run(...)`` runs on a worker and hands back the usual
RunResult, read back from the run store the workers share."""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery_fleet import Fleet
from fleet_agents import applied
from instance_agents import AGENT

from agentfootprint import RunResult
from agentfootprint.distributed import celery_executor, run_many
from agentfootprint.runs import RunStore

pytestmark = pytest.mark.e2e
celery = pytest.importorskip("celery")


@pytest.fixture
def app(fleet: Fleet) -> Iterator[Any]:
    made = celery.Celery("aftest-submit", broker=fleet.broker, set_as_current=False)
    yield made
    made.close()


async def test_run_many_with_a_module_level_agent_on_workers(
        fleet: Fleet, app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [f"item {i}" for i in range(8)]
    ids = [f"inst-{i}" for i in range(8)]
    monkeypatch.setenv("AF_FLEET_DIR", str(tmp_path))
    local = await run_many(AGENT, messages, store=str(tmp_path / "runs.db"), run_ids=ids)
    executor = celery_executor(app, queue=fleet.queue, timeout=60)
    remote = await run_many(AGENT, messages, executor=executor,
                            store=str(fleet.workdir / "inst.db"), run_ids=ids)
    assert [(o.run_id, o.status, o.content) for o in remote] == \
        [(o.run_id, o.status, o.content) for o in local]
    workers = Counter(o.placement["worker"] for o in remote)
    assert set(workers) <= {f"w1@{os.uname().nodename}", f"w2@{os.uname().nodename}"}
    assert os.getpid() not in {o.placement["pid"] for o in remote}  # ran on the workers
    keys = Counter(key for key, _ in applied(fleet.workdir) if key.startswith("inst-"))
    assert sorted(keys) == sorted(f"{i}:c1" for i in ids) and set(keys.values()) == {1}
    with RunStore(fleet.workdir / "inst.db") as runs:
        assert runs.load("inst-3").meta["factory"] == "instance_agents:AGENT"


async def test_an_agent_with_a_celery_executor_runs_on_a_worker(
        fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in fleet.env().items():
        if name.startswith(("AF_", "AGENTFOOTPRINT_")):
            monkeypatch.setenv(name, value)
    sys.modules.pop("celery_agent", None)
    module = importlib.import_module("celery_agent")
    try:
        result = await module.agent.run("hello", run_id="celery-agent-1")
        assert isinstance(result, RunResult)
        assert result.content == "done: hello" and result.iterations == 2
        assert result.run_id == "celery-agent-1" and len(result.recording.log) > 0
        assert module.agent.checkpoint() == result.checkpoint
        meta = module.agent.run_store.load("celery-agent-1").meta
        assert meta["factory"] == "celery_agent:agent"
        assert meta["placement"]["worker"].startswith(("w1@", "w2@"))
        assert meta["placement"]["pid"] != os.getpid()
        assert [k for k, _ in applied(fleet.workdir) if k.startswith("celery-agent")] == \
            ["celery-agent-1:c1"]
    finally:
        module.agent.executor.close()
        module.agent.run_store.close()
        sys.modules.pop("celery_agent", None)
