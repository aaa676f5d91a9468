"""The named patterns: votes, rounds, hand-offs and budgets, each recorded as one run."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, LLMCall, define_fact
from agentfootprint.compose import Sequence
from agentfootprint.compose._patterns import (
    Handoff,
    Pattern,
    Thought,
    debate,
    map_reduce,
    reflection,
    self_consistency,
    swarm,
    tree_of_thoughts,
)
from agentfootprint.errors import RunError
from agentfootprint.explain import backtrack
from agentfootprint.providers import LLMRequest, mock


def scripted(name: str, *replies: str) -> LLMCall:
    return LLMCall(provider=mock(script=list(replies)), model="m", name=name)


def responding(name: str, fn: Callable[[str], str]) -> LLMCall:
    """An LLM call that answers ``fn(<its message>)``."""
    return LLMCall(provider=mock(respond=lambda r: fn(r.messages[-1]["content"])), model="m",
                   name=name)


def sent(runner: LLMCall) -> list[str]:
    """Every message a runner's mock provider received, in order."""
    return [r.messages[-1]["content"] for r in runner.spec.provider.requests]  # type: ignore[attr-defined]


def calls(result: Any) -> list[str]:
    """The stage ids of every LLM call in the recording, in order."""
    return [r.stage_id for r in result.recording.log.records if r.stage_id.endswith("call_llm")]


# -- self_consistency --------------------------------------------------------------------------


async def test_self_consistency_answers_with_the_majority_and_records_every_sample() -> None:
    """Each sample is its own branch; the tally and the winner are on the record."""
    pattern = self_consistency(scripted("s", "41", "42", " 42 "), n=3)
    result = await pattern.run("6 * 7?")
    assert isinstance(pattern, Pattern)
    assert result.content == "42"
    assert calls(result) == ["sample-1/call_llm", "sample-2/call_llm", "sample-3/call_llm"]
    state = result.recording.state
    assert state["votes"] == {"41": 1, "42": 2}
    assert state["winner"] == "sample-2"
    assert '"majority: 2 of 3 votes": ballot="42", votes=2, and chose Answer from sample-2' \
        in result.narrative()


async def test_self_consistency_ties_go_to_the_first_ballot_or_to_tie() -> None:
    """A tie takes the ballot cast first, unless a tie function picks among the tied."""
    first = await self_consistency(scripted("s", "a", "b"), n=2).run("q")
    assert first.content == "a"
    assert "tie at 1 of 2 votes: first cast wins" in first.narrative()
    picked: list[list[str]] = []

    def longest(tied: list[str]) -> str:
        picked.append(tied)
        return max(tied, key=len)

    chosen = await self_consistency(scripted("s", "no", "yes!", "yes", "no"), n=4,
                                    vote=lambda a: a.strip("!"), tie=longest).run("q")
    assert picked == [["no", "yes!"]]
    assert chosen.content == "yes!"
    assert "tie at 2 of 4 votes: broken by tie()" in chosen.narrative()
    bad = self_consistency(scripted("s", "a", "b"), n=2, tie=lambda tied: "c")
    with pytest.raises(RunError, match="not one of the tied answers"):
        await bad.run("q")


async def test_self_consistency_vote_decides_which_answers_agree() -> None:
    """vote() extracts the ballot, so differently worded answers count as one."""
    number = re.compile(r"\d+")
    runner = scripted("s", "It is 12.", "Twelve: 12", "I think 13")
    result = await self_consistency(runner, n=3,
                                    vote=lambda a: number.findall(a)[-1]).run("q")
    assert result.content == "It is 12."
    assert result.recording.state["votes"] == {"12": 2, "13": 1}


# -- reflection --------------------------------------------------------------------------------


async def test_reflection_revises_until_the_critic_accepts() -> None:
    """The writer sees the critique; the answer is the accepted draft, not the critique."""
    writer = scripted("writer", "draft 1", "draft 2")
    critic = scripted("critic", "Too vague.", "APPROVED")
    result = await reflection(writer, critic, max_rounds=3,
                              accept=lambda c: "APPROVED" in c).run("Write a haiku")
    assert result.content == "draft 2"
    assert result.stopped_early is None
    assert calls(result) == ["writer/call_llm", "critic/call_llm"] * 2
    assert sent(writer)[1] == ("Task:\nWrite a haiku\n\nYour previous draft:\ndraft 1\n\n"
                               "Critique:\nToo vague.\n\nWrite an improved draft.")
    assert sent(critic)[1] == "Task:\nWrite a haiku\n\nDraft:\ndraft 2"
    state = result.recording.state
    assert (state["rounds"], state["accepted"]) == (2, True)


