"""Agent factories the distributed tests and workers import (``"fleet_agents:make_agent"``).

Workers find this module on ``PYTHONPATH`` and read their set-up from the environment:

* ``AF_FLEET_DIR`` — a directory shared by the test and its workers: ``effects.db`` counts each
  side effect by the idempotency key the tool receives (``applied`` holds one row per time
  the effect was applied, so a doubled effect shows as two rows for one key); the model
  answers ``done: <message>`` only when the tool answered ``applied <message>``, else
  ``effect failed: <what the tool said>`` (a tool's error is given to the model, so a
  failed effect must not look like an applied one);
  a ``block`` run's tool applies its effect, writes ``entered-<run id>`` (with the worker
  process's pid) and waits for the file ``release`` before it returns.
* ``make_suspect_agent`` — ``AF_FLEET_SUSPECTS`` facts (default 20), of which ``f7`` carries
  the token the mock model answers wrong on; a side-effect-free ``lookup`` tool is called first.
* ``AF_FLEET_DELAY`` — seconds each model call waits (a model's latency; default 0).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from agentfootprint import Agent, ToolContext, define_fact, tool
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs._wal import enter_wal

TOKEN = "override-zq"
CULPRIT = "f7"


def _dir() -> Path:
    return Path(os.environ["AF_FLEET_DIR"])


def effects_db(where: Path | None = None) -> sqlite3.Connection:
    """The effects file, opened by every pool process at once for its first run: the WAL
    switch of the fresh file is asked again while another process holds its lock (SQLite
    answers that at once, without the busy timeout; ``runs/_wal.py``) for up to 30 s."""
    db = sqlite3.connect((where or _dir()) / "effects.db", timeout=30, isolation_level=None)
    enter_wal(db, timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT NOT NULL, label TEXT, pid INTEGER)")
    return db


def applied(where: Path) -> list[tuple[str, str]]:
    """Every application of the side effect: (idempotency key, label)."""
    db = effects_db(where)
    try:
        return [(r[0], r[1]) for r in db.execute("SELECT key, label FROM applied")]
    finally:
        db.close()


async def _latency() -> None:
    delay = float(os.environ.get("AF_FLEET_DELAY", "0") or 0)
    if delay:
        await asyncio.sleep(delay)


async def _respond(request: LLMRequest) -> Any:
    await _latency()
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    said = [m["content"] for m in request.messages if m["role"] == "tool"]
    if not said:
        return {"tool_calls": [{"id": "c1", "name": "effect", "args": {"label": user}}]}
    if said != [f"applied {user}"]:  # a tool error must not pass for an applied effect
        return f"effect failed: {said[-1]}"
    return f"done: {user}"


@tool(idempotent=True)
async def effect(label: str, ctx: ToolContext) -> str:
    """Apply the run's one side effect, once per idempotency key; a ``block`` run then waits
    for ``release`` (the moment a test kills its process: the effect is applied, the call's
    outcome not yet recorded)."""
    db = effects_db()
    try:
        db.execute("BEGIN IMMEDIATE")
        seen = db.execute("SELECT 1 FROM applied WHERE key = ?",
                          (ctx.idempotency_key,)).fetchone()
        if seen is None:
            db.execute("INSERT INTO applied VALUES (?, ?, ?)",
                       (ctx.idempotency_key, label, os.getpid()))
        db.execute("COMMIT")
    finally:
        db.close()
    if label.startswith("block"):
        (_dir() / f"entered-{ctx.run_id}").write_text(str(os.getpid()))
        while not (_dir() / "release").exists():
            await asyncio.sleep(0.02)
    return f"applied {label}"  # the same answer for the same key, applied or not


def make_agent() -> Agent:
    """One tool call (the counted side effect), then ``done: <message>``."""
    return Agent(provider=mock(respond=_respond), model="mock", tools=[effect])


@tool(side_effects=False)
def lookup(ticket: int) -> str:
    """Look a ticket up."""
    return f"ticket {ticket}: open"


def _suspect_model() -> Any:
    async def respond(request: LLMRequest) -> Any:
        await _latency()
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "l1", "name": "lookup", "args": {"ticket": 42}}]}
        wrong = TOKEN in (request.system or "")
        return "WRONG: escalate everything." if wrong else "Handled by the usual policy."
    return mock(respond=respond)


def make_suspect_agent() -> Agent:
    n = int(os.environ.get("AF_FLEET_SUSPECTS", "20"))
    facts = [define_fact(id=f"f{i}", data=f"Fact {i}: ticket policy note {i}"
                         + (f" {TOKEN}." if f"f{i}" == CULPRIT else "."))
             for i in range(n)]
    return Agent(provider=_suspect_model(), model="mock", context=facts, tools=[lookup])


def wait_for(path: Path, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


def make_sampling_agent() -> Agent:
    """Like ``make_suspect_agent`` (8 facts), on a model that declares itself sampling: each
    answer flips with probability 0.2, drawn from the request's seed (a seeded server)."""
    import random

    async def respond(request: LLMRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "l1", "name": "lookup", "args": {"ticket": 42}}]}
        wrong = TOKEN in (request.system or "")
        if random.Random(f"{request.seed}:{request.system}").random() < 0.2:
            wrong = not wrong
        return "WRONG: escalate everything." if wrong else "Handled by the usual policy."

    facts = [define_fact(id=f"f{i}", data=f"Fact {i}: note {i}"
                         + (f" {TOKEN}." if f"f{i}" == CULPRIT else "."))
             for i in range(8)]
    return Agent(provider=mock(respond=respond, deterministic=False), model="mock",
                 context=facts, tools=[lookup])
