"""Agents the standing-agent tests build, in the test process and in fresh interpreters.

``python standing_agents.py DB send SESSION PRINCIPAL MESSAGE`` (or ``resume SESSION PRINCIPAL
ANSWER_JSON``) runs one turn against the SQLite session file ``DB`` in a brand-new process and
prints the ``Reply`` as JSON; with ``DB`` a ``redis://`` URL the sessions live in Redis
(prefix from ``$SESSIONS_PREFIX``), with ``postgresql://`` in PostgreSQL (schema from
``$SESSIONS_SCHEMA``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from agentfootprint import Agent, tool
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.serve import (
    SessionStore,
    StandingAgent,
    postgres_sessions,
    redis_sessions,
    sqlite_sessions,
    standing_agent,
)

CALLS: list[str] = []


def count_turns(request: LLMRequest) -> str:
    """Answers with how many user messages it sees and the last one, so a lost turn shows."""
    users = [m["content"] for m in request.messages if m["role"] == "user"]
    return f"seen {len(users)}: {users[-1]}"


def make_chat() -> Agent:
    """A fresh agent per turn; it knows nothing but what the session gives it."""
    return Agent(provider=mock(respond=count_turns), model="mock", name="chat")


@tool(check_in=lambda args: args["amount"] > 100)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    CALLS.append(f"refund {order} {amount}")
    return f"refunded {amount} on {order}"


def _refunds(request: LLMRequest) -> Any:
    results = [m for m in request.messages if m["role"] == "tool"]
    last = request.messages[-1]
    if last["role"] == "user":
        return {"tool_calls": [{"id": f"c{len(request.messages)}", "name": "refund",
                                "args": {"order": "A-7", "amount": 250.0}}]}
    return "Done: " + str(results[-1]["content"])


def make_refunds() -> Agent:
    """Asks to refund 250 on every message, which needs a person's consent (a check-in)."""
    return Agent(provider=mock(respond=_refunds), model="mock", tools=[refund], name="refunds")


async def _slowly(request: LLMRequest) -> str:
    await asyncio.sleep(0.2)
    return count_turns(request)


def make_slow() -> Agent:
    """Takes 0.2 s a turn, so turns started together overlap."""
    return Agent(provider=mock(respond=_slowly), model="mock", name="slow")


async def _gated(request: LLMRequest) -> str:
    gate = os.environ["SESSIONS_GATE"]
    for _ in range(300):  # at most 15 s
        if not os.path.exists(gate):
            break
        await asyncio.sleep(0.05)
    return count_turns(request)


def make_gated() -> Agent:
    """Answers only once the file named by ``$SESSIONS_GATE`` is gone (a test opens it)."""
    return Agent(provider=mock(respond=_gated), model="mock", name="gated")


FACTORIES = {"chat": make_chat, "refunds": make_refunds, "slow": make_slow,
             "gated": make_gated}


def store_for(where: str) -> SessionStore:
    if where.startswith("redis://"):
        return redis_sessions(where, prefix=os.environ["SESSIONS_PREFIX"])
    if where.startswith("postgresql://"):
        return postgres_sessions(where, schema=os.environ["SESSIONS_SCHEMA"])
    return sqlite_sessions(where)


def standing_for(where: str, factory: str = "chat") -> StandingAgent:
    return standing_agent(FACTORIES[factory], sessions=store_for(where))


async def _main(where: str, factory: str, command: str, session: str, principal: str,
                text: str) -> None:
    standing = standing_for(where, factory)
    try:
        if command == "send":
            reply = await standing.send(session, text, principal=principal)
        else:
            reply = await standing.resume(session, json.loads(text), principal=principal)
    finally:
        await standing.close()
    print(json.dumps({**reply.model_dump(mode="json"), "calls": CALLS}))


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:7]))
