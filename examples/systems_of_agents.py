"""Systems of agents (USAGE.md §6): classify → parallel review → route, as one recording.

Run: python examples/systems_of_agents.py
"""

import asyncio

from agentfootprint import Agent, LLMCall, define_fact
from agentfootprint.compose import Conditional, Parallel, Sequence
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock


def call(name: str, answer: str) -> LLMCall:
    return LLMCall(provider=mock(reply=answer), model="mock", name=name)


classifier = call("classify", "URGENT: refund dispute on order #4411; a chargeback is threatened")
legal = call("legal", "Legal: a chargeback is likely; refund within 14 days.")
ethics = call("ethics", "Ethics: no concerns with a refund.")
urgent = Agent(
    provider=mock(respond=lambda request: "Escalated to the priority queue: "
                  + ("VIP customer." if "VIP" in (request.system or "") else "standard.")),
    model="mock", name="urgent",
    context=[define_fact(id="tier", data="This customer is a VIP.")],
)
normal = call("normal", "Queued for the next available agent.")

pipeline = Sequence(
    ("classify", classifier),
    ("review", Parallel(("legal", legal), ("ethics", ethics),
                        merge=lambda answers: "URGENT: " + " ".join(answers.values()))),
    ("respond", Conditional(("urgent", lambda i: i.message.startswith("URGENT"), urgent),
                            otherwise=normal)),
)


async def main() -> None:
    result = await pipeline.run("URGENT: refund dispute on order #4411")
    print(result.content)
    print()
    print(backtrack(result))   # one recording spans the whole pipeline


if __name__ == "__main__":
    asyncio.run(main())
