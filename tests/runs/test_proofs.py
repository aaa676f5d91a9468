"""Proofs kept with a run: append-only JSON objects, read back in the order added, on both stores.

A proof (a re-run's verdict) belongs to a saved run; adding one to a run the store does not
hold is a ``KeyError`` naming the run, and a proof that is not a JSON object is refused before
the store is touched. PostgreSQL cases need ``AGENTFOOTPRINT_PG_URL`` (see test_run_stores).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from agentfootprint import Agent, Tracing
from agentfootprint.providers import mock
from agentfootprint.runs import PostgresRunStore, RunStore
from agentfootprint.runs._store import RUN_STORE_SCHEMA, RunStorePort

FIXTURE = Path(__file__).parent / "fixtures" / "runs_v1.db"


async def _saved_run(store: RunStorePort) -> str:
    agent = Agent(provider=mock(reply="ok"), model="m", tracing=Tracing(run_store=store))
    return (await agent.run("hi")).run_id


def _check_proofs(store: RunStorePort, run_id: str) -> None:
    assert store.proofs(run_id) == []
    store.add_proof(run_id, {"suspect": "fact:units", "verdict": "CAUSAL", "flips": [5, 5]})
    store.add_proof(run_id, {"suspect": "fact:tz", "verdict": "not causal", "note": "é"})
    assert store.proofs(run_id) == [
        {"suspect": "fact:units", "verdict": "CAUSAL", "flips": [5, 5]},
        {"suspect": "fact:tz", "verdict": "not causal", "note": "é"}]
    with pytest.raises(KeyError, match="no run 'nope'"):
        store.add_proof("nope", {"verdict": "x"})
    with pytest.raises(KeyError, match="no run 'nope'"):
        store.proofs("nope")
    with pytest.raises(TypeError, match="must be a JSON object"):
        store.add_proof(run_id, ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not plain JSON"):
        store.add_proof(run_id, {"score": float("nan")})
    assert len(store.proofs(run_id)) == 2  # the refused ones left nothing behind


async def test_sqlite_keeps_proofs_in_order_and_refuses_unknown_runs(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        _check_proofs(store, await _saved_run(store))


async def test_sqlite_proofs_survive_reopening(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        run_id = await _saved_run(store)
        store.add_proof(run_id, {"n": 1})
    with RunStore(tmp_path / "runs.db") as again:
        again.add_proof(run_id, {"n": 2})
        assert again.proofs(run_id) == [{"n": 1}, {"n": 2}]


def test_a_schema_1_file_takes_proofs_after_its_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURE, path)
    with RunStore(path) as store:
        run_id = store.list()[0].run_id
        store.add_proof(run_id, {"verdict": "CAUSAL"})
        assert store.proofs(run_id) == [{"verdict": "CAUSAL"}]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == RUN_STORE_SCHEMA
    db.close()


def test_a_schema_2_file_gains_the_proofs_table_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURE, path)
    with RunStore(path):
        pass
    db = sqlite3.connect(path)  # make it look as a schema-2 release left it
    db.execute("DROP TABLE proofs")
    db.execute("DROP TABLE progress")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    with RunStore(path) as store:
        assert len(store.list()) == 4
        run_id = store.list()[0].run_id
        store.add_proof(run_id, {"ok": True})
        assert store.proofs(run_id) == [{"ok": True}]


async def test_postgres_keeps_proofs_in_order_and_refuses_unknown_runs(
        pg_url: str, pg_schema: str) -> None:
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        _check_proofs(store, await _saved_run(store))
