"""Member agents with memory inside compositions, and a member's pause paused the whole."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentfootprint import Agent, ConfigurationError, check_in_approved, tool
from agentfootprint.compose import Loop, Parallel, Sequence, reflection
from agentfootprint.explain import backtrack
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import LLMRequest, mock


def remembering(name: str, store: SQLiteStore, *, seen: list[str] | None = None,
                identity: MemoryIdentity | None = None) -> Agent:
    """An agent with window memory that answers ``name:<n>`` (n counts its runs) and keeps
    every prompt it was sent in ``seen``."""
    runs = [0]

    def respond(request: LLMRequest) -> str:
        runs[0] += 1
        if seen is not None:
            seen.append(" | ".join([request.system or "",
                                    *(str(m["content"]) for m in request.messages)]))
        return f"{name}:{runs[0]}"

    return Agent(provider=mock(respond=respond), model="m", name=name, identity=identity,
                 memory=[define_memory(type="episodic", strategy="window", store=store,
                                       keep_turns=10, id=name)])


async def stored_ids(store: SQLiteStore, identity: MemoryIdentity) -> list[str]:
    page = await store.list(identity, limit=100)
    return sorted(entry.id for entry in page.entries)


def held_claims(path: Path) -> int:
    """Turn claims still held by a run (not settled, not given back)."""
    with sqlite3.connect(path) as conn:
        count: int = conn.execute("SELECT count(*) FROM af_memory_turn_holders").fetchone()[0]
    return count


async def test_a_sequence_of_memory_agents_numbers_turns_and_recalls_the_last_run(
        tmp_path: Path) -> None:
    """Two memory agents on one SQLite conversation, run twice: each member run takes the next
    free turn (no member overwrites another's), the second run recalls the first, and every
    claim is settled when the run ends."""
    path = tmp_path / "team.db"
    store = SQLiteStore(path)
    identity = MemoryIdentity("conv-7", principal="user-1")
    seen: list[str] = []
    team = Sequence(("a", remembering("A", store, seen=seen)), ("b", remembering("B", store)))

    first = await team.run("Book a table for two", identity=identity)
    assert (first.status, first.content, first.turn) == ("done", "B:1", 2)
    assert await stored_ids(store, identity) == ["msg-1-0", "msg-1-1", "msg-2-0", "msg-2-1"]

    again = Sequence(("a", remembering("A", store, seen=seen)),  # a fresh process's team
                     ("b", remembering("B", store)))
    second = await again.run("Make it three", identity=identity)
    assert second.turn == 4
    assert await stored_ids(store, identity) == [f"msg-{t}-{i}" for t in (1, 2, 3, 4)
                                                 for i in (0, 1)]
    assert "A:1" not in seen[0]
    assert "Book a table for two" in seen[1] and "A:1" in seen[1]  # recalled from turn 1
    assert seen[1].endswith("Make it three")
    turns = [r.changes for r in second.recording.log.records if r.stage_id == "a/seed"]
    assert [c.value for c in turns[0] if c.key == "turn"] == [3]
    assert held_claims(path) == 0
    await store.aclose()


async def test_parallel_memory_members_never_share_a_turn(tmp_path: Path) -> None:
    """Two memory agents side by side on one conversation claim two turns, not one."""
    path = tmp_path / "par.db"
    store = SQLiteStore(path)
    identity = MemoryIdentity("conv-p")
    team = Parallel(("a", remembering("A", store)), ("b", remembering("B", store)))
    result = await team.run("Hello", identity=identity)
    assert result.content == "a: A:1\n\nb: B:1"
    assert await stored_ids(store, identity) == ["msg-1-0", "msg-1-1", "msg-2-0", "msg-2-1"]
    assert held_claims(path) == 0
    await store.aclose()


async def test_members_use_their_own_identity_and_a_loop_body_takes_a_turn_per_pass(
        tmp_path: Path) -> None:
    """Without a run identity each member runs under its own; a loop's memory body runs as a
    new turn on every pass; a pattern's memory members run too."""
    store = SQLiteStore(tmp_path / "own.db")
    mine = MemoryIdentity("conv-own")
    body = remembering("L", store, identity=mine)
    result = await Loop(body, times=2).run("Go")
    assert result.content == "L:2"
    assert await stored_ids(store, mine) == ["msg-1-0", "msg-1-1", "msg-2-0", "msg-2-1"]
    pattern = reflection(remembering("W", store, identity=MemoryIdentity("conv-w")),
                         remembering("C", store, identity=MemoryIdentity("conv-c")),
                         max_rounds=1, accept=lambda critique: True)
    assert (await pattern.run("Draft it")).content == "W:1"
    assert await stored_ids(store, MemoryIdentity("conv-c")) == ["msg-1-0", "msg-1-1"]
    await store.aclose()


async def test_a_memory_member_without_an_identity_is_refused_by_name(tmp_path: Path) -> None:
    """No identity for a memory member: one sentence naming the member and the fix, before
    anything runs (not a KeyError from its seed)."""
    store = SQLiteStore(tmp_path / "none.db")
    team = Sequence(("a", remembering("Planner", store)), ("b", remembering("B", store)))
    with pytest.raises(ConfigurationError, match=r"member Agent 'Planner' has memory but no "
                                                 r"identity: pass identity=MemoryIdentity"):
        await team.run("Hello")
    with pytest.raises(ConfigurationError, match="identity"):
        await team.run("Hello", identity="conv-1")  # type: ignore[arg-type]
    assert await stored_ids(store, MemoryIdentity("conv-1")) == []
    await store.aclose()


@tool(check_in=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def refunder() -> Agent:
    def respond(request: LLMRequest) -> object:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "r1", "name": "refund", "args": {"order_id": "A-9"}}]}
        return "Refund done: " + str(request.messages[-1]["content"])

    return Agent(provider=mock(respond=respond), model="m", name="Refunder", tools=[refund])


