"""The agent of the ``kill -9`` battery (``test_kill.py``), run in a worker process.

``python kill_worker.py WORKDIR RUN_ID SEED`` runs one turn with tools against the SQLite run
store ``WORKDIR/runs.db`` and touches ``WORKDIR/ready-RUN_ID`` once the run is in the store; the
test kills it at a random moment after that. The tools keep what they did in ``WORKDIR/effects.db``:

* ``charge`` (``idempotent=True``) applies its effect once per idempotency key (a ``charges``
  row) and logs every application in ``applied`` — more than one row for a key is a double
  charge;
* ``notify`` (declares nothing) logs ``enter`` and ``exit`` per key: an ``enter`` without
  ``exit`` is a call killed mid-execution;
* ``lookup`` (``side_effects=False``) just takes a while.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
from pathlib import Path
from typing import Any

from agentfootprint import Agent, ToolContext, Tracing, tool
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import RunStore

STEPS: list[list[tuple[str, dict[str, Any]]]] = [
    [("charge", {"amount": 12.5}), ("notify", {"to": "ops"})],
    [("lookup", {"key": "order"}), ("notify", {"to": "customer"})],
    [("charge", {"amount": 3.0}), ("lookup", {"key": "receipt"})]]


def effects(workdir: Path) -> sqlite3.Connection:
    db = sqlite3.connect(workdir / "effects.db", timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(
        "CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY);"
        "CREATE TABLE IF NOT EXISTS applied (key TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS notify (key TEXT NOT NULL, phase TEXT NOT NULL);")
    return db


def respond(request: LLMRequest) -> Any:
    """After n tool batches, batch n of ``STEPS``; then the answer."""
    done = sum(1 for m in request.messages if m["role"] == "assistant")
    if done < len(STEPS):
        return {"tool_calls": [{"id": f"s{done}-{j}", "name": name, "args": args}
                               for j, (name, args) in enumerate(STEPS[done])]}
    return "all done"


def build(workdir: Path, store: RunStore, *, pace: random.Random | None = None) -> Agent:
    """The agent; ``pace`` makes each tool take a random few tens of milliseconds."""
    db = effects(workdir)

    async def pause() -> None:
        if pace is not None:
            await asyncio.sleep(pace.uniform(0.0, 0.06))

    @tool(idempotent=True)
    async def charge(amount: float, ctx: ToolContext) -> str:
        """Charge the customer once per idempotency key."""
        await pause()
        db.execute("BEGIN IMMEDIATE")
        fresh = db.execute("INSERT OR IGNORE INTO charges VALUES (?)",
                           (ctx.idempotency_key,)).rowcount == 1
        if fresh:
            db.execute("INSERT INTO applied VALUES (?)", (ctx.idempotency_key,))
        db.execute("COMMIT")
        await pause()
        return f"charged {amount}" if fresh else f"already charged {amount}"

    @tool
    async def notify(to: str, ctx: ToolContext) -> str:
        """Send a notification (not idempotent)."""
        db.execute("INSERT INTO notify VALUES (?, 'enter')", (ctx.idempotency_key,))
        await pause()
        db.execute("INSERT INTO notify VALUES (?, 'exit')", (ctx.idempotency_key,))
        return f"notified {to}"

    @tool(side_effects=False)
    async def lookup(key: str) -> str:
        """Look something up."""
        await pause()
        return f"{key}: ok"

    return Agent(provider=mock(respond=respond), model="mock", tools=[charge, notify, lookup],
                 tracing=Tracing(run_store=store))


async def warm_up() -> None:
    """One throw-away run (no store, no effects), so the imports a first tool call pulls in
    are done before the run the test kills: its kill points spread over the whole run."""

    @tool(side_effects=False)
    async def noop() -> str:
        """Nothing."""
        return "ok"

    await Agent(provider=mock(script=[{"tool_calls": [{"name": "noop", "args": {}}]}, "ok"]),
                model="mock", tools=[noop]).run("warm up")


async def main(workdir: Path, run_id: str, seed: int) -> None:
    await warm_up()
    store = RunStore(workdir / "runs.db")
    agent = build(workdir, store, pace=random.Random(seed))
    agent.on("agent.turn_start", lambda event: (workdir / f"ready-{run_id}").touch())
    await agent.run("charge and notify", run_id=run_id)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
