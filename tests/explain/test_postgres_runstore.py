"""PostgresRunStore: a recording saved by one process is explained by another, via PostgreSQL.

Needs ``AGENTFOOTPRINT_PG_URL`` (skipped locally when unset, a failure under CI), except the
refusals that happen before connecting.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from agentfootprint import RunError
from agentfootprint._demo import PLANTED, QUESTION, make_refund_agent
from agentfootprint.errors import ConfigurationError
from agentfootprint.explain import backtrack
from agentfootprint.runs import PostgresRunStore, Recording

PG_URL_ENV = "AGENTFOOTPRINT_PG_URL"

SCRIPT = """
import sys
from agentfootprint.explain import backtrack
from agentfootprint.runs import PostgresRunStore
with PostgresRunStore(sys.argv[1], schema=sys.argv[2], create_schema=False) as store:
    chain = backtrack(store.load(sys.argv[3]).commit_log(), suspect="customer-profile")
print(str(chain))
print("SYSTEM:" + chain.system_prompt)
"""


@pytest.fixture
def url(pg_url: str) -> str:
    return pg_url


@pytest.fixture
def schema(pg_schema: str) -> str:
    return pg_schema


def recording(run_id: str, created_at: float, output: object = "ok") -> Recording:
    return Recording(
        run_id=run_id,
        kind="flow",
        name=f"flow {run_id}",
        status="done",
        created_at=created_at,
        chart={},
        log={"initial": {}, "records": []},
        output=output,
    )


async def test_backtrack_from_a_stored_recording_in_a_fresh_process(url: str, schema: str) -> None:
    """A recording saved to PostgreSQL and loaded by another process gives the same chain."""
    result = await make_refund_agent().run(QUESTION)
    live = backtrack(result, suspect="customer-profile")
    with PostgresRunStore(url, schema=schema) as store:
        saved = store.save(result)
    assert saved.run_id == result.run_id
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, url, schema, result.run_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    chain_text, system = done.stdout.split("SYSTEM:", 1)
    assert chain_text.strip() == str(live).strip()
    assert system.rstrip("\n") == live.system_prompt
    assert PLANTED in live.system_prompt


def test_list_newest_first_and_a_resave_updates_the_same_run(url: str, schema: str) -> None:
    """list() is newest first (ties by run id, descending); saving the same run again updates
    its row in place (a run id is bound to one run, so its place in the list is kept)."""
    with PostgresRunStore(url, schema=schema) as store:
        for run_id, at in (("a", 1.0), ("c", 2.0), ("b", 2.0), ("B", 2.0)):
            store.save(recording(run_id, at))
        assert [r.run_id for r in store.list()] == ["c", "b", "B", "a"]
        assert [r.run_id for r in store.list(limit=2)] == ["c", "b"]
        store.save(recording("a", 3.0, output="second"))
        summaries = store.list()
        assert [r.run_id for r in summaries] == ["c", "b", "B", "a"]
        assert summaries[-1].preview == "second" and summaries[-1].name == "flow a"
        assert store.load("a").output == "second"


def test_recordings_round_trip_as_strict_json_including_nan(url: str, schema: str) -> None:
    """A recording is strict JSON: Infinity is kept as the string "Infinity" (never a bare
    token jsonb or any other reader would refuse), and the body comes back unchanged."""
    with PostgresRunStore(url, schema=schema) as store:
        store.save(recording("r", 1.0, output={"x": math.inf, "y": [1.5, None]}))
        loaded = store.load("r")
    assert loaded.output == {"x": "Infinity", "y": [1.5, None]}
    assert loaded.to_json() == recording("r", 1.0, {"x": math.inf, "y": [1.5, None]}).to_json()


def test_errors_are_clear_and_lose_nothing(url: str, schema: str) -> None:
    """A missing run names the store; an unreadable row raises instead of reading as empty."""
    import psycopg

    with PostgresRunStore(url, schema=schema) as store:
        with pytest.raises(KeyError, match="the store is empty"):
            store.load("missing")
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute(
                f"INSERT INTO {schema}.af_runs VALUES ('bad', 'n', 'agent', 'done', 1.0, '', '{{')"
            )
        with pytest.raises(
            RunError, match=rf"run 'bad' in PostgresRunStore.*{schema}.* unreadable"
        ):
            store.load("bad")
        with pytest.raises(KeyError, match=r"recent: bad"):
            store.load("missing")
        assert [r.run_id for r in store.list()] == ["bad"]


def test_caller_connection_is_left_open(url: str, schema: str) -> None:
    """With conn= the store uses the caller's connection and close() leaves it to its owner."""
    import psycopg

    with psycopg.connect(url) as conn:
        store = PostgresRunStore(conn=conn, schema=schema)
        store.save(recording("r", 1.0))
        store.close()
        assert not conn.closed
    with PostgresRunStore(url, schema=schema, create_schema=False) as other:
        assert other.load("r").run_id == "r"


def test_refusals_before_connecting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bad identifiers, no connection source, no server and no driver all say what to fix."""
    with pytest.raises(ConfigurationError, match="exactly one of url= or conn="):
        PostgresRunStore()
    with pytest.raises(ConfigurationError, match="table="):
        PostgresRunStore("postgresql://localhost/db", table="runs; DROP TABLE x")
    with pytest.raises(ConfigurationError, match="cannot open the run store") as info:
        PostgresRunStore(f"postgresql://u:s3cret@/db?host={tmp_path}", connect_timeout=2)
    assert "s3cret" not in str(info.value)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[postgres\]"'):
        PostgresRunStore("postgresql://localhost/db")
