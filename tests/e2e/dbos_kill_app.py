"""The agent, counters and child process of ``test_dbos_kill.py`` (kept free of pytest, so a
child starts fast). Run as a child: ``python -c "import dbos_kill_app as a; a.child_main()"``
with this directory on PYTHONPATH; the factory is ``"dbos_kill_app:make_agent"``."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from agentfootprint import Agent, RunContext, Tracing, define_fact, tool
from agentfootprint.providers import mock

_hits: dict[str, int] = {}
_blocked: set[str] = set()
_lock = threading.Lock()


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["DBOS_KILL_COUNTERS"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def _init_counters(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE IF NOT EXISTS tool_attempts (key TEXT, run TEXT);
            CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, run TEXT, amount INT,
                                                applied INT NOT NULL);
            CREATE TABLE IF NOT EXISTS llm_attempts (run TEXT, step INT);
            CREATE TABLE IF NOT EXISTS kills (run TEXT, point TEXT, step TEXT);
        """)


def _plan() -> dict[str, int]:
    """This process's planned point per run label (the n-th point the run reaches here)."""
    raw = os.environ.get("DBOS_KILL_PLAN")
    return json.loads(raw) if raw else {}


async def _point(label: str, point: str, step: str) -> None:
    """Count a point reached by run ``label``; block for good when it is the planned one."""
    plan = _plan().get(label)
    if plan is None:
        return
    with _lock:
        _hits[label] = _hits.get(label, 0) + 1
        reached = _hits[label] == plan
    if reached:
        with _db() as conn:
            conn.execute("INSERT INTO kills VALUES (?, ?, ?)", (label, point, step))
        _blocked.add(label)
        await asyncio.Event().wait()  # until SIGKILL


@tool
async def pay(ctx: RunContext, order: str, amount: int) -> str:
    """Pay ``amount`` for ``order`` (once per idempotency key)."""
    label = order.split("/")[0]
    key = ctx.idempotency_key
    conn = _db()
    try:
        conn.execute("INSERT INTO tool_attempts VALUES (?, ?)", (key, label))
        await _point(label, "tool-before-effect", key)
        if conn.execute("SELECT 1 FROM effects WHERE key = ?", (key,)).fetchone() is None:
            conn.execute("INSERT INTO effects VALUES (?, ?, ?, 1)", (key, label, amount))
        else:  # the key says it was applied: a re-run of a call killed after its effect
            conn.execute("UPDATE effects SET applied = applied WHERE key = ?", (key,))
        await _point(label, "tool-after-effect", key)
    finally:
        conn.close()
    return f"paid {amount} for {order}"


def _rounds(label: str) -> int:
    return 1 + int(label.split("-")[1]) % 3


async def respond(request: Any) -> Any:
    """Deterministic in the request: round k asks for 1 or 2 payments, then it answers."""
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    label = user.split()[1]
    done = sum(1 for m in request.messages if m["role"] == "assistant")
    with _db() as conn:
        conn.execute("INSERT INTO llm_attempts VALUES (?, ?)", (label, done))
    await _point(label, "model-call", f"llm:{done}")
    if done < _rounds(label):
        width = 1 + (done + int(label.split("-")[1])) % 2
        return {"tool_calls": [
            {"id": f"c{done}-{i}", "name": "pay",
             "args": {"order": f"{label}/{done}-{i}", "amount": 10 * done + i}}
            for i in range(width)]}
    return f"Paid every part of {label}; see the receipts."


def make_agent() -> Agent:
    return Agent(provider=mock(respond=respond), model="mock",
                 system="You pay orders with the pay tool.",
                 context=[define_fact(id="policy", data="Orders are paid in parts.")],
                 tools=[pay], tracing=Tracing())


def _points_of(label: str) -> int:
    """How many points an uninterrupted run of ``label`` reaches."""
    total = 0
    for done in range(_rounds(label)):
        total += 1 + 2 * (1 + (done + int(label.split("-")[1])) % 2)
    return total + 1


# -- the child process --------------------------------------------------------------------


def child_main() -> None:
    from agentfootprint.distributed import RunJob
    from agentfootprint.distributed._dbos import dbos_executor

    spec = json.loads(os.environ["DBOS_KILL_JOB"])
    executor = dbos_executor(system_database=spec["system_database"])

    async def main() -> None:
        executor.launch()  # recovers the workflows a killed process left under way
        tasks = {}
        for label, run_id in spec["runs"].items():
            if spec["start"]:
                job = RunJob(factory="dbos_kill_app:make_agent", message=f"pay {label} now",
                             run_id=run_id, store=spec["store"])
                tasks[label] = asyncio.create_task(executor.run_jobs([job]))
            else:
                tasks[label] = asyncio.create_task(executor.wait([run_id]))
        while True:
            await asyncio.sleep(0.05)
            done = {label for label, task in tasks.items() if task.done()}
            for label in done:
                tasks[label].result()  # a child error surfaces
            if done | _blocked >= set(tasks):
                break
        if _blocked:
            print("KILLME", flush=True)
            await asyncio.Event().wait()
        outcomes = [tasks[label].result()[0] for label in spec["runs"]]
        print("DONE " + json.dumps([o.model_dump() for o in outcomes]), flush=True)

    asyncio.run(main())
    os._exit(0)  # DBOS's background threads are not waited for
