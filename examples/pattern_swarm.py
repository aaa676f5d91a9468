"""Swarm: a triage agent hands a refund request to billing, which answers with a tool.

Run: python examples/pattern_swarm.py
Agents hand off by writing a ``HANDOFF: <agent id>`` line; every hand-off is a decision on
the record, the hop budget bounds the relay, and the answer backtracks into the agent that
gave it.
"""

import asyncio

from agentfootprint import Agent, LLMCall, define_fact, tool
from agentfootprint.compose import swarm
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock


@tool
async def lookup_order(order_id: str) -> str:
    """The status of an order."""
    return f"{order_id}: paid 42.00 EUR, delivered"


triage = LLMCall(provider=mock(reply="This is a refund request.\nHANDOFF: billing"),
                 model="mock", name="triage",
                 system="Route the request: end with HANDOFF: billing or HANDOFF: tech.")
billing = Agent(
    provider=mock(script=[
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]},
        "Refund of 42.00 EUR for order A-1001 approved; it is within the 30-day window.",
    ]),
    model="mock", name="billing", tools=[lookup_order],
    system="You handle refunds. Check the order first.",
    context=[define_fact(id="refund-window", data="Refunds are allowed within 30 days.")],
)
tech = LLMCall(provider=mock(reply="Try restarting the device."), model="mock", name="tech")

pattern = swarm(("triage", triage), ("billing", billing), ("tech", tech), max_hops=3)


async def main() -> None:
    result = await pattern.run("I want my money back for order A-1001.")
    state = result.recording.state
    print("Relay: " + " -> ".join(state["relay"]) + f" ({state['hops']} hand-off)")
    print(f"Answer: {result.content}")
    print()
    print(backtrack(result))


if __name__ == "__main__":
    asyncio.run(main())
