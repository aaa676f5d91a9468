"""Structured output against the real local model (SmolLM2-135M behind llama-cpp-python 0.3.36's
OpenAI-compatible server, the one the CI starts).

That server takes ``response_format={"type": "json_object", "schema": ...}`` and turns the schema
into a grammar, so even a 135M model's answer is valid JSON of the schema: these tests allow no
re-ask (``output_retries=0``) — the first answer must validate. The schemas are small and closed
(an enum and a boolean), so ``max_tokens`` can never cut an answer short. What the model says is
not asserted, only that it is a valid instance of the type.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

import pytest
from pydantic import BaseModel

from agentfootprint import Agent, LLMCall, ModelSettings
from agentfootprint.errors import ProviderError
from agentfootprint.explain import backtrack
from agentfootprint.providers._base import LLMRequest
from agentfootprint.providers._openai import OpenAIProvider
from agentfootprint.runs import trace

pytestmark = pytest.mark.e2e

MODEL = "smollm2"
SETTINGS = ModelSettings(temperature=0.0, max_tokens=64)


class Verdict(BaseModel):
    answer: Literal["yes", "no"]
    confident: bool


@dataclass
class Weather:
    sky: Literal["sunny", "cloudy", "rainy"]
    warm: bool


@pytest.fixture
async def provider(llm_base_url: str) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(base_url=llm_base_url, api_key="none", model=MODEL, timeout=120.0,
                       structured_output="json_object")
    try:
        yield p
    finally:
        await p.client.close()


async def test_agent_answer_is_valid_json_that_validates_first_time(
        provider: OpenAIProvider) -> None:
    agent = Agent(provider=provider, model=MODEL, output_type=Verdict, output_retries=0,
                  system="Answer the question.", settings=SETTINGS)
    result = await agent.run("Is Paris in France?")
    assert isinstance(result.output, Verdict)
    assert Verdict.model_validate(json.loads(result.content)) == result.output
    (attempt,) = result.recording.state[trace.OUTPUT_ATTEMPTS]
    assert attempt["valid"] and attempt["errors"] == []
    assert result.recording.state[trace.OUTPUT_SCHEMA]["mode"] == "json_object"
    assert result.input_tokens > 0 and result.output_tokens > 0
    chain = backtrack(result, field="answer")
    assert chain.hops[0].kind == "FIELD"
    assert chain.hops[0].runtime_stage_id == attempt["call"]


async def test_streamed_llm_call_with_a_dataclass_validates(provider: OpenAIProvider) -> None:
    call = LLMCall(provider=provider, model=MODEL, output_type=Weather, output_retries=0,
                   stream=True, settings=SETTINGS)
    result = await call.run("Describe the weather on a summer day.")
    assert isinstance(result.output, Weather)
    assert result.output.sky in ("sunny", "cloudy", "rainy")


async def test_the_server_refuses_json_schema_and_the_error_names_the_fix(
        llm_base_url: str) -> None:
    """What llama-cpp-python 0.3.36's server accepts, checked on the real server: the default
    json_schema dialect is refused (HTTP 500), not retried, with the option to use."""
    plain = OpenAIProvider(base_url=llm_base_url, api_key="none", model=MODEL, timeout=120.0)
    try:
        with pytest.raises(ProviderError, match="structured_output='json_object'") as raised:
            await plain.complete(LLMRequest(
                model=MODEL, messages=[{"role": "user", "content": "Is Paris in France?"}],
                max_tokens=8, output_schema={"name": "Verdict", "strict": True,
                                             "schema": Verdict.model_json_schema()}))
        assert raised.value.retryable is False
    finally:
        await plain.client.close()
