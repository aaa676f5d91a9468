"""The agent the check-in and pause tests build, in-process and in fresh subprocesses.

``python checkin_agent.py resume CHECKPOINT_FILE ANSWER_JSON`` resumes a paused run from its
JSON checkpoint in a brand-new interpreter and prints the result as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentfootprint import Agent, define_fact, tool
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.tools import ask_human

CALLS: list[str] = []


@tool(check_in=lambda args: args["amount"] > 100)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    CALLS.append(f"refund {order} {amount}")
    return f"refunded {amount} on {order}"


@tool
def note(text: str) -> str:
    """Add a note to the case."""
    CALLS.append(f"note {text}")
    return "noted"


@tool
def confirm_address() -> str:
    """Ask the customer to confirm their address."""
    ask_human("Which address should we ship to?")


def respond(request: LLMRequest) -> Any:
    """Asks for a refund (and a note) once; then reads what happened."""
    tools_seen = [m for m in request.messages if m["role"] == "tool"]
    if not tools_seen:
        return {"tool_calls": [
            {"id": "c1", "name": "refund", "args": {"order": "A-7", "amount": 250.0}},
            {"id": "c2", "name": "note", "args": {"text": "refund requested"}}]}
    return "Done: " + " | ".join(str(m["content"]) for m in tools_seen)


def build() -> Agent:
    policy = define_fact(id="vip-policy",
                         data="VIP customers get a refund of the full amount on order A-7.")
    return Agent(provider=mock(respond=respond), model="m", tools=[refund, note],
                 context=[policy])


def main() -> None:
    _, command, path, answer = sys.argv
    assert command == "resume"
    with open(path) as handle:
        checkpoint = json.load(handle)
    result = asyncio.run(build().resume(checkpoint, json.loads(answer)))
    print(json.dumps({"status": result.status, "content": result.content, "calls": CALLS}))


if __name__ == "__main__":
    main()
