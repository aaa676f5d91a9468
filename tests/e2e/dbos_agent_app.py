"""A module-level agent whose every run is durable — ``Agent(..., executor=dbos_executor(...))``
— for ``test_dbos_agent_kill.py`` (no pytest here: children start fast). Run as a child with
this directory on PYTHONPATH: ``python -c "import dbos_agent_app as a; a.child_main()"``.

``DBOS_AGENT_DIR`` holds DBOS's system database, the run store and ``counters.sqlite`` (one row
per execution of each model call and tool call). With ``DBOS_AGENT_BLOCK`` set, the run's
second tool (``hold``) prints ``KILLME`` and waits for the SIGKILL: the first tool (``pay``)
and two model calls have finished by then.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from agentfootprint import Agent, RunContext, Tracing, tool
from agentfootprint.distributed import dbos_executor
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

DIR = Path(os.environ["DBOS_AGENT_DIR"])


def count(kind: str, key: str) -> None:
    with sqlite3.connect(DIR / "counters.sqlite", timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS executed (kind TEXT, key TEXT)")
        db.execute("INSERT INTO executed VALUES (?, ?)", (kind, key))


@tool
async def pay(ctx: RunContext, amount: int) -> str:
    """Pay an amount."""
    count("pay", ctx.idempotency_key)
    return f"paid {amount}"


@tool
async def hold(ctx: RunContext) -> str:
    """Hold the order (where the first process is killed)."""
    count("hold", ctx.idempotency_key)
    if os.environ.get("DBOS_AGENT_BLOCK"):
        print("KILLME", flush=True)
        await asyncio.Event().wait()
    return "held"


def respond(request: Any) -> Any:
    done = sum(1 for m in request.messages if m["role"] == "tool")
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    count("llm", f"{user}#{done}")
    if done == 0:
        return {"tool_calls": [{"id": "p1", "name": "pay", "args": {"amount": 5}}]}
    if done == 1:
        return {"tool_calls": [{"id": "h1", "name": "hold", "args": {}}]}
    return f"paid and held: {user}"


agent = Agent(provider=mock(respond=respond), model="mock", tools=[pay, hold],
              tracing=Tracing(run_store=RunStore(DIR / "runs.sqlite")),
              executor=dbos_executor(system_database=f"sqlite:///{DIR / 'dbos.sqlite'}"))
"""Found by the recovering process as ``dbos_agent_app:agent``."""


def child_main() -> None:
    """First process (``DBOS_AGENT_BLOCK``): start run ``durable-1``, killed in ``hold``.
    Second: launch (DBOS recovers ``durable-1``), wait for it, ask ``agent.run`` for it again
    (the finished run's RunResult, nothing re-run) and make one more run."""
    async def main() -> None:
        if os.environ.get("DBOS_AGENT_BLOCK"):
            await agent.run("order-1", run_id="durable-1")
            return
        agent.executor.launch()  # type: ignore[union-attr]  # recovers durable-1
        [recovered] = await agent.executor.wait(["durable-1"])  # type: ignore[union-attr]
        again = await agent.run("order-1", run_id="durable-1")
        fresh = await agent.run("order-2", run_id="durable-2")
        print("DONE " + json.dumps({
            "recovered": recovered.model_dump(), "again": [type(again).__name__, again.content,
                                                          again.run_id, again.iterations],
            "fresh": [type(fresh).__name__, fresh.content, fresh.turn]}), flush=True)

    asyncio.run(main())
    os._exit(0)  # DBOS's background threads are not waited for
