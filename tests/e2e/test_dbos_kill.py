"""DBOS acceptance: 20 agent runs, each process ``kill -9``ed at seeded points, recovered by
the next process; every run completes, every tool call applies its effect once, and each
recording equals the uninterrupted one's in the normal form (backtrack gives the same chain).

How the kills land where the seed says: every run has seeded *points* — inside the model call,
inside a tool before its effect, inside a tool after its effect — and blocks forever when it
reaches the point its plan names for this process. When every run of the process has either
finished or blocked at its point, the child prints ``KILLME`` and this test sends it SIGKILL:
one kill interrupts every run exactly where its plan says. The next process launches the
executor (DBOS recovers the pending workflows), and the runs go on to their next planned point
or to the end. Three processes per backend; the SQLite counter database holds, per tool call's
idempotency key, the attempts the tool saw and the effect it applied, and per model call its
attempts.

The agent and the child process live in ``dbos_kill_app.py`` (no pytest: children start fast).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _killable import run_child

pytestmark = pytest.mark.e2e
pytest.importorskip("dbos")

from dbos_kill_app import _init_counters, _points_of, _rounds  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNS = 20
SEED = 20_2026
ROUNDS = 3  # processes per backend: two are killed, the third finishes

# -- the test -----------------------------------------------------------------------------


def _child(env: dict[str, str]) -> tuple[str, int | None]:
    return run_child("dbos_kill_app", env)


def _normal(recording: Any) -> Any:
    from agentfootprint.distributed import normal_form

    return normal_form(recording)


def _chain(recording: Any, run_id: str) -> str:
    from agentfootprint.explain import backtrack

    return str(backtrack(recording)).replace(run_id, "<run>")


def _scenario(tmp_path: Path, system_database: str, store: str,
              open_store: Any) -> None:
    counters = tmp_path / "counters.sqlite"
    _init_counters(counters)
    rng = random.Random(SEED)
    labels = [f"order-{i}" for i in range(RUNS)]
    run_ids = {label: f"dbos-{uuid.uuid4().hex[:12]}-{label}" for label in labels}
    plans: list[dict[str, int]] = [
        {label: rng.randint(1, _points_of(label)) for label in labels},
        {label: rng.randint(1, 3) for label in labels if rng.random() < 0.5},
        {}]
    base = {**os.environ, "DBOS_KILL_COUNTERS": str(counters),
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    outcomes: list[dict[str, Any]] = []
    ended = []
    for number, plan in enumerate(plans):
        job = {"system_database": system_database, "store": store, "runs": run_ids,
               "start": number == 0}
        said, rc = _child({**base, "DBOS_KILL_PLAN": json.dumps(plan),
                           "DBOS_KILL_JOB": json.dumps(job)})
        ended.append((said if said == "killed" else "done", rc))
        if said != "killed":
            outcomes = json.loads(said)
            break
    assert ended[:2] == [("killed", -signal.SIGKILL)] * 2, ended  # a recovery killed too
    assert outcomes, f"the runs did not complete in {len(plans)} processes: {ended}"

    # every run completed, in more than one attempt
    assert [o["status"] for o in outcomes] == ["done"] * RUNS, outcomes
    assert all(o["placement"]["attempts"] >= 2 for o in outcomes), \
        [o["placement"] for o in outcomes]
    conn = sqlite3.connect(counters)
    kills = conn.execute("SELECT run, point, step FROM kills").fetchall()
    assert {run for run, _, _ in kills} == set(labels)  # each run was killed at its point
    assert {point for _, point, _ in kills} == {"model-call", "tool-before-effect",
                                                "tool-after-effect"}, kills
    killed_at = {}
    for _, _, step in kills:
        killed_at[step] = killed_at.get(step, 0) + 1
    # each tool call applied its effect once, and ran again only when a kill cut it short
    expected_calls = sum(1 + (d + int(label.split("-")[1])) % 2
                         for label in labels for d in range(_rounds(label)))
    effects = conn.execute("SELECT key, applied FROM effects").fetchall()
    assert len(effects) == expected_calls and all(applied == 1 for _, applied in effects)
    for key, attempts in conn.execute(
            "SELECT key, count(*) FROM tool_attempts GROUP BY key").fetchall():
        assert attempts == 1 + killed_at.get(key, 0), (key, attempts, killed_at.get(key))
        assert key.startswith(tuple(run_ids.values()))  # the key is {run_id}:{call id}
    # a finished model call was never made again; one cut short was
    for run, step, attempts in conn.execute(
            "SELECT run, step, count(*) FROM llm_attempts GROUP BY run, step").fetchall():
        cut = sum(1 for r, _, s in kills if r == run and s == f"llm:{step}")
        assert attempts == 1 + cut, (run, step, attempts)
    conn.close()

    # the recordings equal uninterrupted runs' in the normal form; backtrack the same chain
    os.environ["DBOS_KILL_COUNTERS"] = str(tmp_path / "reference.sqlite")
    _init_counters(tmp_path / "reference.sqlite")
    try:
        from agentfootprint.distributed import run_many

        reference_ids = [f"ref-{uuid.uuid4().hex[:12]}" for _ in labels]
        sys.path.insert(0, str(HERE))
        done = asyncio.run(run_many("dbos_kill_app:make_agent",
                                    [f"pay {label} now" for label in labels],
                                    store=str(tmp_path / "reference-runs.sqlite"),
                                    run_ids=reference_ids))
        assert [o.status for o in done] == ["done"] * RUNS
    finally:
        del os.environ["DBOS_KILL_COUNTERS"]
    from agentfootprint.runs import RunStore

    reference = RunStore(tmp_path / "reference-runs.sqlite")
    recovered = open_store()
    try:
        for label, ref_id in zip(labels, reference_ids, strict=True):
            ours = recovered.load(run_ids[label])
            theirs = reference.load(ref_id)
            assert ours.meta["placement"]["attempts"] >= 2
            assert _normal(ours) == _normal(theirs), label
            assert _chain(ours, run_ids[label]) == _chain(theirs, ref_id), label
            entries = [e for e in recovered.progress(run_ids[label])
                       if e.get("phase") in ("started", "done")]
            keys = [(e["phase"], e["iteration"], e["index"]) for e in entries]
            assert len(keys) == len(set(keys)), f"{label}: progress entries repeated: {keys}"
    finally:
        reference.close()
        recovered.close()


def test_dbos_runs_survive_kill_9_on_sqlite(tmp_path: Path) -> None:
    """20 runs, SQLite system database and run store: see the module."""
    from agentfootprint.runs import RunStore

    store = tmp_path / "runs.sqlite"
    _scenario(tmp_path, f"sqlite:///{tmp_path / 'dbos.sqlite'}", str(store),
              lambda: RunStore(store))


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[str]:
    """A database of its own (DBOS's system tables and the run store), dropped at the end."""
    import psycopg

    name = f"aftest_dbos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = re.sub(r"(postgres(?:ql)?://[^/]*/)[^?]*", lambda m: m.group(1) + name, pg_url,
                 count=1)
    try:
        yield url
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_dbos_runs_survive_kill_9_on_postgres(tmp_path: Path, pg_database: str) -> None:
    """The same 20 runs with DBOS's system database and the run store on PostgreSQL."""
    from agentfootprint.runs import PostgresRunStore

    _scenario(tmp_path, pg_database, pg_database, lambda: PostgresRunStore(pg_database))
