"""Turn claims belong to runs, on every store: held by an owner, given back or settled, and a
settled claim expires with its turn's entries (seed 000, issue 16 item 5)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from memory_helpers import STORE_KINDS, Clock, close, entry, make_store

from agentfootprint.memory import MemoryIdentity, SQLiteStore
from agentfootprint.memory._store import TurnClaimStore
from agentfootprint.memory._turn import distinct_stores, resolve_turn_number

CONV = MemoryIdentity("claims", principal="p", tenant="t")


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(kind: str, tmp_path: Path, clock: Clock) -> AsyncIterator[TurnClaimStore]:
    made = make_store(kind, tmp_path, clock)
    assert isinstance(made, TurnClaimStore)
    yield made
    close(made)


async def test_owner_keeps_its_claim_and_nobody_else_gets_it(store: TurnClaimStore) -> None:
    """The owner claiming again wins (a replay, a second object on one backend); others lose."""
    assert await store.claim_turn(CONV, 3, owner="run-a")
    assert await store.claim_turn(CONV, 3, owner="run-a")
    assert not await store.claim_turn(CONV, 3, owner="run-b")
    assert not await store.claim_turn(CONV, 3)
    assert not await store.claim_turn(CONV, 3, owner="run-b", reclaim_before=2**62)


async def test_given_back_claim_is_free_again(store: TurnClaimStore) -> None:
    """release_turn(keep=False) by the owner frees the number; by anyone else it does nothing."""
    assert await store.claim_turn(CONV, 3, owner="run-a")
    await store.release_turn(CONV, 3, owner="run-b", keep=False)
    assert not await store.claim_turn(CONV, 3, owner="run-b")
    await store.release_turn(CONV, 3, owner="run-a", keep=False)
    assert await store.claim_turn(CONV, 3, owner="run-b")


async def test_settled_claim_is_reclaimed_only_before_the_cutoff(
    store: TurnClaimStore, clock: Clock
) -> None:
    """A settled claim is nobody's: it is taken over only when stamped before reclaim_before."""
    assert await store.claim_turn(CONV, 3, owner="run-a")
    await store.release_turn(CONV, 3, owner="run-a", keep=True)
    assert not await store.claim_turn(CONV, 3, owner="run-a")  # settled: not its own any more
    assert not await store.claim_turn(CONV, 3, owner="run-b")
    assert not await store.claim_turn(CONV, 3, owner="run-b", reclaim_before=clock.now)
    clock.now += 1
    assert await store.claim_turn(CONV, 3, owner="run-b", reclaim_before=clock.now)
    assert not await store.claim_turn(CONV, 3, owner="run-c", reclaim_before=clock.now + 10)


async def test_one_winner_when_many_take_over_a_settled_claim(
    store: TurnClaimStore, clock: Clock
) -> None:
    """Twenty concurrent takeovers of one expired claim: exactly one wins."""
    await store.claim_turn(CONV, 5)
    clock.now += 1
    results = await asyncio.gather(*(
        store.claim_turn(CONV, 5, owner=f"run-{i}", reclaim_before=clock.now) for i in range(20)))
    assert sum(results) == 1


async def test_expired_turns_never_exhaust_a_conversation(store: TurnClaimStore) -> None:
    """10,001 settled claims whose entries are gone: the next run gets turn 1 at once."""
    for turn in range(1, 10_002, 1000):  # a sample stands for the rest: each is probed alike
        await store.claim_turn(CONV, turn)
    assert await resolve_turn_number(stores=[store], identity=CONV, owner="run-x") == 1
    await store.put_many(CONV, [entry("msg-1-0", turn=1)])
    await store.release_turn(CONV, 1, owner="run-x", keep=True)
    assert await resolve_turn_number(stores=[store], identity=CONV, owner="run-y") == 2


async def test_claim_half_won_across_stores_is_given_back(tmp_path: Path, clock: Clock) -> None:
    """Turn 1 won on the first store and lost on the second is released on the first."""
    a = make_store("memory", tmp_path, clock)
    b = make_store("sqlite", tmp_path, clock)
    assert isinstance(a, TurnClaimStore) and isinstance(b, TurnClaimStore)
    try:
        await b.claim_turn(CONV, 1, owner="other")
        assert await resolve_turn_number(stores=[a, b], identity=CONV, owner="me") == 2
        assert await a.claim_turn(CONV, 1, owner="third")  # turn 1 was given back on a
    finally:
        close(b)


def test_two_objects_on_one_file_are_one_backend(tmp_path: Path) -> None:
    """Stores are told apart by where their data lives, not by object identity."""
    with SQLiteStore(tmp_path / "m.db") as one, SQLiteStore(str(tmp_path / "." / "m.db")) as two, \
            SQLiteStore(tmp_path / "other.db") as three:
        assert one.backend == two.backend != three.backend
        assert distinct_stores([one, two, three, one]) == [one, three]
