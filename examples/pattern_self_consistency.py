"""Self-consistency: ask the same question five times and answer with the majority.

Run: python examples/pattern_self_consistency.py
The mock model is wrong once in a while; the vote outweighs the odd wrong sample, and the
recording keeps every sample, the tally and the answer's path back into a winning sample.
"""

import asyncio
import re

from agentfootprint import Agent, define_fact
from agentfootprint.compose import self_consistency
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock

samples = iter(["I get 418.", "408", "17 * 24 = 408", "It is 418.", "408"])

solver = Agent(
    provider=mock(respond=lambda request: next(samples)),
    model="mock",
    name="solver",
    system="Solve the arithmetic question; end with the number.",
    context=[define_fact(id="method", data="Multiply step by step: 17 * 24 = 17 * 20 + 17 * 4.")],
)


def last_number(answer: str) -> str:
    """The ballot: the last number in the answer, so wordings agree."""
    numbers = re.findall(r"\d+", answer)
    return numbers[-1] if numbers else answer


pattern = self_consistency(solver, n=5, vote=last_number)


async def main() -> None:
    result = await pattern.run("What is 17 * 24?")
    state = result.recording.state
    print(f"Answer: {result.content}")
    print(f"Votes: {dict(state['votes'])} (winner: {state['winner']})")
    print()
    print(backtrack(result))


if __name__ == "__main__":
    asyncio.run(main())
