"""Run-store I/O off the event loop (``runs/_writer.py``): every run stored, none of its I/O on
the loop's thread, writes in the order asked, bounded, nothing lost at close or exit, and a
failing store's error raised in the run that caused it."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, Tracing, tool
from agentfootprint.errors import RunError
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import Recording, RunStore
from agentfootprint.runs._writer import StoreWriter, writer_for


class _Watched:
    """A sqlite3 connection that notes the thread of every statement (and can fail some)."""

    def __init__(self, db: sqlite3.Connection, fail_on: str | None = None) -> None:
        self._db = db
        self.threads: set[int] = set()
        self.fail_on = fail_on

    def _note(self, sql: str) -> None:
        self.threads.add(threading.get_ident())
        if self.fail_on is not None and self.fail_on in sql:
            raise sqlite3.OperationalError(f"disk I/O error (injected on {self.fail_on!r})")

    def execute(self, sql: str, *args: Any) -> Any:
        self._note(sql)
        return self._db.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        self._note(sql)
        return self._db.executemany(sql, *args)

    def close(self) -> None:
        self._db.close()


def _watch(store: RunStore, fail_on: str | None = None) -> _Watched:
    watched = _Watched(store._db, fail_on)
    store._db = watched  # type: ignore[assignment]
    return watched


def _agent(store: Any, seen: list[str] | None = None) -> Agent:
    @tool(side_effects=False)
    async def lookup(key: str) -> str:
        """Look a key up."""
        if seen is not None:
            seen.append(key)
        return f"{key}: ok"

    def respond(request: LLMRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"key": "k"}}]}
        return "done"

    return Agent(provider=mock(respond=respond), model="mock", tools=[lookup],
                 tracing=Tracing(run_store=store))


def _recording(run_id: str) -> Recording:
    return Recording(run_id=run_id, kind="flow", name="Flow", status="done",
                     created_at=time.time(), chart={"id": "s"},
                     log={"initial": {}, "records": []})


async def test_500_concurrent_completions_are_stored_with_no_store_io_on_the_loop(
        tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    watched = _watch(store)
    agent = _agent(store)
    loop_thread = threading.get_ident()
    results = await asyncio.gather(*(agent.run("go", run_id=f"r{i:03d}") for i in range(500)))
    assert {r.content for r in results} == {"done"}
    assert watched.threads and loop_thread not in watched.threads
    rows = store._db.execute("SELECT count(*), count(DISTINCT run_id) FROM runs WHERE "
                             "status = 'done'").fetchone()
    entries = store._db.execute("SELECT count(*) FROM progress").fetchone()[0]
    store.close()
    assert tuple(rows) == (500, 500)
    assert entries == 1000  # each run's tool call: started, then done


async def test_a_run_is_in_its_store_with_its_entry_before_its_tool_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = RunStore(path)
    seen: list[Any] = []

    @tool(side_effects=False)
    async def lookup(key: str) -> str:
        """Look a key up (and what another reader of the store sees meanwhile)."""
        with sqlite3.connect(path) as other:
            seen.append(other.execute("SELECT status FROM runs").fetchall())
            seen.append(other.execute("SELECT body FROM progress").fetchall())
        return "ok"

    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"key": "k"}}]}, "done"]),
        model="mock", tools=[lookup], tracing=Tracing(run_store=store))
    await agent.run("go", run_id="vis")
    store.close()
    assert seen[0] == [("running",)]
    assert len(seen[1]) == 1 and '"phase": "started"' in seen[1][0][0]


async def test_a_failing_progress_write_fails_the_run_that_asked(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    _watch(store, fail_on="INSERT INTO progress")
    seen: list[str] = []
    with pytest.raises(RunError, match="failed to record the progress of run 'p1'"):
        await _agent(store, seen).run("go", run_id="p1")
    assert seen == []  # the call's entry was not stored, so the call never ran
    store.close()


async def test_a_failing_save_is_raised_from_run_with_a_note(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    _watch(store, fail_on="ON CONFLICT (run_id) DO UPDATE")
    with pytest.raises(RunError, match="failed to save run 's1'") as caught:
        await _agent(store).run("go", run_id="s1")
    assert any("could not record it" in note for note in caught.value.__notes__)
    store.close()


class _SlowStore(RunStore):
    def save(self, result: Any, *, meta: dict[str, Any] | None = None) -> Recording:
        time.sleep(0.01)
        return super().save(result, meta=meta)


async def test_close_waits_for_the_writes_of_cancelled_callers(tmp_path: Path) -> None:
    store = _SlowStore(tmp_path / "runs.db")
    writer = writer_for(store)
    tasks = [asyncio.create_task(writer.call(store.save, _recording(f"c{i}")))
             for i in range(20)]
    await asyncio.sleep(0)
    assert writer.pending() > 1
    for task in tasks:
        task.cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
    store.close()
    with RunStore(tmp_path / "runs.db") as again:
        assert len(again.list(limit=100)) == 20


def test_writes_pending_at_interpreter_exit_land(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import asyncio, time
        from agentfootprint.runs import Recording, RunStore
        from agentfootprint.runs._writer import writer_for

        class Slow(RunStore):
            def save(self, result, *, meta=None):
                time.sleep(0.01)
                return super().save(result, meta=meta)

        store = Slow({str(tmp_path / "runs.db")!r})
        writer = writer_for(store)
        loop = asyncio.new_event_loop()

        async def submit():
            for i in range(30):
                loop.create_task(writer.call(store.save, Recording(
                    run_id=f"x{{i}}", kind="flow", name="F", status="done",
                    created_at=time.time(), chart={{}}, log={{"initial": {{}}, "records": []}})))
            await asyncio.sleep(0.02)

        loop.run_until_complete(submit())
        print(writer.pending(), flush=True)  # the process then exits, store and loop left open
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[0]) > 0
    with RunStore(tmp_path / "runs.db") as again:
        assert len(again.list(limit=100)) == 30


async def test_jobs_land_in_order_and_a_full_queue_makes_callers_wait() -> None:
    writer = StoreWriter("test", capacity=2)
    gate = threading.Event()
    order: list[int] = []

    def job(n: int) -> int:
        gate.wait(5)
        order.append(n)
        return n

    tasks = [asyncio.create_task(writer.call(job, n)) for n in range(10)]
    ticks = 0
    for _ in range(20):  # the loop keeps running while the queue is full
        await asyncio.sleep(0.005)
        ticks += 1
        assert writer.pending() <= 3  # two queued, one under way
    gate.set()
    assert await asyncio.gather(*tasks) == list(range(10))
    assert order == list(range(10)) and ticks == 20


async def test_a_caller_cancelled_while_waiting_for_room_leaves_it_to_the_next() -> None:
    writer = StoreWriter("test", capacity=1)
    gate = threading.Event()

    def job(n: int) -> int:
        gate.wait(5)
        return n

    first = asyncio.create_task(writer.call(job, 0))
    await asyncio.sleep(0.02)
    queued = asyncio.create_task(writer.call(job, 1))
    await asyncio.sleep(0.01)
    waiting = [asyncio.create_task(writer.call(job, n)) for n in (2, 3)]
    await asyncio.sleep(0.01)
    waiting[0].cancel()
    gate.set()
    assert await asyncio.gather(first, queued, waiting[1]) == [0, 1, 3]
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]


async def test_a_job_error_reaches_its_caller_as_itself() -> None:
    writer = StoreWriter("test")

    def fail() -> None:
        raise KeyError("no run 'x'")

    with pytest.raises(KeyError, match="no run 'x'"):
        await writer.call(fail)
    assert await writer.call(lambda: 7) == 7  # the thread goes on


class _WatchedPg:
    """A psycopg connection that notes the thread of every transaction and cursor."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.threads: set[int] = set()

    def transaction(self) -> Any:
        self.threads.add(threading.get_ident())
        return self._db.transaction()

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.add(threading.get_ident())
        return self._db.cursor(*args, **kwargs)

    def close(self) -> None:
        self._db.close()


async def test_postgres_runs_are_stored_with_no_store_io_on_the_loop(
        pg_url: str, pg_schema: str) -> None:
    from agentfootprint.runs import PostgresRunStore

    store = PostgresRunStore(pg_url, schema=pg_schema)
    watched = _WatchedPg(store._db)
    store._db = watched  # type: ignore[assignment]
    agent = _agent(store)
    loop_thread = threading.get_ident()
    await asyncio.gather(*(agent.run("go", run_id=f"p{i:02d}") for i in range(30)))
    assert watched.threads and loop_thread not in watched.threads
    assert {s.status for s in store.list(limit=100)} == {"done"}
    assert len(store.list(limit=100)) == 30
    assert len(store.progress("p07")) == 2
    store.close()
