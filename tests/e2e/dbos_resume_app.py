"""A module-level agent on ``dbos_executor(...)`` whose run pauses for consent, for
``test_dbos_resume_kill.py`` (no pytest here: children start fast). Run as a child with this
directory on PYTHONPATH: ``python -c "import dbos_resume_app as a; a.child_main()"``.

``DBOS_RESUME_DIR`` holds DBOS's system database, the run store, ``checkpoint.json`` (the paused
run's checkpoint, as a caller would keep it) and ``counters.sqlite`` (one row per execution of
each model call and tool call). With ``DBOS_RESUME_BLOCK`` set, the resumed part's second tool
(``hold``) prints ``KILLME`` and waits for the SIGKILL: the approved ``refund`` and the model
call after it have finished by then.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from agentfootprint import Agent, RunContext, Tracing, check_in_approved, tool
from agentfootprint.distributed import dbos_executor
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

DIR = Path(os.environ["DBOS_RESUME_DIR"])


def count(kind: str, key: str) -> None:
    with sqlite3.connect(DIR / "counters.sqlite", timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS executed (kind TEXT, key TEXT, pid INTEGER)")
        db.execute("INSERT INTO executed VALUES (?, ?, ?)", (kind, key, os.getpid()))


@tool(check_in=True)
async def refund(ctx: RunContext, amount: int) -> str:
    """Refund an amount (a person consents first)."""
    count("refund", ctx.idempotency_key)
    return f"refunded {amount}"


@tool
async def hold(ctx: RunContext) -> str:
    """Hold the order (where the first process is killed)."""
    count("hold", ctx.idempotency_key)
    if os.environ.get("DBOS_RESUME_BLOCK"):
        print("KILLME", flush=True)
        await asyncio.Event().wait()
    return "held"


def respond(request: Any) -> Any:
    done = sum(1 for m in request.messages if m["role"] == "tool")
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    count("llm", f"{user}#{done}")
    if done == 0:
        return {"tool_calls": [{"id": "r1", "name": "refund", "args": {"amount": 50}}]}
    if done == 1:
        return {"tool_calls": [{"id": "h1", "name": "hold", "args": {}}]}
    return f"refunded and held: {user}"


agent = Agent(provider=mock(respond=respond), model="mock", tools=[refund, hold],
              tracing=Tracing(run_store=RunStore(DIR / "runs.sqlite")),
              executor=dbos_executor(system_database=f"sqlite:///{DIR / 'dbos.sqlite'}"))
"""Found by the recovering process as ``dbos_resume_app:agent``."""

APPROVED = check_in_approved(by="ana@ops")


def child_main() -> None:
    """First process (``DBOS_RESUME_BLOCK``): run ``resume-1`` until it pauses, keep its
    checkpoint, resume it approved: killed in ``hold``. Second: launch (DBOS recovers the
    resumed part's workflow) and resume the same checkpoint again, as a caller retrying would
    (it joins the recovered workflow)."""
    async def main() -> None:
        kept = DIR / "checkpoint.json"
        if os.environ.get("DBOS_RESUME_BLOCK"):
            paused = await agent.run("order-1", run_id="resume-1")
            kept.write_text(json.dumps(paused.checkpoint))
            await agent.resume(paused.checkpoint, APPROVED)
            return
        agent.executor.launch()  # type: ignore[union-attr]  # recovers the resumed part
        done = await agent.resume(json.loads(kept.read_text()), APPROVED)
        print("DONE " + json.dumps([type(done).__name__, done.status, done.content,
                                    done.run_id, done.iterations]), flush=True)

    asyncio.run(main())
    os._exit(0)  # DBOS's background threads are not waited for
