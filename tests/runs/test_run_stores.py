"""The run stores in runs/: versioned schemas, query tables beside the bodies, and old files.

``fixtures/runs_v1.db`` was written by the run store as it was before schema versions (bodies
only): three agent runs (one with a tool and a fact, two turns of a memory conversation) and a
plain flow. It must still open, be upgraded in place, and answer SQL about its runs.
PostgreSQL cases need ``AGENTFOOTPRINT_PG_URL`` (skipped locally when unset, a failure under CI).
"""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from agentfootprint import Agent, Tracing, define_fact, tool
from agentfootprint.errors import ConfigurationError, RunError
from agentfootprint.providers import mock
from agentfootprint.runs import PostgresRunStore, Recording, RunStore
from agentfootprint.runs._store import RUN_STORE_SCHEMA, RunStorePort

FIXTURE = Path(__file__).parent / "fixtures" / "runs_v1.db"
PG_URL_ENV = "AGENTFOOTPRINT_PG_URL"


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 22C, sunny"


def _weather_agent(store: RunStorePort | None = None) -> Agent:
    return Agent(provider=mock(script=[
        {"tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]}, "Cold and clear."]),
        name="Weather", system="Answer weather questions.", tools=[weather],
        context=[define_fact(id="units", data="The user prefers Celsius.")],
                 tracing=Tracing(run_store=store))


def test_a_schema_1_file_opens_upgraded_with_its_query_tables(tmp_path: Path) -> None:
    """Today's main wrote bodies only; opening it adds the query tables, rebuilt from them."""
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURE, path)
    with RunStore(path) as store:
        runs = store.list()
        assert sorted(r.name for r in runs) == ["Chat", "Chat", "Receive", "Weather"]
        for run in runs:
            assert store.load(run.run_id).run_id == run.run_id
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == RUN_STORE_SCHEMA
    assert db.execute("SELECT name, llm_calls, tool_calls FROM runs WHERE name = 'Weather'"
                      ).fetchone() == ("Weather", 2, 1)
    assert db.execute("SELECT t.name FROM tool_calls t JOIN runs r USING (run_id) "
                      "WHERE r.name = 'Weather'").fetchall() == [("weather",)]
    assert ("units", "system") in db.execute(
        "SELECT injection_id, slot FROM injections").fetchall()
    memory = db.execute("SELECT count(*) FROM injections WHERE injection_id LIKE 'memory:chat#%'"
                        ).fetchone()[0]
    assert memory >= 1  # turn 2 recalled turn 1's entries
    assert db.execute("SELECT llm_calls FROM runs WHERE kind = 'flow'").fetchone() == (0,)
    db.close()
    with RunStore(path) as again:  # a second open finds it current and changes nothing
        assert len(again.list()) == 4


def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A file from a newer release is not rewritten or read as empty."""
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURE, path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(ConfigurationError, match="schema version 99, newer"):
        RunStore(path)
    assert sqlite3.connect(path).execute("SELECT count(*) FROM runs").fetchone() == (4,)


def test_saving_fills_the_query_tables_and_a_resave_replaces_them(tmp_path: Path) -> None:
    """One row a call with its model and tokens, one a tool call; no duplicates on resave."""
    store = RunStore(tmp_path / "runs.db")
    result = _weather_agent(store).run_sync("Weather in Oslo?")
    store.save(result)  # the same run id again: its rows are replaced, not doubled
    db = sqlite3.connect(tmp_path / "runs.db")
    calls = db.execute("SELECT model, provider, input_tokens >= 0, stop_reason, tool_calls "
                       "FROM llm_calls WHERE run_id = ? ORDER BY call_idx",
                       (result.run_id,)).fetchall()
    assert calls == [("mock", "mock", 1, "tool_use", 1), ("mock", "mock", 1, "stop", 0)]
    assert db.execute("SELECT count(*) FROM tool_calls").fetchone() == (1,)
    assert db.execute("SELECT input_tokens, output_tokens FROM runs").fetchone() == (
        result.input_tokens, result.output_tokens)
    store.close()


def test_a_recording_of_an_unknown_format_is_refused_by_name() -> None:
    """Another release's format, or text that is no recording, gets a clear error."""
    with pytest.raises(RunError, match=r"format .agentfootprint\.recording\.v9. is not one"):
        Recording.from_json(json.dumps({"format": "agentfootprint.recording.v9"}))
    with pytest.raises(RunError, match="not JSON"):
        Recording.from_json("{")
    with pytest.raises(RunError, match="malformed"):
        Recording.from_json(json.dumps({"format": "agentfootprint.recording.v1"}))


@pytest.mark.parametrize("old, name", [
    ("agentfootprint.explain.recording", "Recording"),
    ("agentfootprint.explain.runstore", "RunStore"),
    ("agentfootprint.explain.runstore_postgres", "PostgresRunStore"),
])
def test_a_moved_module_still_imports_and_warns(old: str, name: str) -> None:
    """Users' imports keep working for one release, with a warning naming the new path."""
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match="agentfootprint.runs"):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module("agentfootprint.runs"), name)


