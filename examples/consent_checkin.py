"""Consent with receipts, across processes (USAGE.md §5).

A refund over 1,000 pauses BEFORE it runs; the paused run is plain JSON (saved to a file here,
as a server would) with an evidence pack: what it will do and which context drove the choice.
A person approves, and the run resumes from the file.

Run: python examples/consent_checkin.py
"""

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from agentfootprint import Agent, check_in_approved, define_fact, tool
from agentfootprint.providers import LLMRequest, mock


@tool(check_in=lambda args: args["amount"] > 1000)
async def issue_refund(order_id: str, amount: float) -> str:
    """Issue a refund for an order."""
    return f"refund of {amount:.2f} issued on {order_id}"


def model(request: LLMRequest) -> Any:
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"id": "r1", "name": "issue_refund",
                                "args": {"order_id": "A-9", "amount": 5000.0}}]}
    return f"Done — {results[0]}."


def make_agent() -> Agent:
    policy = define_fact(id="goodwill", data="Order A-9 was lost in transit; refund in full.")
    return Agent(provider=mock(respond=model), model="mock", tools=[issue_refund],
                 context=[policy])


async def main() -> None:
    out = await make_agent().run("Refund 5000 on A-9")
    assert out.paused and out.check_in is not None
    saved = Path(tempfile.mkdtemp()) / "paused.json"
    saved.write_text(json.dumps(out.checkpoint))   # plain JSON; hours later, another server:
    print("asks to run:", out.check_in.tool, out.check_in.args)
    drivers = out.check_in.evidence["drivers"]
    print("driven by:", ", ".join(f"{d['id']} ({d['score']:.2f}, {d['tier']})" for d in drivers))
    final = await make_agent().resume(json.loads(saved.read_text()),
                                      check_in_approved(by="alice@ops"))
    print(final.content)


asyncio.run(main())
