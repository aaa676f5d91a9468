"""Explanations cross compositions: the upstream member's source is named, never "the user".

Each test plants one fact in an upstream agent whose answer a later member (or a merge, a loop
pass, a hand-off, a calling agent) consumes, and checks that ``backtrack`` names that fact with
a FROM hop saying whose answer the message was, that ``suspects_of`` offers every member's
sources labelled with their member, and that ``without`` on the runner flips the answer.
"""

from __future__ import annotations

from typing import Any

from agentfootprint import Agent, define_fact
from agentfootprint.compose import Conditional, Loop, Parallel, Sequence, swarm
from agentfootprint.explain import backtrack, localize_context_bug, trace_toolpack
from agentfootprint.explain._backtrack import Backtrack
from agentfootprint.explain._suspects import suspects_of
from agentfootprint.explain._toolpack import call_trace_tool
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs import Recording
from agentfootprint.runs._view import RunView

QUESTION = "What colour is the sky?"


def planted() -> Agent:
    """Says the sky is green only when its 'bad-fact' reaches its system prompt."""
    return Agent(provider=mock(respond=lambda r: "sky: green" if "green" in (r.system or "")
                               else "sky: blue"),
                 model="m", context=[define_fact(id="bad-fact", data="The sky is green."),
                                     define_fact(id="ok-fact", data="Water is wet.")])


def reporter() -> Agent:
    """Reports whatever message it is sent; its own fact is unrelated to the answer."""
    return Agent(provider=mock(respond=lambda r: "Report -> " + r.messages[-1]["content"]),
                 model="m", context=[define_fact(id="style", data="Be brief.")])


def born(chain: Backtrack) -> str:
    return chain.hops[-1].text


def kinds(chain: Backtrack) -> list[str]:
    return [hop.kind for hop in chain.hops]


def _never_calls_it_the_user(chain: Backtrack) -> None:
    assert not any(hop.kind == "BORN" and hop.text == "the user's message" for hop in chain.hops)


async def test_a_sequence_backtrack_names_the_upstream_fact() -> None:
    """Reproduction 2: the second agent's message is the first's answer, not the user's."""
    pipeline = Sequence(("first", planted()), ("second", reporter()))
    result = await pipeline.run(QUESTION)
    assert result.content == "Report -> sky: green"
    chain = backtrack(result)
    assert "bad-fact" in str(chain)
    assert born(chain) == "define_fact('bad-fact')"
    assert kinds(chain) == ["ANSWER", "READ", "FROM", "READ", "LANDED", "ALLOWED", "BORN"]
    handed = chain.hops[2].text
    assert "member 'second' was sent the answer of member 'first'" in handed
    assert "not the user's message" in handed
    assert chain.hops[3].runtime_stage_id is not None
    assert chain.hops[3].runtime_stage_id.startswith("first/call_llm#")
    _never_calls_it_the_user(chain)
    # the same chain from the recording, read back in "another process"
    again = backtrack(Recording.from_json(Recording.of(result).to_json()))
    assert [h.text for h in again.hops] == [h.text for h in chain.hops]


async def test_a_sequence_offers_every_members_sources_each_removable_by_id() -> None:
    pipeline = Sequence(("first", planted()), ("second", reporter()))
    result = await pipeline.run(QUESTION)
    labels = {s.id: s.label for s in suspects_of(result)}
    assert labels["bad-fact"] == "fact 'bad-fact' (in first)"
    assert labels["ok-fact"] == "fact 'ok-fact' (in first)"
    assert labels["style"] == "fact 'style' (in second)"
    handed = next(s for s in suspects_of(result) if s.kind == "user" and s.upstream)
    assert handed.label == "the answer of 'first' (in second)"
    assert not handed.removable
    assert result.source is pipeline
    fixed = await result.source.without({"bad-fact"}).run(QUESTION)
    assert fixed.content == "Report -> sky: blue"
    assert (await pipeline.without({"ok-fact"}).run(QUESTION)).content == result.content


async def test_the_recording_links_each_member_to_its_subflow() -> None:
    result = await Sequence(("first", planted()), ("second", reporter())).run(QUESTION)
    view = RunView.of(result)
    members = view.members
    assert list(members) == ["first", "second"]
    assert members["first"].ns.startswith("first#")
    assert members["first"].answer == "sky: green"
    assert members["second"].answer == result.content
    fed, user = view.feeders(view.call())
    assert [m.name for m in fed] == ["first"] and not user
    overview = call_trace_tool(trace_toolpack(result, max_chars=20000), "run_overview")
    assert "MEMBERS (2; " in overview and f"first → {members['first'].ns}" in overview


async def test_a_parallel_merge_backtracks_into_the_branch_that_said_it() -> None:
    both = Parallel(("a", planted()), ("b", reporter()))
    result = await both.run(QUESTION)
    assert result.content.startswith("a: sky: green")
    chain = backtrack(result)
    assert chain.answer == result.content
    assert chain.hops[1].kind == "FROM" and "member 'a'" in chain.hops[1].text
    assert chain.hops[0].runtime_stage_id == chain.hops[1].runtime_stage_id  # the merge step
    assert born(chain) == "define_fact('bad-fact')"
    labels = {s.label for s in suspects_of(result)}
    assert {"fact 'bad-fact' (in a)", "fact 'style' (in b)"} <= labels
    assert (await both.without({"bad-fact"}).run(QUESTION)).content.startswith("a: sky: blue")


