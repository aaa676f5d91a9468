"""The request ``call_llm`` builds in straight-line code is what ``model_construct`` builds, and
its inlined stable prefix of an agent without context is what ``cache_prefix`` computes."""

from __future__ import annotations

import asyncio
from typing import Any

from agentfootprint import Agent, LLMCall, tool
from agentfootprint.context._injection import Injection, Trigger
from agentfootprint.providers import LLMRequest, MockProvider, mock


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _same_request(sent: LLMRequest) -> None:
    """``sent`` is exactly ``LLMRequest.model_construct`` of the fields the loop gives."""
    given = {name: sent.__dict__[name] for name in sent.model_fields_set}
    built = LLMRequest.model_construct(**given)
    assert type(sent) is LLMRequest
    assert list(sent.__dict__.items()) == list(built.__dict__.items())  # values and order
    assert sent.model_fields_set == built.model_fields_set == {
        "model", "messages", "system", "tools", "temperature", "max_tokens", "stop",
        "tool_choice", "seed", "cache"}
    assert sent.__pydantic_extra__ is None and sent.__pydantic_private__ is None
    assert LLMRequest.model_validate(sent.model_dump()) == sent
    sent.tool_choice = "auto"  # a fresh fields set per request: one change stays its own


def _requests(runner: Any, provider: Any) -> list[LLMRequest]:
    asyncio.run(runner.run("go"))
    requests: list[LLMRequest] = provider.requests
    for sent in requests:
        _same_request(sent)
    assert len({id(r.model_fields_set) for r in requests}) == len(requests)
    return requests


def test_an_agent_without_context_marks_its_prompt_tools_and_messages() -> None:
    provider = mock(script=[{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "3"])
    agent = Agent(provider=provider, system="You add.", tools=[add])
    first, second = _requests(agent, provider)
    assert first.cache == {"system": len("You add."), "tools": 1, "messages": 1}
    assert second.cache == {"system": len("You add."), "tools": 1, "messages": 3}
    assert first.system == "You add." and [t["name"] for t in first.tools] == ["add"]


def test_a_single_call_marks_its_prompt_only_and_nothing_without_one() -> None:
    provider = mock(reply="hi")
    (sent,) = _requests(LLMCall(provider=provider, system="Be brief."), provider)
    assert sent.cache == {"system": len("Be brief."), "tools": 0, "messages": 0}
    provider = mock(reply="hi")
    (sent,) = _requests(LLMCall(provider=provider), provider)
    assert sent.cache is None and sent.system is None and sent.tools == []


def test_an_agent_with_context_still_gets_the_prefix_of_its_slots() -> None:
    fact = Injection(id="tone", flavor="fact", trigger=Trigger("always"), system="Be kind.",
                     cache="never")
    provider = mock(reply="ok")
    agent = Agent(provider=provider, system="You add.", tools=[add], context=[fact])
    (sent,) = _requests(agent, provider)
    assert sent.system is not None and sent.system.endswith("Be kind.")
    assert sent.cache == {"system": len("You add."), "tools": 1, "messages": 1}


def test_the_usage_row_keeps_the_prefix_the_request_was_sent_with() -> None:
    provider = mock(reply="ok")
    agent = Agent(provider=provider, system="You add.", tools=[add])
    result = asyncio.run(agent.run("go"))
    (row,) = result.recording.state["llm_usage"]
    assert row["cache"] == provider.requests[0].cache
    assert isinstance(provider, MockProvider)


def test_the_latency_is_milliseconds_rounded_to_three_decimals() -> None:
    """``record_call``'s rounding (an int division) gives ``round(ms, 3)``'s three decimals."""
    for seconds in (0.0, 1e-7, 0.0004999, 0.0123456789, 1.2345678, 3600.0):
        assert round(seconds * 1_000_000) / 1000 == round(seconds * 1000, 3)
    provider = mock(script=[{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "3"])
    result = asyncio.run(Agent(provider=provider, tools=[add]).run("go"))
    latencies = result.recording.state["llm_latency_ms"]
    assert len(latencies) == 2
    assert all(type(x) is float and x >= 0 and round(x, 3) == x for x in latencies)