async def test_reflection_stops_at_max_rounds_with_the_last_draft() -> None:
    """Out of rounds: the last draft is the answer and stopped_early says why."""
    writer = responding("writer", lambda m: f"draft after {m.count('Critique')} critiques")
    critic = responding("critic", lambda m: "No.")
    result = await reflection(writer, critic, max_rounds=2, accept=lambda c: False).run("x")
    assert result.content == "draft after 1 critiques"
    assert result.stopped_early == "max_rounds"
    assert len(calls(result)) == 4


# -- debate ------------------------------------------------------------------------------------


async def test_debate_alternates_for_the_rounds_then_the_judge_rules() -> None:
    """Every speech lands in the transcript; the judge reads all of it and answers."""
    pro = responding("pro", lambda m: f"pro{m.count('[')}")
    con = responding("con", lambda m: f"con{m.count('[')}")
    judge = responding("judge", lambda m: "verdict on " + ",".join(re.findall(r"\]: (\w+)", m)))
    result = await debate(pro, con, judge, rounds=2).run("Tabs or spaces?")
    assert result.content == "verdict on pro0,con1,pro2,con3"
    assert [e["speaker"] for e in result.recording.state["transcript"]] == \
        ["proponent", "opponent"] * 2
    assert calls(result) == ["proponent/call_llm", "opponent/call_llm"] * 2 + ["judge/call_llm"]
    assert "[proponent, round 1]: pro0\n\n[opponent, round 1]: con1" in sent(pro)[1]
    assert sent(con)[0].endswith("You speak as the opponent; make your case.")


# -- map_reduce --------------------------------------------------------------------------------


async def test_map_reduce_maps_every_item_then_reduces_in_item_order() -> None:
    """Each item goes to its own mapper slot; the reducer sees the answers numbered."""
    mapper = responding("mapper", str.upper)
    reducer = responding("reducer", lambda m: f"<{m}>")
    result = await map_reduce(mapper, reducer, split=lambda s: s.split(","),
                              max_items=5).run("a,b,c")
    assert result.content == "<[1] A\n\n[2] B\n\n[3] C>"
    assert calls(result) == ["item-1/call_llm", "item-2/call_llm", "item-3/call_llm",
                             "reducer/call_llm"]
    fan_out = next(r for r in result.recording.log.records if r.stage_id == "fan_out")
    assert fan_out.decision is not None
    assert fan_out.decision["selected"] == ["item-1", "item-2", "item-3"]
    joined = await map_reduce(mapper, " | ".join, split=str.split).run("x y")
    assert joined.content == "X | Y"
    assert joined.recording.state["mapped"] == ["X", "Y"]


async def test_map_reduce_refuses_a_split_over_budget_or_malformed() -> None:
    """Too many items, none, or not strings: the run fails and says how to fix it."""
    mapper = responding("mapper", str.upper)
    with pytest.raises(RunError, match="more than max_items=2; raise max_items="):
        await map_reduce(mapper, "".join, split=list, max_items=2).run("abc")
    with pytest.raises(RunError, match="no items"):
        await map_reduce(mapper, "".join, split=lambda s: []).run("abc")
    with pytest.raises(RunError, match="return a list of strings"):
        await map_reduce(mapper, "".join, split=lambda s: s).run("abc")


# -- tree_of_thoughts --------------------------------------------------------------------------


def proposer() -> LLMCall:
    """Proposes ``<level>.<option>`` from the message's step count and option number."""
    def propose(message: str) -> str:
        option = re.search(r"option (\d+) of", message)
        level = message.count("\n1. ") + message.count("\n2. ") + 1
        return f"{level}.{option.group(1) if option else '?'}"

    return responding("propose", propose)


