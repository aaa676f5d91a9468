"""``Agent(..., executor=dbos_executor(...))`` survives ``kill -9``: the agent is a module-level
instance (``dbos_agent_app:agent``), its run is killed inside its second tool, and another
process that launches the executor finishes it — the finished tool and model calls are not
executed again, the killed tool is (at least once), ``agent.run`` of the same run id hands back
the finished run's RunResult, and the run store keeps one recording made in two attempts."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from _killable import run_child

pytestmark = pytest.mark.e2e
pytest.importorskip("dbos")

HERE = Path(__file__).resolve().parent


def _child(env: dict[str, str]) -> str:
    return run_child("dbos_agent_app", env)[0]


def test_an_agent_with_a_dbos_executor_is_recovered_by_another_process(tmp_path: Path) -> None:
    env = {**os.environ, "DBOS_AGENT_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    assert _child({**env, "DBOS_AGENT_BLOCK": "1"}) == "killed"
    said = json.loads(_child(env))

    recovered = said["recovered"]
    assert recovered["status"] == "done" and recovered["content"] == "paid and held: order-1"
    assert recovered["placement"]["attempts"] == 2
    assert said["again"] == ["RunResult", "paid and held: order-1", "durable-1", 3]
    assert said["fresh"] == ["RunResult", "paid and held: order-2", 1]

    with sqlite3.connect(tmp_path / "counters.sqlite") as db:
        executed = Counter(db.execute("SELECT kind, key FROM executed").fetchall())
    assert executed[("pay", "durable-1:p1")] == 1  # finished before the kill: not run again
    assert executed[("llm", "order-1#0")] == executed[("llm", "order-1#1")] == 1
    assert executed[("hold", "durable-1:h1")] == 2  # killed mid-call: run again
    assert executed[("llm", "order-1#2")] == 1
    assert executed[("pay", "durable-2:p1")] == 1

    from agentfootprint.runs import RunStore

    with RunStore(tmp_path / "runs.sqlite") as runs:
        recording = runs.load("durable-1")
        entries = runs.progress("durable-1")
    assert recording.status == "done" and recording.output == "paid and held: order-1"
    assert recording.meta["factory"] == "dbos_agent_app:agent"
    pids = [w["pid"] for w in recording.meta["placement"]["where"]]
    assert len(set(pids)) == 2 and pids[-1] == recording.meta["placement"]["pid"]
    done = [(e["phase"], e.get("iteration"), e.get("index")) for e in entries
            if e.get("phase") in ("started", "done")]
    assert len(done) == len(set(done))  # one continuous recording: nothing appended twice
