"""Concurrent runs of one conversation on one SQLite file never get the same turn."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from memory_helpers import entry

from agentfootprint.memory import MemoryIdentity, SQLiteStore, resolve_turn_number

CONV = MemoryIdentity("shared-conversation")
RUNS = 20


async def one_run(path: Path) -> int:
    async with SQLiteStore(path, busy_timeout_ms=30_000) as store:
        turn = await resolve_turn_number(stores=[store], identity=CONV)
        await store.put_many(CONV, [entry(f"msg-{turn}-{i}", turn=turn) for i in range(2)])
        return turn


async def all_ids(path: Path) -> set[str]:
    async with SQLiteStore(path) as store:
        page = await store.list(CONV, limit=1000)
        return {e.id for e in page.entries}


async def test_two_asyncio_tasks_get_distinct_turns(tmp_path: Path) -> None:
    """Two tasks resolving at once against one file get turns 1 and 2."""
    turns = await asyncio.gather(one_run(tmp_path / "m.db"), one_run(tmp_path / "m.db"))
    assert sorted(turns) == [1, 2]


async def test_twenty_asyncio_tasks_distinct_turns_nothing_lost(tmp_path: Path) -> None:
    """Twenty concurrent tasks get twenty distinct turns and all forty messages survive."""
    turns = await asyncio.gather(*(one_run(tmp_path / "m.db") for _ in range(RUNS)))
    assert sorted(turns) == list(range(1, RUNS + 1))
    assert len(await all_ids(tmp_path / "m.db")) == 2 * RUNS


def run_processes(path: Path, count: int) -> list[int]:
    worker = Path(__file__).with_name("turn_worker.py")
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(path), CONV.conversation_id],
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


async def test_two_processes_get_distinct_turns(tmp_path: Path) -> None:
    """Two processes resolving at once against one file get turns 1 and 2."""
    SQLiteStore(tmp_path / "m.db").close()
    assert sorted(await asyncio.to_thread(run_processes, tmp_path / "m.db", 2)) == [1, 2]


async def test_twenty_processes_distinct_turns_nothing_lost(tmp_path: Path) -> None:
    """Twenty processes at once get twenty distinct turns and all forty messages survive."""
    SQLiteStore(tmp_path / "m.db").close()
    turns = await asyncio.to_thread(run_processes, tmp_path / "m.db", RUNS)
    assert sorted(turns) == list(range(1, RUNS + 1))
    assert len(await all_ids(tmp_path / "m.db")) == 2 * RUNS


async def test_fresh_process_per_turn_five_turns(tmp_path: Path) -> None:
    """Five turns, each a fresh process sharing the file, leave msg-1-* … msg-5-* all present."""
    SQLiteStore(tmp_path / "m.db").close()
    for expected in range(1, 6):
        assert await asyncio.to_thread(run_processes, tmp_path / "m.db", 1) == [expected]
    assert await all_ids(tmp_path / "m.db") == {
        f"msg-{t}-{i}" for t in range(1, 6) for i in range(2)
    }