async def test_tree_of_thoughts_keeps_the_beam_and_answers_with_the_best_leaf() -> None:
    """Each level expands the kept thoughts; the best of the last level is the answer."""
    seen: list[Thought] = []

    def score(thought: Thought) -> float:
        seen.append(thought)
        return {"1.2": 9, "1.1": 5, "2.1": 1, "2.2": 3}.get(thought.text, 0) + len(thought.path)

    result = await tree_of_thoughts(proposer(), score, breadth=2, depth=2, beam=2).run("P")
    assert result.content == "2.2"
    assert [t.text for t in seen] == ["1.1", "1.2", "2.1", "2.2", "2.1", "2.2"]
    assert seen[2].path == ("1.2",)  # the best first-level thought is expanded first
    assert seen[4].path == ("1.1",)
    frontier = result.recording.state["frontier"]
    assert frontier[0]["path"] == ["1.2", "2.2"]
    assert calls(result) == [f"thought-{i}/call_llm" for i in (1, 2, 1, 2, 3, 4)]


async def test_tree_of_thoughts_stops_early_and_scores_with_a_runner() -> None:
    """stop_at ends the search; a scoring runner's first number is the score."""
    scorer = responding("scorer", lambda m: "Score: 8/10" if "1.2" in m else "3")
    result = await tree_of_thoughts(proposer(), scorer, breadth=2, depth=5,
                                    stop_at=7).run("P")
    assert result.content == "1.2"
    assert result.recording.state["level"] == 1
    assert calls(result) == ["thought-1/propose/call_llm", "thought-1/rate/call_llm",
                             "thought-2/propose/call_llm", "thought-2/rate/call_llm"]
    silent = responding("scorer", lambda m: "no idea")
    with pytest.raises(RunError, match="holds no number"):
        await tree_of_thoughts(proposer(), silent, breadth=2, depth=1).run("P")


# -- swarm -------------------------------------------------------------------------------------


async def test_swarm_follows_handoff_lines_until_an_agent_answers() -> None:
    """An agent hands off with a HANDOFF line; the next one gets the task and the note."""
    triage = scripted("triage", "A refund question.\nHANDOFF: billing")
    billing = responding("billing", lambda m: "Refunded." if "refund" in m else "?")
    result = await swarm(("triage", triage), ("billing", billing), max_hops=3).run("refund me")
    assert result.content == "Refunded."
    assert result.stopped_early is None
    assert sent(billing) == ["refund me\n\nHanded over by triage:\n"
                             "A refund question.\nHANDOFF: billing"]
    state = result.recording.state
    assert (state["relay"], state["hops"]) == (["triage", "billing"], 1)


async def test_swarm_hop_budget_stops_a_ping_pong() -> None:
    """Routing back and forth ends at max_hops with the last answer and stopped_early."""
    turns: list[Handoff] = []

    def route(turn: Handoff) -> str:
        turns.append(turn)
        return "b" if turn.agent == "a" else "a"

    a = responding("a", lambda m: "from a")
    b = responding("b", lambda m: "from b")
    result = await swarm(("a", a), ("b", b), route=route, max_hops=2, start="b").run("go")
    assert result.content == "from b"
    assert result.stopped_early == "max_hops"
    assert result.recording.state["relay"] == ["b", "a", "b"]
    assert [t.agent for t in turns] == ["b", "a", "b"]
    assert [t.hops for t in turns] == [0, 1, 2]
    with pytest.raises(RunError, match="not an agent here"):
        await swarm(("a", a), ("b", b), route=lambda t: "c", max_hops=2).run("go")


# -- backtracking and nesting ------------------------------------------------------------------


async def test_backtrack_crosses_from_the_swarm_into_the_agent_that_answered() -> None:
    """The answer's chain runs through the last agent's call to the fact it was given."""
    vip = Agent(provider=mock(respond=lambda r: "Priority refund." if "VIP" in (r.system or "")
                              else "Standard refund."),
                model="m", context=[define_fact(id="tier", data="The customer is a VIP.")])
    triage = scripted("triage", "HANDOFF: refunds")
    result = await swarm(("triage", triage), ("refunds", vip), max_hops=2).run("refund")
    assert result.content == "Priority refund."
    chain = backtrack(result)
    assert chain.hops[1].runtime_stage_id is not None
    assert chain.hops[1].runtime_stage_id.startswith("refunds/call_llm#")
    assert chain.hops[-1].text == "define_fact('tier')"


async def test_backtrack_crosses_into_a_sample_that_cast_the_winning_vote() -> None:
    """A self-consistency answer backtracks into a sample branch and its context."""
    count = {"n": 0}

    def answer(request: LLMRequest) -> str:
        count["n"] += 1
        return "Paris" if count["n"] != 1 else "Lyon"

    sampler = Agent(provider=mock(respond=answer), model="m",
                    context=[define_fact(id="geo", data="The capital of France is Paris.")])
    result = await self_consistency(sampler, n=3).run("Capital of France?")
    assert result.content == "Paris"
    chain = backtrack(result)
    assert chain.hops[1].runtime_stage_id is not None
    assert re.match(r"sample-[23]/call_llm#", chain.hops[1].runtime_stage_id)
    assert chain.hops[-1].text == "define_fact('geo')"


