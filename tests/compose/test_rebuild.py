"""Every composition rebuilds with its agents changed: ``without(ids)`` and ``_map_agents(fn)``.

An explanation proves a cause by re-running without it, so a composition must be rebuildable
from the runner that produced the result (``result.source``), with the named sources left out of
every member that has them, recursively through nested compositions and patterns.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentfootprint import Agent, ConfigurationError, LLMCall, define_fact
from agentfootprint.compose import (
    Conditional,
    Loop,
    Parallel,
    Sequence,
    debate,
    map_reduce,
    reflection,
    self_consistency,
    swarm,
    tree_of_thoughts,
)
from agentfootprint.compose._base import Composition
from agentfootprint.compose._pattern import Pattern
from agentfootprint.providers import mock

QUESTION = "colour?"


def planted(name: str = "Agent") -> Agent:
    return Agent(provider=mock(respond=lambda r: "green" if "green" in (r.system or "")
                               else "blue"), model="m", name=name,
                 context=[define_fact(id="bad-fact", data="The sky is green.")])


def plain(name: str = "Agent") -> Agent:
    return Agent(provider=mock(respond=lambda r: r.messages[-1]["content"]), model="m",
                 name=name)


def renamer(seen: list[str]) -> Callable[[Agent], Agent]:
    def rename(agent: Agent) -> Agent:
        seen.append(agent.name)
        return agent._replace(name=agent.name + "*")

    return rename


def agent_names(runner: object) -> list[str]:
    """Every agent name in a runner tree, depth first."""
    if isinstance(runner, Composition):
        return [n for r in runner.runners for n in agent_names(r)]
    return [runner.name] if isinstance(runner, Agent) else []


async def test_without_leaves_a_source_out_of_every_member_that_has_it() -> None:
    pipeline = Sequence(("a", planted("a")), ("b", Parallel(("x", planted("x")),
                                                            ("y", plain("y")))))
    result = await pipeline.run(QUESTION)
    assert result.source is pipeline
    assert result.content == "x: green\n\ny: green"
    rebuilt = pipeline.without({"bad-fact"})
    assert type(rebuilt) is Sequence and rebuilt is not pipeline
    assert (await rebuilt.run(QUESTION)).content == "x: blue\n\ny: blue"
    assert (await pipeline.run(QUESTION)).content == result.content  # the original is kept


def test_map_agents_reaches_every_agent_through_nested_compositions_and_keeps_llm_calls() -> None:
    call = LLMCall(provider=mock(script=["ok"]), model="m", name="call")
    tree = Sequence(("one", plain("one")),
                    ("two", Parallel(("p", plain("p")), ("q", Loop(plain("q"), times=2)))),
                    ("three", Conditional(("c", lambda i: True, plain("c")),
                                          otherwise=call)),
                    ("four", reflection(plain("w"), plain("r"), max_rounds=1,
                                        accept=lambda c: True)))
    seen: list[str] = []
    mapped = tree._map_agents(renamer(seen))
    assert seen == ["one", "p", "q", "c", "w", "r"]
    assert agent_names(mapped) == ["one*", "p*", "q*", "c*", "w*", "r*"]
    assert agent_names(tree) == ["one", "p", "q", "c", "w", "r"]
    assert mapped.runners[2].runners[-1] is call  # type: ignore[attr-defined]


@pytest.mark.parametrize("build", [
    lambda: reflection(planted("w"), plain("c"), max_rounds=2, accept=lambda c: True),
    lambda: debate(plain("pro"), plain("con"), planted("judge"), rounds=1),
    lambda: map_reduce(planted("m"), lambda xs: "+".join(xs), split=lambda t: [t, t]),
    lambda: map_reduce(plain("m"), planted("r"), split=lambda t: [t]),
    lambda: self_consistency(planted("s"), n=3),
    lambda: swarm(("a", planted("a")), ("b", plain("b")), max_hops=1),
    lambda: tree_of_thoughts(planted("t"), lambda th: 1.0, breadth=2, depth=1),
], ids=["reflection", "debate", "map_reduce", "map_reduce_runner", "self_consistency",
        "swarm", "tree_of_thoughts"])
async def test_every_pattern_rebuilds_with_the_same_options(build: Callable[[], Pattern]) -> None:
    pattern = build()
    before = await pattern.run(QUESTION)
    assert "green" in before.content
    assert before.source is pattern
    rebuilt = pattern.without({"bad-fact"})
    assert isinstance(rebuilt, Pattern) and rebuilt.kind == pattern.kind
    assert len(rebuilt.runners) == len(pattern.runners)
    after = await rebuilt.run(QUESTION)
    assert "green" not in after.content and "blue" in after.content


def test_without_refuses_a_bare_string_and_a_pattern_without_a_recipe() -> None:
    pipeline = Sequence(("a", plain("a")))
    with pytest.raises(ConfigurationError, match="collection of source ids"):
        pipeline.without("bad-fact")
    hand_made = Pattern(kind="Custom", chart=pipeline.chart, runners=[plain("a")])
    with pytest.raises(ConfigurationError, match="pattern functions"):
        hand_made.without({"bad-fact"})
