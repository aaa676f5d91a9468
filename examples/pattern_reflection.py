"""Reflection: a writer drafts, a critic reviews, the writer revises until it is accepted.

Run: python examples/pattern_reflection.py
The critic rejects the first draft for a missing detail; the revision is accepted. The
verdict after each critique is a decision on the record.
"""

import asyncio

from agentfootprint import LLMCall
from agentfootprint.compose import reflection
from agentfootprint.providers import LLMRequest, mock


def write(request: LLMRequest) -> str:
    message = request.messages[-1]["content"]
    if "Critique:" not in message:
        return "Your order has shipped."
    return "Your order A-1001 has shipped and arrives on Friday."


def critique(request: LLMRequest) -> str:
    draft = request.messages[-1]["content"].split("Draft:\n", 1)[1]
    if "A-1001" not in draft:
        return "Name the order id and the delivery day."
    return "APPROVED: clear and complete."


writer = LLMCall(provider=mock(respond=write), model="mock", name="writer",
                 system="You write short customer notifications.")
critic = LLMCall(provider=mock(respond=critique), model="mock", name="critic",
                 system="Review the draft; answer APPROVED when it is complete.")

pattern = reflection(writer, critic, max_rounds=3, accept=lambda text: text.startswith("APPROVED"))


async def main() -> None:
    result = await pattern.run("Tell the customer that order A-1001 shipped; it arrives Friday.")
    state = result.recording.state
    print(f"Answer: {result.content}")
    print(f"Rounds: {state['rounds']}, accepted: {state['accepted']}")
    for line in result.narrative().splitlines():
        if "[Condition]" in line:
            print(line.strip())


if __name__ == "__main__":
    asyncio.run(main())