@pytest.mark.parametrize("name", ["Recording", "RunStore", "RunSummary", "PostgresRunStore"])
def test_a_moved_name_still_reads_from_explain_and_warns(name: str) -> None:
    """``from agentfootprint.explain import RunStore`` still works, and says where it went."""
    explain = importlib.import_module("agentfootprint.explain")
    with pytest.warns(DeprecationWarning, match=f"from agentfootprint.runs import {name}"):
        found = getattr(explain, name)
    assert found is getattr(importlib.import_module("agentfootprint.runs"), name)


# -- PostgreSQL ----------------------------------------------------------------------------------


@pytest.fixture
def url(pg_url: str) -> str:
    return pg_url


@pytest.fixture
def schema(pg_schema: str) -> str:
    return pg_schema


def test_postgres_upgrades_a_schema_1_table(url: str, schema: str) -> None:
    """A table written before versions (bodies only) gains its query tables, filled."""
    import psycopg
    from psycopg import sql

    bodies = sqlite3.connect(FIXTURE).execute(
        "SELECT run_id, name, kind, status, created_at, preview, body FROM runs").fetchall()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        table = sql.Identifier(schema, "af_runs")
        conn.execute(sql.SQL(  # the schema-1 layout, as today's main creates it
            "CREATE TABLE {} (run_id text PRIMARY KEY, name text NOT NULL, kind text NOT NULL, "
            "status text NOT NULL, created_at double precision NOT NULL, preview text NOT NULL, "
            "body text NOT NULL)").format(table))
        with conn.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s)"
                                    ).format(table), bodies)
    with PostgresRunStore(url, schema=schema) as store:
        assert len(store.list()) == 4
    with psycopg.connect(url, autocommit=True) as conn:
        calls = conn.execute(sql.SQL("SELECT r.llm_calls, count(c.*) FROM {} r JOIN {} c "
                                     "USING (run_id) WHERE r.name = 'Weather' GROUP BY 1").format(
            table, sql.Identifier(schema, "af_runs_llm_calls"))).fetchall()
        assert calls == [(2, 2)]
        version = conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema'").format(
            sql.Identifier(schema, "af_runs_meta"))).fetchone()
        assert version == (str(RUN_STORE_SCHEMA),)


def test_postgres_saves_query_rows(url: str, schema: str) -> None:
    """Saving through PostgreSQL fills the same tables as SQLite, once per run."""
    import psycopg
    from psycopg import sql

    with PostgresRunStore(url, schema=schema) as store:
        result = _weather_agent(store).run_sync("Weather in Oslo?")
        store.save(result)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT name FROM {}").format(
            sql.Identifier(schema, "af_runs_tool_calls"))).fetchall()
    assert rows == [("weather",)]
