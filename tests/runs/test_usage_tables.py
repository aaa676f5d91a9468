"""The run store's usage columns: a schema-3 file (before cached tokens, cost and latency) is
upgraded in place and its llm_calls rows are rebuilt, filled, from the stored bodies."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentfootprint import Agent, Budget
from agentfootprint.providers import Price, mock
from agentfootprint.runs import RunStore
from agentfootprint.runs._store import RUN_STORE_SCHEMA

NEW_CALL_COLUMNS = ("cache_read_tokens", "cache_write_tokens", "cost_usd", "latency_ms")


async def test_a_schema_3_file_gets_the_usage_columns_filled_from_the_bodies(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    agent = Agent(provider=mock(script=[{"content": "hi", "usage": {
        "input": 1000, "output": 10, "cache_read": 800}}]), model="house-model",
        budget=Budget(prices={"house-model": Price(input=1, output=2, cache_read=0.5)}))
    result = await agent.run("go")
    with RunStore(path) as store:
        store.save(result)
    db = sqlite3.connect(path)
    for column in NEW_CALL_COLUMNS:  # back to what a schema-3 file held
        db.execute(f"ALTER TABLE llm_calls DROP COLUMN {column}")
    for column in ("cache_read_tokens", "cache_write_tokens", "cost_usd"):
        db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    with RunStore(path):
        pass  # opening upgrades it
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == RUN_STORE_SCHEMA
    row = db.execute("SELECT input_tokens, cache_read_tokens, cache_write_tokens, cost_usd, "
                     "latency_ms FROM llm_calls").fetchone()
    assert row[:3] == (1000, 800, 0)
    assert row[3] == pytest.approx((200 * 1 + 800 * 0.5 + 10 * 2) / 1_000_000)
    assert isinstance(row[4], float)
    assert db.execute("SELECT cache_read_tokens, cost_usd FROM runs").fetchone() == (
        800, pytest.approx(row[3]))
    db.close()
