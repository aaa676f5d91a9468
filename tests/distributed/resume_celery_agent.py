"""A module-level agent on Celery workers whose run pauses for consent — ``Agent(...,
executor=celery_executor(app))`` — imported by ``test_celery_resume.py`` (after it sets the
fleet's environment) and by the workers, which find it as ``"resume_celery_agent:agent"``.
Its run store and ``refunds.db`` (one row per refund applied: idempotency key and the pid of
the process that ran it) live in the directory the test shares with the workers
(``AF_FLEET_DIR``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from celery import Celery

from agentfootprint import Agent, RunContext, Tracing, tool
from agentfootprint.distributed import celery_executor
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

DIR = Path(os.environ["AF_FLEET_DIR"])


def refunds() -> list[tuple[str, int]]:
    """Every refund applied: (idempotency key, pid of the process that ran the tool)."""
    with sqlite3.connect(DIR / "refunds.db", timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT, pid INTEGER)")
        return [(r[0], r[1]) for r in db.execute("SELECT key, pid FROM applied")]


@tool(check_in=True)
async def refund(ctx: RunContext, amount: int) -> str:
    """Refund an amount (a person consents first)."""
    with sqlite3.connect(DIR / "refunds.db", timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT, pid INTEGER)")
        db.execute("INSERT INTO applied VALUES (?, ?)", (ctx.idempotency_key, os.getpid()))
    return f"refunded {amount}"


def _respond(request: Any) -> Any:
    if not any(m["role"] == "tool" for m in request.messages):
        return {"tool_calls": [{"id": "r1", "name": "refund", "args": {"amount": 50}}]}
    return "refund done"


app = Celery("aftest-resume", broker=os.environ["AGENTFOOTPRINT_BROKER_URL"],
             set_as_current=False)

agent = Agent(provider=mock(respond=_respond), model="mock", tools=[refund],
              tracing=Tracing(run_store=RunStore(DIR / "resume.db")),
              executor=celery_executor(app, queue=os.environ["AGENTFOOTPRINT_QUEUE"],
                                       timeout=60))
