"""Proof on a real sampling model: the flip-rate rule convicts nothing that does not matter.

SmolLM2 (135M) at temperature 1.3 answers a coin-flip question with a few random words. Call
an answer "wrong" when it has more than one word (most draws do, some do not): a fact about the
weekday plays no part, so without it the answer flips about as often as with nothing removed —
the rule must not call it CAUSAL, whatever the draws.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentfootprint import Agent, ModelSettings, define_fact
from agentfootprint.explain import localize_context_bug, wrong_if
from agentfootprint.providers._openai import OpenAIProvider

pytestmark = pytest.mark.e2e

MODEL = "smollm2"
QUESTION = "Flip a coin and answer with one word: heads or tails."


@pytest.fixture
async def provider(llm_base_url: str) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(base_url=llm_base_url, api_key="none", model=MODEL, timeout=120.0)
    try:
        yield p
    finally:
        await p.client.close()


async def test_a_sampling_real_model_gets_no_causal_where_flip_rates_do_not_differ(
        provider: OpenAIProvider) -> None:
    assert provider.deterministic is False
    agent = Agent(provider=provider, model=MODEL,
                  context=[define_fact(id="weekday", data="Today is Tuesday.")],
                  settings=ModelSettings(temperature=1.3, max_tokens=4))
    wrong = wrong_if(matches=r"\w\W+\w")
    draws = [await agent.run(QUESTION) for _ in range(6)]
    result = next((d for d in draws if wrong(d.content)), None)
    assert result is not None, [d.content for d in draws]
    report = await localize_context_bug(result, is_wrong=wrong, budget=48)
    assert not report.deterministic
    assert report.baseline is not None and report.baseline.runs >= 8
    assert report.causal == [], str(report)
    item = report.find("weekday")
    assert item.verdict in ("NOT CONFIRMED", "INCONCLUSIVE", None)
    print(f"\nbaseline {report.baseline.fraction} flipped; weekday: {item.verdict} "
          f"({item.fraction}, p = {item.p_value}); {report.runs_used} re-runs")
