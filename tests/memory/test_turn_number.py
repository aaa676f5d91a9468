"""Turn numbering exactly per seed 000 (resolveTurnNumber): one test per rule of the seed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from memory_helpers import Clock, entry

from agentfootprint.memory import (
    InMemoryStore,
    MemoryEntry,
    MemoryIdentity,
    MemoryStoreError,
    SQLiteStore,
    resolve_turn_number,
)
from agentfootprint.memory._entry import Tier
from agentfootprint.memory._store import MemoryPage
from agentfootprint.memory._turn import (
    MAX_SCAN_PAGES,
    SCAN_PAGE_SIZE,
    max_stored_turn,
    normalize_host_turn,
)

CONV = MemoryIdentity("conv-1")


class CountingStore(InMemoryStore):
    """An InMemoryStore that counts list calls and can be told to fail or page forever."""

    def __init__(self, *, fail: bool = False, endless: str | None = None, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.list_calls = 0
        self.limits: list[int | None] = []
        self.fail = fail
        self.endless = endless

    async def list(
        self,
        identity: MemoryIdentity,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        tiers: Sequence[Tier] | None = None,
    ) -> MemoryPage:
        self.list_calls += 1
        self.limits.append(limit)
        if self.fail:
            raise MemoryStoreError("store is down", store="CountingStore")
        if self.endless == "new":
            return MemoryPage(
                [entry(f"e{self.list_calls}", turn=self.list_calls)], f"c{self.list_calls}"
            )
        if self.endless == "same":
            return MemoryPage([entry("e", turn=2)], "same-cursor")
        return await super().list(identity, cursor=cursor, limit=limit, tiers=tiers)


async def stored(*turns: int, store: InMemoryStore | None = None) -> InMemoryStore:
    store = store or InMemoryStore()
    for t in turns:
        await store.put(CONV, entry(f"msg-{t}-0", turn=t))
    return store


# -- the rule: max(hostTurn, maxStoredTurn + 1) ------------------------------------------------


async def test_honest_host_keeps_its_numbering_with_gaps() -> None:
    """hostTurn 5 on an empty store is turn 5: an ordinal, not a count, gaps preserved."""
    assert await resolve_turn_number(stores=[InMemoryStore()], identity=CONV, host_turn=5) == 5
    store = await stored(2)
    assert await resolve_turn_number(stores=[store], identity=CONV, host_turn=7) == 7


async def test_stale_host_counter_gets_next_turn_never_turn_1_again() -> None:
    """The second turn of a conversation whose store holds turn 1 is turn 2, never turn 1."""
    store = await stored(1)
    assert await resolve_turn_number(stores=[store], identity=CONV, host_turn=1) == 2


async def test_whichever_knows_more_wins_and_neither_drags_backwards() -> None:
    """The host and the store compose: the larger wins, in either direction."""
    assert await resolve_turn_number(stores=[await stored(7)], identity=CONV, host_turn=3) == 8
    assert await resolve_turn_number(stores=[await stored(7)], identity=CONV, host_turn=9) == 9


async def test_host_turn_defaults_to_1() -> None:
    """Without a host turn and without stored turns, the turn is 1."""
    assert await resolve_turn_number(stores=[InMemoryStore()], identity=CONV) == 1


async def test_returns_at_least_1_always() -> None:
    """Even with no stores and a nonsense host turn, the answer is at least 1."""
    assert await resolve_turn_number(stores=[], identity=CONV, host_turn=-4) == 1
    assert await resolve_turn_number(stores=[], identity=CONV, host_turn=3) == 3


async def test_every_store_consulted_and_highest_wins() -> None:
    """Two memories in different stores agree on the turn: the highest stored turn wins."""
    low, high = await stored(2), await stored(6)
    assert await resolve_turn_number(stores=[low, high], identity=CONV) == 7
    assert await resolve_turn_number(stores=[await stored(6), await stored(2)], identity=CONV) == 7


async def test_duplicate_stores_scanned_once() -> None:
    """The same store listed by several memories is scanned once."""
    store = CountingStore()
    await stored(3, store=store)
    assert await resolve_turn_number(stores=[store, store, store], identity=CONV) == 4
    assert store.list_calls == 1


async def test_store_errors_propagate() -> None:
    """A store that raises is not swallowed: no turn is guessed."""
    with pytest.raises(MemoryStoreError, match="down"):
        await resolve_turn_number(stores=[InMemoryStore(), CountingStore(fail=True)], identity=CONV)


async def test_other_conversations_do_not_count() -> None:
    """Only this identity's namespace is scanned."""
    store = InMemoryStore()
    await store.put(MemoryIdentity("other"), entry("msg-9-0", turn=9))
    assert await resolve_turn_number(stores=[store], identity=CONV) == 1


# -- maxStoredTurn -------------------------------------------------------------------------------


