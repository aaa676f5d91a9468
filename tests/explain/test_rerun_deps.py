"""An explanation's re-runs get the run's deps when the caller passes them again (a recording
never holds deps): a live, side-effect-free tool that reads ``ctx.deps`` then completes its
re-run, so the verdict can be reached; without them the re-run is INCONCLUSIVE, naming why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentfootprint import Agent, RunContext, define_fact, tool
from agentfootprint.explain import localize_context_bug
from agentfootprint.explain._whatif import bisect_culprits, rerun_without_sources
from agentfootprint.providers import LLMRequest, mock


@dataclass
class Deps:
    stock: dict[str, str] = field(default_factory=lambda: {"A-1": "3 left", "B-2": "none left"})
    reads: list[str] = field(default_factory=list)


@tool(side_effects=False)
def stock(ctx: RunContext[Deps], order_id: str) -> str:
    """Stock level of an order's item (safe to repeat)."""
    ctx.deps.reads.append(order_id)
    return ctx.deps.stock[order_id]


def _agent() -> Agent:
    def respond(request: LLMRequest) -> Any:
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:  # the fact steers which order is looked up
            target = "A-1" if "order A-1" in (request.system or "") else "B-2"
            return {"tool_calls": [{"name": "stock", "args": {"order_id": target}}]}
        return f"In stock: {results[-1]}"

    return Agent(provider=mock(respond=respond), model="m", tools=[stock],
                 context=[define_fact(id="order", data="The customer means order A-1."),
                          define_fact(id="tone", data="Be friendly.")])


async def test_deps_given_again_complete_the_rerun_and_prove_the_cause() -> None:
    deps = Deps()
    agent = _agent()
    result = await agent.run("Is my item in stock?", deps=deps)
    assert result.content == "In stock: 3 left"
    report = await localize_context_bug(result, is_wrong=lambda a: "3 left" in a, deps=deps)
    assert ("order",) in [c.members for c in report.causes]  # (and the tool itself)
    assert not [n for n in report.notes if "reads ctx.deps" in n]
    assert "B-2" in deps.reads  # the re-run without the fact looked up the other order, live


async def test_without_deps_the_rerun_is_inconclusive_and_says_why() -> None:
    agent = _agent()
    result = await agent.run("Is my item in stock?", deps=Deps())
    probe = await rerun_without_sources(result, rebuild=agent.without, sources=["order"],
                                        is_wrong=lambda a: "3 left" in a)
    assert probe.verdict == "INCONCLUSIVE" and "reads ctx.deps" in probe.why
    again = await rerun_without_sources(result, rebuild=agent.without, sources=["order"],
                                        is_wrong=lambda a: "3 left" in a, deps=Deps())
    assert again.verdict == "CAUSAL"


async def test_bisection_takes_deps_too() -> None:
    agent = _agent()
    result = await agent.run("Is my item in stock?", deps=Deps())
    found = await bisect_culprits(result, rebuild=agent.without,
                                  is_wrong=lambda a: "3 left" in a, deps=Deps())
    assert found.verdict == "CAUSAL" and ["order"] in [sorted(c) for c in found.culprits]
