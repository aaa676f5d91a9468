"""One agent with several injections, one scripted turn: what each request hashed to.

Run as a script (a fresh interpreter) it prints a JSON list, one entry per LLM request: the
sha256 of the system prompt (UTF-8) and of the tool schemas as ``json.dumps(sort_keys=True)``.
``test_agent_context.py`` runs it in two subprocesses with different ``PYTHONHASHSEED``s and
compares with ``request_hashes()`` computed in-process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

from agentfootprint import (
    Agent,
    define_fact,
    define_injection,
    define_instruction,
    define_skill,
    define_steering,
    tool,
)
from agentfootprint.providers import mock


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    return f"order {order_id}: shipped to Zoë 📦"


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    return f"refunded {amount} on {order_id}"


@tool
def escalate(reason: str, priority: int = 1) -> str:
    """Hand the case to a human."""
    return f"escalated ({priority}): {reason}"


def build() -> tuple[Agent, Any]:
    provider = mock(script=[
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1"}}]},
        {"tool_calls": [{"name": "read_skill", "args": {"id": "billing"}}]},
        {"tool_calls": [{"name": "refund", "args": {"order_id": "A-1", "amount": 9.5}}]},
        "Refunded 9.5 on A-1.",
    ])
    agent = Agent(
        provider=provider, model="mock-model", system="You are a support agent. Café ☕.",
        tools=[lookup_order],
        context=[
            define_fact(id="user-profile", data="Name: Maya 🙂. Plan: Pro. Customer since 2022."),
            define_steering(id="refund-policy",
                            prompt="Never promise a refund before checking the policy."),
            define_instruction(id="late-turn", prompt="Answer soon.",
                               active_when=lambda ctx: ctx.iteration >= 3),
            define_instruction(id="cite-orders", prompt="Cite the order id you used.",
                               on_tool_return=re.compile(r"^lookup_")),
            define_fact(id="ack", data="Let me check.", slot="messages", role="assistant"),
            define_skill(id="billing", description="Refunds and charges.",
                         body="Confirm identity first, then refund at most the total.",
                         tools=[refund], tools_while_active=True),
            define_skill(id="escalation", description="When a human is needed.",
                         body="Escalate only after two failed attempts.", tools=[escalate]),
            define_injection(id="house-style", system="Sign off as Support."),
        ],
    )
    return agent, provider


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_hashes() -> list[dict[str, Any]]:
    """One entry per request: the hashes of its system prompt and its tool schema JSON."""
    agent, provider = build()
    asyncio.run(agent.run("Please refund order A-1."))
    return [{"request": i, "system": sha256(request.system or ""),
             "tools": sha256(json.dumps(request.tools, sort_keys=True)),
             "tool_names": [t["name"] for t in request.tools]}
            for i, request in enumerate(provider.requests)]


if __name__ == "__main__":
    print(json.dumps(request_hashes()))
