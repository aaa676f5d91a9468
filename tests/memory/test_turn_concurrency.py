"""Concurrent runs of one conversation on one shared store never get the same turn.

Runs on a SQLite file, on Redis (when ``AGENTFOOTPRINT_REDIS_URL`` is set) and on PostgreSQL
(when ``AGENTFOOTPRINT_PG_URL`` is set); under CI both servers are required.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from memory_helpers import (
    drop_pg_schema,
    drop_redis_prefix,
    entry,
    pg_schema,
    pg_url,
    redis_prefix,
    redis_url,
)
from turn_worker import open_store

from agentfootprint.memory import MemoryIdentity, SQLiteStore, resolve_turn_number

CONV = MemoryIdentity("shared-conversation")
RUNS = 20


@dataclass(frozen=True)
class Backend:
    """Where every run of a test writes: a SQLite file, or a Redis URL plus a key prefix."""

    kind: str
    target: str
    prefix: str = ""

    def worker_args(self) -> list[str]:
        return [self.kind, self.target, CONV.conversation_id, self.prefix]


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "m.db"
        SQLiteStore(path).close_sync()
        yield Backend("sqlite", str(path))
        return
    if request.param == "postgres":
        schema = pg_schema()
        yield Backend("postgres", pg_url(), schema)
        drop_pg_schema(schema)
        return
    prefix = redis_prefix()
    yield Backend("redis", redis_url(), prefix)
    drop_redis_prefix(prefix)


async def one_run(backend: Backend) -> int:
    async with open_store(backend.kind, backend.target, backend.prefix) as store:
        turn = await resolve_turn_number(stores=[store], identity=CONV)
        await store.put_many(CONV, [entry(f"msg-{turn}-{i}", turn=turn) for i in range(2)])
        return turn


async def all_ids(backend: Backend) -> set[str]:
    async with open_store(backend.kind, backend.target, backend.prefix) as store:
        page = await store.list(CONV, limit=1000)
        return {e.id for e in page.entries}


async def test_two_asyncio_tasks_get_distinct_turns(backend: Backend) -> None:
    """Two tasks resolving at once against one store get turns 1 and 2."""
    turns = await asyncio.gather(one_run(backend), one_run(backend))
    assert sorted(turns) == [1, 2]


async def test_twenty_asyncio_tasks_distinct_turns_nothing_lost(backend: Backend) -> None:
    """Twenty concurrent tasks get twenty distinct turns and all forty messages survive."""
    turns = await asyncio.gather(*(one_run(backend) for _ in range(RUNS)))
    assert sorted(turns) == list(range(1, RUNS + 1))
    assert len(await all_ids(backend)) == 2 * RUNS


def run_processes(backend: Backend, count: int) -> list[int]:
    worker = Path(__file__).with_name("turn_worker.py")
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), *backend.worker_args()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(count)
    ]
    turns = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        turns.append(int(out.strip()))
    return turns


async def test_two_processes_get_distinct_turns(backend: Backend) -> None:
    """Two processes resolving at once against one store get turns 1 and 2."""
    assert sorted(await asyncio.to_thread(run_processes, backend, 2)) == [1, 2]


async def test_twenty_processes_distinct_turns_nothing_lost(backend: Backend) -> None:
    """Twenty processes at once get twenty distinct turns and all forty messages survive."""
    turns = await asyncio.to_thread(run_processes, backend, RUNS)
    assert sorted(turns) == list(range(1, RUNS + 1))
    assert len(await all_ids(backend)) == 2 * RUNS


async def test_fresh_process_per_turn_five_turns(backend: Backend) -> None:
    """Five turns, each a fresh process sharing the store, leave msg-1-* … msg-5-* all present."""
    for expected in range(1, 6):
        assert await asyncio.to_thread(run_processes, backend, 1) == [expected]
    assert await all_ids(backend) == {f"msg-{t}-{i}" for t in range(1, 6) for i in range(2)}