async def test_a_conditional_crosses_into_the_upstream_of_the_chosen_branch() -> None:
    routed = Sequence(("first", planted()),
                      ("route", Conditional(("green", lambda i: "green" in i.message,
                                             reporter()), otherwise=reporter())))
    result = await routed.run(QUESTION)
    chain = backtrack(result)
    assert born(chain) == "define_fact('bad-fact')"
    assert "the answer of member 'first'" in chain.hops[2].text
    assert "route/green" in chain.hops[2].text
    _never_calls_it_the_user(chain)
    assert (await routed.without({"bad-fact"}).run(QUESTION)).content == "Report -> sky: blue"


async def test_a_loop_crosses_from_the_last_pass_back_through_earlier_ones() -> None:
    looped = Loop(Sequence(("first", planted()), ("second", reporter())), times=2)
    result = await looped.run(QUESTION)
    chain = backtrack(result)
    assert born(chain) == "define_fact('bad-fact')"
    assert "(pass 2)" in chain.hops[2].text
    labels = [s.label for s in suspects_of(result)]
    assert "fact 'bad-fact' (in body/first (pass 2))" in labels
    # pass 2's first agent was sent pass 1's report: that is named, not "the user"
    assert "the answer of 'body/second' (in body/first (pass 2))" in labels
    assert (await looped.without({"bad-fact"}).run(QUESTION)).content == "Report -> sky: blue"


async def test_a_swarm_hand_off_note_is_traced_to_the_agent_that_wrote_it() -> None:
    triage = Agent(provider=mock(respond=lambda r: (
        "sky: green" if "green" in (r.system or "") else "sky: blue") + "\nHANDOFF: desk"),
        model="m", context=[define_fact(id="bad-fact", data="The sky is green.")])
    desk = Agent(provider=mock(respond=lambda r: "Desk says " + r.messages[-1]["content"]
                               .split("\n")[-2]), model="m")
    relay = swarm(("triage", triage), ("desk", desk), max_hops=2)
    result = await relay.run(QUESTION)
    assert result.content == "Desk says sky: green"
    chain = backtrack(result)
    assert born(chain) == "define_fact('bad-fact')"
    assert "the answer of member 'triage'" in chain.hops[2].text
    assert (await relay.without({"bad-fact"}).run(QUESTION)).content == "Desk says sky: blue"


def _outer(inner: Agent) -> Agent:
    def respond(request: LLMRequest) -> Any:
        last = request.messages[-1]
        if last["role"] == "tool":
            return "Report -> " + last["content"]
        return {"tool_calls": [{"id": "c1", "name": "researcher",
                                "args": {"request": QUESTION}}]}

    return Agent(provider=mock(respond=respond), model="m",
                 tools=[inner.as_tool(name="researcher", description="Looks things up.")])


async def test_an_agent_used_as_a_tool_is_recorded_linked_and_crossed_into() -> None:
    outer = _outer(planted())
    result = await outer.run("Tell me about the sky")
    assert result.content == "Report -> sky: green"
    view = RunView.of(result)
    link = view.sub_runs["c1"]
    assert link.tool == "researcher"
    assert link.run_id == f"{result.run_id}:c1"
    assert link.recording is not None and link.recording.run_id == link.run_id
    chain = backtrack(result)
    assert kinds(chain) == ["ANSWER", "READ", "FROM", "READ", "LANDED", "ALLOWED", "BORN"]
    assert link.run_id in chain.hops[2].text and "tool 'researcher'" in chain.hops[2].text
    assert born(chain) == "define_fact('bad-fact')"
    offline = backtrack(Recording.from_json(Recording.of(result).to_json()))
    overview = call_trace_tool(trace_toolpack(result, max_chars=20000), "run_overview")
    assert f"c1 (researcher) → run {link.run_id}" in overview
    assert born(offline) == "define_fact('bad-fact')"
    labels = {s.id: s.label for s in suspects_of(result)}
    assert labels["bad-fact"] == "fact 'bad-fact' (in tool 'researcher')"
    assert (await outer.without({"bad-fact"}).run("x")).content == "Report -> sky: blue"


async def test_a_single_agent_is_explained_as_before() -> None:
    """Outside a composition nothing is relabelled and the user's message is the user's."""
    result = await planted().run(QUESTION)
    labels = [s.label for s in suspects_of(result)]
    assert labels == ["fact 'bad-fact'", "fact 'ok-fact'", "user 'user'"]
    chain = backtrack(result, suspect="user")
    assert born(chain) == "the user's message"
    assert RunView.of(result).members == {}



async def test_localize_rebuilds_the_whole_composition_and_proves_the_upstream_fact() -> None:
    """Without a rebuild, the re-runs come from ``result.source.without(...)``: the planted
    fact in the first member is CAUSAL, the second member's own fact is not."""
    result = await Sequence(("first", planted()), ("second", reporter())).run(QUESTION)
    report = await localize_context_bug(result, is_wrong=lambda answer: "green" in answer)
    assert report.verdict_of("bad-fact") == "CAUSAL"
    assert report.verdict_of("ok-fact") != "CAUSAL"
    assert report.verdict_of("style") != "CAUSAL"


async def test_localize_proves_the_fact_inside_an_agent_used_as_a_tool() -> None:
    """The inner agent runs again in each re-run (isolated itself), so its fact is proven a
    cause; the tool that carried it is necessary too, and the report says they act together."""
    result = await _outer(planted()).run("Tell me about the sky")
    report = await localize_context_bug(result, is_wrong=lambda a: "green" in a)
    assert report.verdict_of("bad-fact") == "CAUSAL"
    assert report.verdict_of("ok-fact") == "NOT CONFIRMED"
    assert {s.suspect.id for s in report.causal} == {"bad-fact", "researcher"}
    assert any(n.startswith("[together]") for n in report.notes)
