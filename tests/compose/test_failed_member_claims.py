"""A composition run that fails in a member gives back every member's turn claim, as an
agent's own failed run does, so the conversation's next run numbers its turns on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentfootprint import Agent
from agentfootprint.compose import Sequence
from agentfootprint.errors import ProviderError
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import LLMRequest, mock


def member(name: str, store: SQLiteStore, *, fail: ProviderError | None = None) -> Agent:
    """A window-memory agent answering ``name``, or raising ``fail`` from its provider."""

    def respond(request: LLMRequest) -> str:
        if fail is not None:
            raise fail
        return name

    return Agent(provider=mock(respond=respond), model="m", name=name,
                 memory=[define_memory(type="episodic", strategy="window", store=store,
                                       keep_turns=10, id=name)])


def held_claims(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        count: int = conn.execute("SELECT count(*) FROM af_memory_turn_holders").fetchone()[0]
    return count


async def stored_turns(store: SQLiteStore, identity: MemoryIdentity) -> list[int]:
    page = await store.list(identity, limit=100)
    return sorted({int(entry.id.split("-")[1]) for entry in page.entries})


def seed_turns(result_recording: object) -> list[int]:
    records = getattr(result_recording, "log").records
    return [c.value for r in records if r.stage_id.endswith("/seed")
            for c in r.changes if c.key == "turn"]


async def test_a_failed_member_gives_back_every_claim_and_turns_continue(
        tmp_path: Path) -> None:
    path = tmp_path / "team.db"
    store = SQLiteStore(path)
    identity = MemoryIdentity("conv-9", principal="user-1")
    down = ProviderError("quota exhausted", provider="mock", status=400)
    failing = Sequence(("a", member("A", store)), ("b", member("B", store, fail=down)))

    with pytest.raises(ProviderError) as raised:
        await failing.run("Book a table", identity=identity)
    assert raised.value is down  # the provider's own error, not a wrapper
    assert held_claims(path) == 0  # A settled its written turn 1; B gave turn 2 back
    assert await stored_turns(store, identity) == [1]

    healthy = Sequence(("a", member("A", store)), ("b", member("B", store)))
    again = await healthy.run("Make it three", identity=identity)
    assert again.status == "done"
    assert seed_turns(again.recording) == [2, 3]  # turn 2 was free again: no gap
    assert again.turn == 3
    assert await stored_turns(store, identity) == [1, 2, 3]  # no collision, no gap
    assert held_claims(path) == 0
    await store.aclose()