async def test_max_stored_turn_is_0_when_never_written() -> None:
    """A conversation that was never written to has max stored turn 0."""
    assert await max_stored_turn(InMemoryStore(), CONV) == 0


async def test_max_stored_turn_default_counts_entries_carrying_source_turn() -> None:
    """By default every entry with source.turn counts; entries without one are turn 0."""
    store = await stored(3, 5, 4)
    await store.put(CONV, entry("fact:x"))
    await store.put(CONV, entry("doc", turn=0))
    assert await max_stored_turn(store, CONV) == 5


async def test_turn_for_narrows_what_counts() -> None:
    """turn_for lets writeSnapshot count only its own snap-{n} ids."""
    store = await stored(9)
    await store.put(CONV, entry("snap-4", turn=4))

    def snap_turn(e: MemoryEntry) -> int:
        return int(e.id[5:]) if e.id.startswith("snap-") else 0

    assert await max_stored_turn(store, CONV, turn_for=snap_turn) == 4


async def test_expired_turn_does_not_hold_numbering_open() -> None:
    """Only live entries are seen: an expired turn 4 does not hold the numbering open."""
    clock = Clock(1000)
    store = InMemoryStore(clock=clock)
    await store.put(CONV, entry("msg-2-0", turn=2))
    await store.put(CONV, entry("msg-4-0", turn=4, expires_at=1000))
    assert await max_stored_turn(store, CONV) == 2
    assert await resolve_turn_number(stores=[store], identity=CONV) == 3


async def test_scan_is_paged_with_page_size_1000() -> None:
    """The scan pages list() 1000 at a time and reads every page."""
    store = CountingStore()
    await store.put_many(
        CONV, [entry(f"e{i}", turn=i, updated_at=10_000 - i) for i in range(1, 2501)]
    )
    assert await max_stored_turn(store, CONV) == 2500
    assert store.limits == [SCAN_PAGE_SIZE] * 3


async def test_scan_is_bounded_by_max_scan_pages() -> None:
    """A store that always has another page is read at most MAX_SCAN_PAGES times."""
    store = CountingStore(endless="new")
    assert await max_stored_turn(store, CONV) == MAX_SCAN_PAGES
    assert store.list_calls == MAX_SCAN_PAGES


async def test_scan_stops_when_cursor_repeats() -> None:
    """An adapter that echoes the same cursor again ends the scan (loop guard)."""
    store = CountingStore(endless="same")
    assert await max_stored_turn(store, CONV) == 2
    assert store.list_calls == 2


# -- normalizeHostTurn ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "turn"),
    [
        (None, 1),
        ("3", 1),
        (True, 1),
        (math.nan, 1),
        (math.inf, 1),
        (-math.inf, 1),
        (0, 1),
        (-2, 1),
        (0.5, 1),
        (1, 1),
        (2.9, 2),
        (5, 5),
    ],
)
def test_normalize_host_turn_below_1_or_not_a_number_is_1(raw: object, turn: int) -> None:
    """A host turn below 1, or not a number at all, means "I do not know" → 1; else floored."""
    assert normalize_host_turn(raw) == turn


# -- claims: beyond the reference ----------------------------------------------------------------


async def test_resolution_claims_the_turn() -> None:
    """A resolved turn is claimed, so a second resolution before any write moves on."""
    store = InMemoryStore()
    assert await resolve_turn_number(stores=[store], identity=CONV) == 1
    assert await resolve_turn_number(stores=[store], identity=CONV) == 2
    assert not await store.claim_turn(CONV, 1)


async def test_claim_false_only_computes() -> None:
    """claim=False computes the rule without claiming anything."""
    store = InMemoryStore()
    assert await resolve_turn_number(stores=[store], identity=CONV, claim=False) == 1
    assert await store.claim_turn(CONV, 1)


async def test_claim_must_hold_on_every_store() -> None:
    """A turn already claimed on any one of the stores is skipped."""
    a, b = InMemoryStore(), InMemoryStore()
    await b.claim_turn(CONV, 1)
    assert await resolve_turn_number(stores=[a, b], identity=CONV) == 2


async def test_fresh_store_instance_per_turn_never_overwrites(tmp_path: Path) -> None:
    """Five turns, each by a fresh SQLiteStore on one file, write msg-1-* … msg-5-*, none lost."""
    for _ in range(5):
        async with SQLiteStore(tmp_path / "m.db") as store:
            turn = await resolve_turn_number(stores=[store], identity=CONV, host_turn=1)
            await store.put_many(CONV, [entry(f"msg-{turn}-{i}", turn=turn) for i in range(2)])
    async with SQLiteStore(tmp_path / "m.db") as store:
        ids = {e.id for e in (await store.list(CONV)).entries}
    assert ids == {f"msg-{t}-{i}" for t in range(1, 6) for i in range(2)}
