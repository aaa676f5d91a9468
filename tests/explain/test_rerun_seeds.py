"""Each isolated re-run on a sampling model asks the server for its own, repeatable draw."""

from __future__ import annotations

from typing import Any

from agentfootprint import Agent, ModelSettings, define_fact
from agentfootprint.explain import localize_context_bug
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.providers._base import Provider
from agentfootprint.providers._openai import OpenAIProvider


async def test_every_rerun_of_a_sampling_model_gets_its_own_seed() -> None:
    seeds: list[Any] = []

    def respond(request: LLMRequest) -> str:
        seeds.append(request.seed)
        return "WRONG" if "planted" in (request.system or "") else "fine"

    provider: Provider = mock(respond=respond, deterministic=False)
    agent = Agent(provider=provider, model="m", settings=ModelSettings(temperature=0.7),
                  context=[define_fact(id="p", data="planted"), define_fact(id="q", data="ok")])
    result = await agent.run("Go?")
    seeds.clear()
    report = await localize_context_bug(result, is_wrong=lambda a: "WRONG" in a)
    assert report.verdict_of("p") == "CAUSAL"
    assert len(seeds) == report.runs_used and len(set(seeds)) == len(seeds)
    assert seeds == sorted(seeds) and seeds[0] == 0


def test_the_seed_reaches_an_openai_compatible_server() -> None:
    provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="none", model="m")
    request = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}], seed=7)
    assert provider.params(request)["seed"] == 7
    assert "seed" not in provider.params(request.model_copy(update={"seed": None}))