async def test_a_member_pause_pauses_the_composition_and_resume_finishes_it(
        tmp_path: Path) -> None:
    """A member's check-in pauses the whole run: the result says paused and carries the pause,
    its checkpoint (plain JSON) resumes a rebuilt team to done, and the memory member's turn
    stays claimed while paused and is settled at the end."""
    path = tmp_path / "pause.db"
    store = SQLiteStore(path)
    identity = MemoryIdentity("conv-9")

    def team() -> Sequence:
        return Sequence(("triage", remembering("T", store)), ("act", refunder()),
                        ("note", remembering("N", store)))

    paused = await team().run("Refund A-9", identity=identity)
    assert paused.paused and paused.status == "paused"
    assert paused.pause is not None and paused.pause["tool_name"] == "refund"
    assert paused.check_in is not None and paused.check_in.args == {"order_id": "A-9"}
    assert paused.recording.paused
    chain = backtrack(paused)  # the live result and its recording explain the same pause
    assert chain.pause is not None and chain.pause.scope.startswith("act")
    assert chain.hops[0].kind == "PAUSED"
    assert held_claims(path) == 1  # the triage member's turn, kept for the resume
    saved = json.loads(json.dumps(paused.checkpoint))

    with pytest.raises(ConfigurationError, match="check_in_approved"):
        await team().resume(saved, "yes")
    done = await team().resume(saved, check_in_approved(by="alice@ops"))
    assert done.status == "done" and done.pause is None
    assert done.content == "N:1"
    assert await stored_ids(store, identity) == ["msg-1-0", "msg-1-1", "msg-2-0", "msg-2-1"]
    assert held_claims(path) == 0
    await store.aclose()


async def test_a_pause_without_memory_members_resumes_too() -> None:
    """A composition of plain agents pauses and resumes the same way (sync twin included)."""
    paused = await Sequence(("act", refunder()), ("again", refunder())).run("Refund A-9")
    assert paused.paused and paused.turn == 1
    with pytest.raises(ConfigurationError, match="checkpoint of a paused RunResult"):
        await Sequence(("act", refunder()), ("again", refunder())).resume(
            {"status": "done"}, check_in_approved(by="bob"))
    second = await Sequence(("act", refunder()), ("again", refunder())).resume(
        paused.checkpoint, check_in_approved(by="bob"))
    assert second.paused  # the second member asks too
    done = await Sequence(("act", refunder()), ("again", refunder())).resume(
        second.checkpoint, check_in_approved(by="bob"))
    assert done.status == "done" and done.content == "Refund done: refunded A-9"
