"""An answer no piece of context overlaps gets a no-overlap verdict, not a READ of a sentence.

When every candidate scores 0 the proxy has nothing to say about which source the answer rests
on; following the first-ranked one anyway would claim the model "read" a sentence that shares
nothing with the answer. The verdict applies only where no crossing does: a structured field's
chain, an answer a composition step picked among its members' answers (self-consistency's
vote, checked by tests/test_examples.py), and a handed-on answer (the swarm's and a Sequence's
carriers, tests/explain/test_backtrack_compositions.py) keep their chains, and so does a run
with a masked candidate, which cannot be scored (tests/runs/test_redaction_paths.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_html_report import by_id, parse

from agentfootprint import Agent, Tracing, define_fact, tool
from agentfootprint.cli import main
from agentfootprint.compose import Sequence
from agentfootprint.explain import backtrack, render_html_report
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore


def _agent(reply: Any, store: RunStore | None = None, **extra: Any) -> Agent:
    return Agent(provider=mock(reply=reply) if isinstance(reply, str) else mock(script=reply),
                 model="m", name="Shipping",
                 context=[define_fact(id="tone", data="Be brief.")],
                 tracing=Tracing(run_store=store) if store is not None else None, **extra)


def test_an_answer_that_overlaps_nothing_gets_the_no_overlap_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ANSWER, the call as a whole, then OVERLAP: no sentence, no LANDED/ALLOWED/BORN — on the
    live result, the recording, the CLI and the report."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        result = _agent("Shipped by standard post.", store).run_sync("Ship order A-9")
        recording = store.load(result.run_id)
    for source in (result, recording):
        chain = backtrack(source)
        assert [hop.kind for hop in chain.hops] == ["ANSWER", "READ", "OVERLAP"]
        assert chain.no_overlap and not chain.paused
        assert chain.suspect is None and chain.sentence is None
        assert "sentence:" not in chain.hops[1].text
        assert chain.hops[1].text.startswith("call_llm#") and "system prompt (9 chars)" in (
            chain.hops[1].text)
        assert chain.hops[2].text.startswith("none — no piece of context that reached call_llm#")
        assert "shares a word with the answer" in chain.hops[2].text
        assert chain.ranked and all(item.score == 0 for item in chain.ranked)
        assert "overlap='none'" in repr(chain)
    assert main(["--store", str(path), "explain", result.run_id]) == 0
    out = capsys.readouterr().out
    assert "OVERLAP  none — no piece of context" in out and "BORN" not in out
    root = parse(render_html_report(recording))
    board = by_id(root, "board")
    assert [h.attrs["data-kind"] for h in board.find_all("li", cls="hop")] == [
        "ANSWER", "READ", "OVERLAP"]
    assert board.find_all("li", cls="suspect followed") == []
    assert "no source shares a word with it" in board.text
    assert "culprit" not in render_html_report(recording).split('id="board"')[1]


def test_a_source_asked_for_is_still_followed() -> None:
    """suspect= names the source to follow: the chain follows it, whatever its score."""
    chain = backtrack(_agent("Shipped by standard post.").run_sync("Ship order A-9"),
                      suspect="tone")
    assert [hop.kind for hop in chain.hops] == ["ANSWER", "READ", "LANDED", "ALLOWED", "BORN"]
    assert chain.sentence == "Be brief." and not chain.no_overlap


def test_a_pending_tool_call_that_overlaps_nothing_gets_the_verdict_too() -> None:
    """A paused run whose pending call shares no word with any context: PAUSED, the asking
    call, OVERLAP — not a READ of the fact."""

    @tool(check_in=True)
    async def dispatch(crate: str) -> str:
        """Dispatch a crate."""
        return "dispatched"

    agent = _agent([{"tool_calls": [{"id": "d1", "name": "dispatch",
                                     "args": {"crate": "Z-77"}}]}], tools=[dispatch])
    result = agent.run_sync("Hello there")
    assert result.paused
    chain = backtrack(Recording.of(result))
    assert [hop.kind for hop in chain.hops] == ["PAUSED", "READ", "OVERLAP"]
    assert "the model asked for it" in chain.hops[1].text
    assert "shares a word with the pending tool call" in chain.hops[2].text
    assert chain.suspect is None and chain.paused and chain.no_overlap


async def test_the_last_member_of_a_sequence_with_no_overlap_gets_the_verdict() -> None:
    """A member that handed its own answer back is no crossing: when nothing it read overlaps
    its answer, the verdict is the same as for one agent (the carrier of the first member's
    answer is not followed at 0 either)."""
    first = Agent(provider=mock(reply="Lamp B-7 must be exchanged"), model="m",
                  context=[define_fact(id="lamp", data="Lamps are exchanged within 30 days.")])
    second = Agent(provider=mock(reply="Done."), model="m",
                   context=[define_fact(id="tone", data="Be brief.")])
    result = await Sequence(("first", first), ("second", second)).run("Fix my lamp")
    chain = backtrack(result)
    assert [hop.kind for hop in chain.hops] == ["ANSWER", "READ", "OVERLAP"]
    assert chain.hops[1].runtime_stage_id is not None
    assert chain.hops[1].runtime_stage_id.startswith("second/call_llm#")


async def test_a_crossing_keeps_its_chain_when_the_answer_overlaps_a_handed_on_message(
        ) -> None:
    """A Sequence whose second member repeats the first member's answer: the chain crosses
    into the first member (FROM), unchanged by the verdict."""
    first = Agent(provider=mock(reply="Lamp B-7 must be exchanged"), model="m",
                  context=[define_fact(id="lamp", data="Lamp B-7 must be exchanged today.")])
    second = Agent(provider=mock(reply="Lamp B-7 must be exchanged, confirmed."), model="m")
    chain = backtrack(await Sequence(("first", first), ("second", second)).run("Fix my lamp"))
    kinds = [hop.kind for hop in chain.hops]
    assert "OVERLAP" not in kinds and not chain.no_overlap
    assert "FROM" in kinds and kinds[-1] == "BORN"

