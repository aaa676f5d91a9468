"""Context, declared once, tracked forever (USAGE.md §2), offline.

A support agent with a fact, a steering rule, an instruction that fires after ``lookup_order``
returns, and a ``billing`` skill the model switches on with ``read_skill``. The scripted model
looks the order up, reads the skill, refunds, and answers. Then, for the last LLM call, the
recording answers for every injection: who let it in, when, and how it landed.

Run: python examples/context_support_agent.py
"""

import asyncio

from agentfootprint import (
    Agent,
    define_fact,
    define_instruction,
    define_skill,
    define_steering,
    tool,
)
from agentfootprint.context import context_report
from agentfootprint.providers import mock


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order: its status and total."""
    return f"Order {order_id}: delivered, total 42.00 EUR."


@tool
def refund_tool(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    return f"Refunded {amount:.2f} EUR on {order_id}."


provider = mock(script=[
    {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]},
    {"tool_calls": [{"name": "read_skill", "args": {"id": "billing"}}]},
    {"tool_calls": [{"name": "refund_tool", "args": {"order_id": "A-1001", "amount": 42.0}}]},
    "Done, Maya: order A-1001 was refunded 42.00 EUR.",
])

agent = Agent(
    provider=provider, model="mock",
    system="You are a support agent.",
    context=[
        define_fact(id="user-profile", data="Name: Maya. Plan: Pro. Customer since 2022."),
        define_steering(id="refund-policy",
                        prompt="Never promise a refund before checking the policy tool."),
        define_instruction(id="cite-orders", prompt="Cite the order id you used.",
                           on_tool_return="lookup_order"),
        define_skill(id="billing", description="Refunds, charges, billing questions.",
                     body="Confirm identity first, then refund at most the order total.",
                     tools=[refund_tool], tools_while_active=True),
    ],
    tools=[lookup_order],
)

result = asyncio.run(agent.run("Please refund order A-1001."))
print(result.content)

last = context_report(result.recording)[-1]
print(f"\nThe last LLM call (iteration {last['iteration']}, {last['runtime_stage_id']}):")
for row in last["injections"]:
    who, when = row["who"], row["when"]
    print(f"- {row['id']} ({row['flavor']})")
    print(f"    who:  {who['trigger']} -> {'fired' if who['fired'] else 'not fired'}: "
          f"{who['reason']}")
    print(f"    when: iteration {when['iteration']}, judged against "
          f"[{', '.join(when['tool_batch'])}], first fired at iteration "
          f"{when['first_fired_iteration']}")
    for piece in row["how"] or [{"slot": None}]:
        if piece["slot"] == "system":
            print(f"    how:  system prompt, position {piece['position']}, chars "
                  f"{piece['span'][0]}-{piece['span'][1]}, cache {piece['cache']}")
        elif piece["slot"] == "tools":
            print(f"    how:  tool list, {', '.join(piece['tools'])} at position(s) "
                  f"{', '.join(map(str, piece['positions']))}")
        elif piece["slot"] == "messages":
            print(f"    how:  messages, {len(piece['messages'])} delivered")
        else:
            print("    how:  did not land")
