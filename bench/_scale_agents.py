"""The agents ``scale_out.py`` runs, importable by its Celery workers (``_scale_agents:...``).

``make_agent`` makes one side-effect-free tool call, then answers ``done: <message>``;
``make_suspect_agent`` carries 50 facts, one of which (``f31``) holds the token its model
answers wrong on. ``AF_SCALE_LATENCY`` (seconds) is how long each model call waits: a model's
latency, 0 by default (then a run is pure framework CPU).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from agentfootprint import Agent, define_fact, tool
from agentfootprint.providers import LLMRequest, mock

TOKEN = "override-zq"


async def _latency() -> None:
    delay = float(os.environ.get("AF_SCALE_LATENCY", "0") or 0)
    if delay:
        await asyncio.sleep(delay)


@tool(side_effects=False)
def lookup(ticket: int) -> str:
    """Look a ticket up."""
    return f"ticket {ticket}: open"


async def _respond(request: LLMRequest) -> Any:
    await _latency()
    if not any(m["role"] == "tool" for m in request.messages):
        return {"tool_calls": [{"id": "l1", "name": "lookup", "args": {"ticket": 42}}]}
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    if TOKEN in (request.system or ""):
        return "WRONG: escalate everything."
    return f"done: {user}"


def make_agent() -> Agent:
    return Agent(provider=mock(respond=_respond), model="mock", tools=[lookup])


def make_suspect_agent() -> Agent:
    facts = [define_fact(id=f"f{i}", data=f"Fact {i}: ticket policy note {i}"
                         + (f" {TOKEN}." if i == 31 else "."))
             for i in range(50)]
    return Agent(provider=mock(respond=_respond), model="mock", context=facts, tools=[lookup])
