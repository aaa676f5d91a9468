"""find_dropped_context: absent culprits found in the record and confirmed by restoration."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, define_instruction
from agentfootprint.agent import sliding_window
from agentfootprint.agent._window import restoring
from agentfootprint.errors import ConfigurationError
from agentfootprint.explain._dropped import dropped_candidates, find_dropped_context
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest

EARLIER = [
    {"role": "user", "content": "From now on, always answer in French."},
    {"role": "assistant", "content": "D'accord."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "Quatre."},
    {"role": "user", "content": "And 3 + 3?"},
    {"role": "assistant", "content": "Six."},
]
CHECKPOINT = {"version": 1, "run_id": "earlier", "turn": 3, "history": EARLIER}


def answer(request: LLMRequest) -> str:
    """A model that follows the French instruction only when it can see it."""
    seen = " ".join(str(m["content"]) for m in request.messages)
    return "La capitale est Paris." if "in French" in seen else "The capital is Paris."


def is_wrong(text: str) -> bool:
    return not text.startswith("La ")


def build(restore: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
    indices = [int(r.split(":")[1]) for r in restore if r.startswith("window:")]
    window = sliding_window(turns=2)
    return Agent(provider=mock(respond=answer), model="m",
                 window=restoring(window, indices) if indices else window)


async def rerun(restore: frozenset[str], seed: int = 0) -> Any:
    return await build(restore, seed).run("What is the capital of France?",
                                          continue_from=CHECKPOINT)


async def test_instruction_pushed_out_of_the_window_is_found_and_confirmed() -> None:
    """The evicted instruction is a candidate, and restoring it (alone) fixes the answer."""
    result = await rerun(frozenset())
    assert result.content == "The capital is Paris."
    listed = {c.id: c for c in dropped_candidates(result)}
    assert set(listed) == {"window:0", "window:1", "window:2", "window:3"}
    assert "in French" in listed["window:0"].text
    report = await find_dropped_context(result, restore=rerun, is_wrong=is_wrong, reruns=3)
    assert report.baseline is not None and report.baseline.flips == 0
    assert [c.id for c in report.confirmed] == ["window:0"]
    assert report.find("window:0").fraction == "3/3"
    assert report.find("window:1").verdict == "NOT CONFIRMED"
    assert "CAUSAL" in str(report) and "window:0" in str(report)


async def test_control_with_nothing_dropped_reports_nothing() -> None:
    """No window and every injection fired: there is nothing to list and nothing re-run."""
    calls = 0

    def restore(ids: frozenset[str]) -> Agent:
        nonlocal calls
        calls += 1
        return Agent(provider=mock(respond=answer), model="m")

    agent = Agent(provider=mock(respond=answer), model="m",
                  context=[define_instruction(id="tone", prompt="Be brief.")])
    result = await agent.run("What is the capital of France?", continue_from=CHECKPOINT)
    report = await find_dropped_context(result, restore=restore, is_wrong=lambda a: True)
    assert report.candidates == [] and calls == 0
    assert str(report) == "Nothing available to the run was left out of the answering call."


async def test_unfired_injection_is_listed_with_its_reason() -> None:
    """A declared injection whose rule did not fire is a candidate, with the evaluator's why."""
    rule = define_instruction(id="french", prompt="Answer in French.",
                              active_when=lambda ctx: "bonjour" in ctx.user_message)
    agent = Agent(provider=mock(respond=answer), model="m", context=[rule])
    result = await agent.run("What is the capital of France?")
    [candidate] = dropped_candidates(result)
    assert candidate.id == "injection:french" and candidate.kind == "injection"
    assert candidate.tier == "listed"


async def test_restore_and_is_wrong_go_together() -> None:
    """Half a proof request is refused by name."""
    result = await rerun(frozenset())
    with pytest.raises(ConfigurationError, match="also needs restore="):
        await find_dropped_context(result, is_wrong=is_wrong)
    with pytest.raises(ConfigurationError, match="reruns=0"):
        await find_dropped_context(result, restore=rerun, is_wrong=is_wrong, reruns=0)
