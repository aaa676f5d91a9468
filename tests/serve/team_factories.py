"""Compositions the serve tests host (``team_factories:make_team`` and friends), offline.

``make_team`` is a planner → writer ``Sequence``: the planner answers ``plan: <message>``, the
writer ``post from <plan>``. A message containing "refund" makes the writer call ``refund``, a
tool behind a check-in, so the whole composition pauses for a person. With ``$TEAM_RUNS_DB``
set, both members record to that SQLite run store (one store object per path, shared by every
turn's fresh team). ``make_memory_team`` is that team with window memory on both members (a
SQLite memory store at ``$TEAM_MEMORY_DB``). The ``bad_*`` factories are the ones a server
must refuse at startup.
"""

from __future__ import annotations

import os
from typing import Any

from agentfootprint import Agent, Tracing, tool
from agentfootprint.compose import Sequence, reflection
from agentfootprint.memory import SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import RunStore

REFUNDS: list[str] = []
_STORES: dict[str, RunStore] = {}
_MEMORY: dict[str, SQLiteStore] = {}
PROMPTS: list[tuple[str, str]] = []
"""(member, prompt) for every LLM call of ``make_memory_team``'s members, in order."""


@tool(check_in=lambda args: True)
def refund(order: str) -> str:
    """Refund an order (asks a person first)."""
    REFUNDS.append(order)
    return f"refunded {order}"


def _plan(request: LLMRequest) -> str:
    return "plan: " + str(request.messages[-1]["content"])


def _write(request: LLMRequest) -> Any:
    last = request.messages[-1]
    if last["role"] == "tool":
        return f"done: {last['content']}"
    if "refund" in str(last["content"]):
        return {"tool_calls": [{"id": "c1", "name": "refund", "args": {"order": "A-7"}}]}
    return f"post from {last['content']}"


def _tracing() -> Tracing:
    path = os.environ.get("TEAM_RUNS_DB")
    if not path:
        return Tracing()
    if path not in _STORES:
        _STORES[path] = RunStore(path)
    return Tracing(run_store=_STORES[path])


def close_stores() -> None:
    """Close the run stores the factories opened (a test's cleanup)."""
    while _STORES:
        _STORES.popitem()[1].close()


def make_team() -> Sequence:
    """A fresh planner → writer team per turn."""
    tracing = _tracing()
    planner = Agent(provider=mock(respond=_plan), model="mock", name="planner",
                    tracing=tracing)
    writer = Agent(provider=mock(respond=_write), model="mock", name="writer",
                   tools=[refund], tracing=tracing)
    return Sequence(("plan", planner), ("write", writer), name="team")


async def make_team_async() -> Sequence:
    """``make_team``, built by an async factory."""
    return make_team()


def make_critic() -> Any:
    """A pattern (reflection: a writer and a critic), to show patterns serve too."""
    writer = Agent(provider=mock(respond=_plan), model="mock", name="draft")
    critic = Agent(provider=mock(respond=lambda request: "APPROVED"), model="mock",
                   name="critic")
    return reflection(writer, critic, accept=lambda critique: "APPROVED" in critique,
                      max_rounds=2)


def bad_raises() -> Agent:
    raise RuntimeError("no model configured")


def bad_type() -> str:
    return "not an agent"


def _seen(name: str, respond: Any) -> Any:
    """``respond``, keeping every prompt ``name`` was sent in ``PROMPTS`` (system + messages)."""
    def keep(request: LLMRequest) -> Any:
        PROMPTS.append((name, " | ".join([request.system or "", *(
            str(m["content"]) for m in request.messages)])))
        return respond(request)

    return keep


def make_memory_team() -> Sequence:
    """``make_team`` whose planner and writer remember (window memory) in the SQLite memory
    store at ``$TEAM_MEMORY_DB`` (one store object per path, shared by every turn's team)."""
    path = os.environ["TEAM_MEMORY_DB"]
    if path not in _MEMORY:
        _MEMORY[path] = SQLiteStore(path)
    store = _MEMORY[path]
    planner = Agent(provider=mock(respond=_seen("planner", _plan)), model="mock",
                    name="planner", memory=[define_memory(
                        type="episodic", strategy="window", store=store, keep_turns=10,
                        id="planner")])
    writer = Agent(provider=mock(respond=_seen("writer", _write)), model="mock",
                   name="writer", tools=[refund], memory=[define_memory(
                       type="episodic", strategy="window", store=store, keep_turns=10,
                       id="writer")])
    return Sequence(("plan", planner), ("write", writer), name="team")


def close_memory() -> None:
    """Close the memory stores ``make_memory_team`` opened (a test's cleanup)."""
    while _MEMORY:
        _MEMORY.popitem()[1].close_sync()


not_callable = 42
