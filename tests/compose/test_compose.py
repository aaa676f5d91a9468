"""Sequence, Parallel, Conditional and Loop: runners mounted as subflows, one recording."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, LLMCall, ProviderError, define_fact
from agentfootprint.compose import Conditional, Loop, Parallel, Sequence
from agentfootprint.errors import RunError
from agentfootprint.explain import backtrack
from agentfootprint.providers import LLMRequest, mock


def echo(name: str) -> LLMCall:
    """An LLM call that answers ``name(<first 20 chars of its message>)``."""
    return LLMCall(provider=mock(respond=lambda r: f"{name}({r.messages[-1]['content'][:20]})"),
                   model="m", name=name)


def fixed(name: str, answer: str) -> LLMCall:
    return LLMCall(provider=mock(reply=answer), model="m", name=name)


async def test_sequence_feeds_each_answer_to_the_next_runner() -> None:
    """Each step receives the previous step's answer; the last answer is the result."""
    result = await Sequence(("a", echo("a")), ("b", echo("b"))).run("hello")
    assert result.content == "b(a(hello))"
    stages = [r.stage_id for r in result.recording.log.records if r.stage_id.endswith("call_llm")]
    assert stages == ["a/call_llm", "b/call_llm"]


async def test_parallel_runs_every_branch_on_the_same_message_and_merges() -> None:
    """Branches see the same message; merge receives their answers by id, in branch order."""
    seen: list[dict[str, str]] = []

    def merge(answers: dict[str, str]) -> str:
        seen.append(answers)
        return " + ".join(answers.values())

    result = await Parallel(("x", echo("x")), ("y", echo("y")), merge=merge).run("m")
    assert seen == [{"x": "x(m)", "y": "y(m)"}]
    assert result.content == "x(m) + y(m)"
    default = await Parallel(("x", fixed("x", "1")), ("y", fixed("y", "2"))).run("m")
    assert default.content == "x: 1\n\ny: 2"


async def test_conditional_routes_on_the_first_true_predicate_and_records_why() -> None:
    """The first predicate that holds wins; the decision and its inputs are on the record."""
    router = Conditional(("urgent", lambda i: i.message.startswith("URGENT"), fixed("u", "U")),
                         ("never", lambda i: i.message == "never", fixed("n", "N")),
                         otherwise=fixed("o", "O"))
    urgent = await router.run("URGENT: now")
    assert urgent.content == "U"
    calm = await router.run("whenever")
    assert calm.content == "O"
    route = next(r for r in calm.recording.log.records if r.stage_id == "route")
    rules = route.decision["evidence"]["rules"]
    assert [r["matched"] for r in rules] == [False, False]
    assert "No rules matched, fell back to default: otherwise." in calm.narrative()


async def test_a_conditional_predicate_that_raises_fails_the_run_naming_its_branch() -> None:
    """A raising predicate is an error, never a silent route to ``otherwise``."""
    router = Conditional(("vip", lambda i: i.message["tier"] == "gold", fixed("v", "V")),
                         otherwise=fixed("o", "O"), name="Triage")
    with pytest.raises(RunError) as caught:
        await router.run("hello")
    assert str(caught.value).startswith("Triage: the predicate of branch 'vip' raised "
                                        "TypeError: ")
    assert "return False when the branch does not apply" in str(caught.value)


async def test_a_predicate_reads_the_pipelines_original_message_at_any_depth() -> None:
    """``.message`` is the previous answer; ``.original`` is what the pipeline was run with,
    handed down through nested compositions (agents still receive only their message)."""
    seen: list[tuple[str, str]] = []

    def urgent(i: Any) -> bool:
        seen.append((i.message, i.original))
        return bool(i.original.startswith("URGENT"))

    router = Conditional(("urgent", urgent, fixed("u", "escalated")),
                         otherwise=fixed("o", "queued"))
    inner = Sequence(("summarize", fixed("s", "a calm summary")), ("route", router))
    pipeline = Sequence(("classify", fixed("c", "billing")), ("handle", inner))
    assert (await pipeline.run("URGENT: chargeback")).content == "escalated"
    assert (await pipeline.run("when you can")).content == "queued"
    assert seen == [("a calm summary", "URGENT: chargeback"),
                    ("a calm summary", "when you can")]


async def test_loop_repeats_on_its_own_answer_until_done() -> None:
    """A loop feeds the answer back; it stops after `times` passes or when `until` holds."""
    assert (await Loop(echo("r"), times=3).run("d")).content == "r(r(r(d)))"
    stopped = await Loop(echo("r"), times=5, until=lambda a: a.count("r(") >= 2).run("d")
    assert stopped.content == "r(r(d))"
    with pytest.raises(ConfigurationError, match="times"):
        Loop(echo("r"), times=0)


async def test_one_recording_spans_nested_pipelines_and_backtracks_into_them() -> None:
    """Backtrack crosses from the pipeline into the nested agent that produced the answer."""
    vip = Agent(provider=mock(respond=lambda r: "VIP" if "VIP" in (r.system or "") else "no"),
                model="m", context=[define_fact(id="tier", data="The customer is a VIP.")])
    pipeline = Sequence(("first", fixed("f", "URGENT: x")),
                        ("respond", Conditional(("u", lambda i: i.message.startswith("URGENT"),
                                                 vip), otherwise=fixed("o", "O"))))
    result = await pipeline.run("go")
    assert result.content == "VIP"
    chain = backtrack(result)
    assert chain.hops[1].runtime_stage_id.startswith("respond/u/call_llm#")
    assert chain.hops[-1].text == "define_fact('tier')"


async def test_agent_events_reach_their_listeners_inside_a_pipeline() -> None:
    """An agent's on() listeners hear its events when it runs inside a composition."""
    inner = fixed("inner", "done")
    heard: list[Any] = []
    inner.on("stream.llm_end", heard.append)
    await Sequence(("step", inner)).run("go")
    assert [e.payload["content"] for e in heard] == ["done"]


async def test_a_provider_error_inside_surfaces_with_its_status() -> None:
    """A failing model inside a pipeline raises ProviderError (status kept), not StageError."""
    def boom(request: LLMRequest) -> Any:
        raise ProviderError("overloaded", provider="mock", status=529)

    broken = LLMCall(provider=mock(respond=boom), model="m")
    with pytest.raises(ProviderError) as raised:
        await Sequence(("ok", fixed("a", "x")), ("bad", broken)).run("go")
    assert raised.value.status == 529


def test_bad_shapes_are_refused_at_construction() -> None:
    """Wrong step shapes, duplicate ids and non-runners are configuration errors."""
    with pytest.raises(ConfigurationError):
        Sequence()
    with pytest.raises(ConfigurationError, match="not a runner"):
        Sequence(("a", object()))
    with pytest.raises(ConfigurationError, match="distinct"):
        Parallel(("a", echo("a")), ("a", echo("b")))
    with pytest.raises(ConfigurationError, match="otherwise"):
        Conditional(("otherwise", lambda i: True, echo("a")), otherwise=echo("b"))


async def test_loop_wall_time_budget_stops_it_and_a_budget_is_mandatory() -> None:
    """``max_seconds`` ends the loop after the pass that spent it; no budget at all is refused."""
    stopped = await Loop(echo("r"), max_seconds=1e-9).run("d")
    assert stopped.content == "r(d)"
    with pytest.raises(ConfigurationError, match="needs a budget"):
        Loop(echo("r"))
    with pytest.raises(ConfigurationError, match="max_seconds=0"):
        Loop(echo("r"), max_seconds=0)
