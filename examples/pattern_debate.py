"""Debate: a proponent and an opponent argue for two rounds, then a judge rules.

Run: python examples/pattern_debate.py
Every speech lands in the transcript the judge reads; the verdict backtracks into the judge.
"""

import asyncio

from agentfootprint import LLMCall
from agentfootprint.compose import debate
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock

proponent = LLMCall(provider=mock(script=[
    "A cache cuts the p99 latency from 800 ms to 90 ms.",
    "Stale reads last at most 30 s, which the product team accepted.",
]), model="mock", name="proponent", system="Argue for adding the cache.")
opponent = LLMCall(provider=mock(script=[
    "A cache serves stale prices.",
    "Invalidation bugs are the usual outage cause.",
]), model="mock", name="opponent", system="Argue against adding the cache.")
judge = LLMCall(
    provider=mock(respond=lambda request: "Verdict: add the cache with a 30 s TTL — "
                  f"{request.messages[-1]['content'].count('round')} arguments weighed."),
    model="mock", name="judge", system="Weigh both sides and rule.")

pattern = debate(proponent, opponent, judge, rounds=2)


async def main() -> None:
    result = await pattern.run("Should the pricing API get a read cache?")
    for entry in result.recording.state["transcript"]:
        print(f"{entry['speaker']:>9}: {entry['text']}")
    print()
    print(result.content)
    print(backtrack(result).hops[1].text)


if __name__ == "__main__":
    asyncio.run(main())
