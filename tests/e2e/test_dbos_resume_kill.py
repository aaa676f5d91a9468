"""``agent.resume(checkpoint, answer)`` on ``Agent(..., executor=dbos_executor(...))`` survives
``kill -9``: a run paused for consent is resumed approved, the resumed part (a DBOS workflow of
its own) is killed inside its second tool, and another process that launches the executor and
resumes the same checkpoint gets the final answer — the approved tool and the model call after
it are not executed again, the killed tool is (at least once), and the run store keeps one
recording whose placement names the resumed part's workflow in both attempts."""

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
    return run_child("dbos_resume_app", env)[0]


def test_a_resumed_part_killed_mid_tool_is_recovered_by_another_process(
        tmp_path: Path) -> None:
    env = {**os.environ, "DBOS_RESUME_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    assert _child({**env, "DBOS_RESUME_BLOCK": "1"}) == "killed"
    assert json.loads(_child(env)) == [
        "RunResult", "done", "refunded and held: order-1", "resume-1", 3]

    with sqlite3.connect(tmp_path / "counters.sqlite") as db:
        rows = db.execute("SELECT kind, key, pid FROM executed").fetchall()
    executed = Counter((kind, key) for kind, key, _ in rows)
    assert executed[("refund", "resume-1:r1")] == 1  # approved, run, recorded: never again
    assert executed[("llm", "order-1#0")] == executed[("llm", "order-1#1")] == 1
    assert executed[("hold", "resume-1:h1")] == 2  # killed mid-call: run again
    assert executed[("llm", "order-1#2")] == 1
    hold_pids = [pid for kind, _, pid in rows if kind == "hold"]
    assert len(set(hold_pids)) == 2 and os.getpid() not in hold_pids

    from agentfootprint.runs import RunStore

    with RunStore(tmp_path / "runs.sqlite") as runs:
        recording = runs.load("resume-1")
        entries = runs.progress("resume-1")
    assert recording.status == "done" and recording.output == "refunded and held: order-1"
    where = recording.meta["placement"]["where"]
    resumed = where[1]["workflow"]
    assert [w["workflow"] for w in where] == ["resume-1", resumed, resumed]
    assert resumed.startswith("resume-1.resume-")
    assert where[0]["pid"] == where[1]["pid"] == hold_pids[0]
    assert where[2]["pid"] == hold_pids[1] == recording.meta["placement"]["pid"]
    done = [(e["phase"], e.get("iteration"), e.get("index")) for e in entries
            if e.get("phase") in ("started", "done")]
    assert len(done) == len(set(done))  # one continuous recording: nothing appended twice