async def test_backtrack_from_reflection_reaches_the_writer_not_the_critic() -> None:
    """The accepted draft came from the writer, so backtrack must read the writer's call."""
    writer = Agent(provider=mock(respond=lambda r: "Short and kind."), model="m",
                   context=[define_fact(id="tone", data="Be short and kind.")])
    critic = scripted("critic", "APPROVED")
    result = await reflection(writer, critic, max_rounds=2,
                              accept=lambda c: c == "APPROVED").run("Reply to Sam")
    chain = backtrack(result)
    assert chain.hops[1].runtime_stage_id is not None
    assert chain.hops[1].runtime_stage_id.startswith("writer/call_llm#")


async def test_patterns_nest_in_compositions_and_in_one_another() -> None:
    """A pattern is a runner: it mounts in a Sequence, and a pattern mounts in a pattern."""
    voter = self_consistency(responding("s", lambda m: m.upper()), n=2)
    mapped = map_reduce(voter, "+".join, split=str.split)
    pipeline = Sequence(("first", responding("first", lambda m: f"{m} b")), ("map", mapped))
    result = await pipeline.run("a")
    assert result.content == "A+B"
    assert calls(result) == ["first/call_llm", "map/item-1/sample-1/call_llm",
                             "map/item-1/sample-2/call_llm", "map/item-2/sample-1/call_llm",
                             "map/item-2/sample-2/call_llm"]


def test_run_sync_runs_a_pattern_from_plain_code() -> None:
    """run_sync is the one-line twin of run, with the stopped_early of the pattern."""
    critic = responding("critic", lambda m: "no")
    result = reflection(responding("w", str.upper), critic, max_rounds=1,
                        accept=lambda c: False).run_sync("hi")
    assert (result.content, result.stopped_early) == ("HI", "max_rounds")


# -- configuration -----------------------------------------------------------------------------


def test_bad_configuration_names_the_argument_and_the_fix() -> None:
    """Budgets, callbacks, runners and ids are checked when the pattern is built."""
    r = responding("r", str)
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: self_consistency(r, n=1), r"self_consistency\(n=1\) must be an int from 2"),
        (lambda: self_consistency(r, n=3, vote="x"), "vote='x'"),  # type: ignore[arg-type]
        (lambda: self_consistency(object(), n=2), "not a runner"),  # type: ignore[arg-type]
        (lambda: reflection(r, r, max_rounds=0, accept=bool), "max_rounds=0"),
        (lambda: reflection(r, r, max_rounds=501, accept=bool), "from 1 to 500"),
        (lambda: reflection(r, r, max_rounds=2, accept=None), "accept=None"),  # type: ignore[arg-type]
        (lambda: debate(r, r, r, rounds=True), "rounds=True"),
        (lambda: map_reduce(r, 42, split=str.split), "reducer=42"),  # type: ignore[arg-type]
        (lambda: map_reduce(r, r, split=str.split, max_items=0), "max_items=0"),
        (lambda: tree_of_thoughts(r, len, breadth=1, depth=2), "breadth=1"),  # type: ignore[arg-type]
        (lambda: tree_of_thoughts(r, len, breadth=2, depth=2, stop_at="high"),  # type: ignore[arg-type]
         "stop_at='high'"),
        (lambda: tree_of_thoughts(r, len, breadth=30, depth=2, beam=30),  # type: ignore[arg-type]
         "lower breadth= or beam="),
        (lambda: swarm(("a", r), max_hops=2), "at least two"),
        (lambda: swarm(("a", r), ("a", r), max_hops=2), "distinct"),
        (lambda: swarm(("a", r), ("done", r), max_hops=2), "reserved"),
        (lambda: swarm(("a", r), ("b/c", r), max_hops=2), "without '/'"),
        (lambda: swarm(("a", r), ("b", r), max_hops=2, start="c"), "start='c'"),
        (lambda: swarm(("a", r), ("b", r), max_hops=0), "max_hops=0"),
    ]
    for build, message in cases:
        with pytest.raises(ConfigurationError, match=message):
            build()
