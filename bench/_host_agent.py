"""The agent ``host_load.py`` serves, importable by its server processes (``_host_agent:...``).

Each turn: one tool call (``lookup``), then the answer ``turn <k>: <message>`` where ``k`` is
how many user messages the conversation holds — so a reply proves the history the session
store gave this process is the conversation's own. Every run is recorded to a shared run store
(``$AF_HOST_RUNS``: a SQLite path, or a ``postgresql://`` URL with ``$AF_HOST_SCHEMA``), one per
server process, as a production deployment records them.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from agentfootprint import Agent, Tracing, tool
from agentfootprint.providers import LLMRequest, mock


@tool(side_effects=False)
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: delivered"


def _respond(request: LLMRequest) -> Any:
    said = [m["content"] for m in request.messages if m["role"] == "user"]
    if request.messages[-1]["role"] == "user":
        return {"tool_calls": [{"id": f"c{len(said)}", "name": "lookup",
                                "args": {"order": f"A-{len(said)}"}}]}
    return f"turn {len(said)}: {said[-1]}"


@cache
def _run_store() -> Any:
    where = os.environ.get("AF_HOST_RUNS", "")
    if where.startswith("postgresql://"):
        from agentfootprint.runs import PostgresRunStore

        return PostgresRunStore(where, schema=os.environ.get("AF_HOST_SCHEMA", "public"))
    from agentfootprint.runs import RunStore

    return RunStore(where or "host-load-runs.db")


def make_agent() -> Agent:
    """A fresh agent per turn (the server calls it), recording to this process's store."""
    return Agent(provider=mock(respond=_respond), model="mock", name="support",
                 system="You answer support questions.", tools=[lookup],
                 tracing=Tracing(run_store=_run_store()))
