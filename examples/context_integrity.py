"""Context integrity: a run whose answer contradicts its own tool result, caught without a model.

The balance tool returns 120.00 EUR; the (scripted) model answers 250.00 EUR.
``find_context_errors`` reads the recording and files the contradiction with its sources, then
lists every check's
disposition: which ran and found nothing, which found something, and which could not run (and
why) — so a quiet report is never mistaken for a clean one. ``self_explain`` sums the run up.

Run it: ``python examples/context_integrity.py`` (offline: the mock provider plays the model).
"""

from __future__ import annotations

import asyncio
import json

from agentfootprint import Agent, tool
from agentfootprint.explain import find_context_errors, self_explain
from agentfootprint.providers import mock


@tool
def balance(account: str) -> str:
    """The balance of an account."""
    return json.dumps({"account": account, "balance": 120.00, "currency": "EUR"})


async def main() -> None:
    agent = Agent(
        provider=mock(script=[
            {"tool_calls": [{"id": "call-1", "name": "balance", "args": {"account": "ACC-1"}}]},
            "Your balance is 250.00 EUR.",
        ]),
        model="mock-model",
        tools=[balance],
    )
    result = await agent.run("What is my balance?")
    print("answer:", result.content)
    print()
    report = find_context_errors(result)
    print(report)
    print()
    print(self_explain(result))


if __name__ == "__main__":
    asyncio.run(main())
