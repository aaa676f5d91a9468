"""Agents the serve tests host: importable as ``serve_factories:make_agent`` by a server process
(the tests put this folder on its ``PYTHONPATH``). Offline: the mock provider.

``make_agent`` answers each message with the turn it believes it is in (how many user messages
its conversation holds), so a reply proves the history was carried from the previous turn,
whichever process ran it. A message containing "refund" makes it call ``issue_refund``, a tool
behind a check-in, so the run pauses for a person. ``$SERVE_TEST_SLOW`` (seconds) makes the
``slow_lookup`` tool, called on a message containing "slow", take that long, and touches
``$SERVE_TEST_MARKER`` when it starts.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from agentfootprint import Agent, tool
from agentfootprint.providers import mock


@tool(check_in=lambda args: True)
async def issue_refund(order_id: str) -> str:
    """Issue a refund for an order (asks a person first)."""
    return f"refund issued for {order_id}"


@tool
async def slow_lookup(order_id: str) -> str:
    """Look up an order, slowly."""
    marker = os.environ.get("SERVE_TEST_MARKER")
    if marker:
        Path(marker).write_text("started")
    await asyncio.sleep(float(os.environ.get("SERVE_TEST_SLOW", "0")))
    return f"order {order_id}: delivered"


def _respond(request: Any) -> Any:
    messages = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        return f"Done: {last['content']}."
    said = [m["content"] for m in messages if m["role"] == "user"]
    text = said[-1] if said else ""
    if "refund" in text:
        return {"tool_calls": [{"name": "issue_refund", "args": {"order_id": "A-9"}}]}
    if "slow" in text:
        return {"tool_calls": [{"name": "slow_lookup", "args": {"order_id": "A-7"}}]}
    return f"turn {len(said)}: you said {text!r}"


def make_agent() -> Agent:
    """A fresh agent per turn, as a server builds it."""
    return Agent(provider=mock(respond=_respond), model="mock", name="support",
                 system="You answer support questions.", tools=[issue_refund, slow_lookup])


not_an_agent = 42
