"""One conformance suite that InMemoryStore and SQLiteStore both pass."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_helpers import STORE_KINDS, Clock, close, entry, make_store

from agentfootprint.flow._run import run_sync
from agentfootprint.memory import (
    InvalidCursorError,
    MemoryEntry,
    MemoryIdentity,
    MemorySource,
    MemoryStore,
    MemoryStoreError,
)
from agentfootprint.memory._store import VectorSearchStore

ALICE = MemoryIdentity("c1", principal="alice", tenant="acme")
BOB = MemoryIdentity("c1", principal="bob", tenant="acme")


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(kind: str, tmp_path: Path, clock: Clock) -> AsyncIterator[MemoryStore]:
    made = make_store(kind, tmp_path, clock)
    yield made
    close(made)


async def list_all(store: MemoryStore, identity: MemoryIdentity, limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.list(identity, cursor=cursor, limit=limit)
        ids.extend(e.id for e in page.entries)
        if page.cursor is None:
            return ids
        cursor = page.cursor


async def test_get_missing_is_none(store: MemoryStore) -> None:
    """A never-written id reads as None."""
    assert await store.get(ALICE, "nope") is None


async def test_put_get_round_trip_with_source_identity(store: MemoryStore) -> None:
    """Every field, including source.identity, round-trips verbatim."""
    written = MemoryEntry(
        id="msg-1-0",
        value={"role": "user", "content": "hi", "n": [1, 2.5, None, True]},
        source=MemorySource(turn=1, identity=ALICE, runtime_stage_id="seed#0"),
        tier="hot",
        metadata={"k": "v"},
        created_at=5,
        updated_at=6,
        expires_at=10**12,
        signature="sig-1",
    )
    await store.put(ALICE, written)
    assert await store.get(ALICE, "msg-1-0") == written


async def test_put_overwrites_and_delete_removes(store: MemoryStore) -> None:
    """Put of an existing id overwrites it; delete removes it; deleting a missing id is a no-op."""
    await store.put(ALICE, entry("a", value=1))
    await store.put(ALICE, entry("a", value=2))
    got = await store.get(ALICE, "a")
    assert got is not None and got.value == 2
    assert [e.id for e in (await store.list(ALICE)).entries] == ["a"]
    await store.delete(ALICE, "a")
    await store.delete(ALICE, "a")
    assert await store.get(ALICE, "a") is None


async def test_put_many_writes_all_and_empty_is_noop(store: MemoryStore) -> None:
    """put_many writes every entry and an empty batch changes nothing."""
    await store.put_many(ALICE, [])
    await store.put_many(ALICE, [entry("a"), entry("b")])
    assert sorted(e.id for e in (await store.list(ALICE)).entries) == ["a", "b"]


async def test_put_rejects_non_entries(store: MemoryStore) -> None:
    """A store refuses anything that is not a MemoryEntry."""
    with pytest.raises(TypeError, match="MemoryEntry"):
        await store.put(ALICE, {"id": "a"})  # type: ignore[arg-type]


async def test_list_newest_first_ties_by_write_order(store: MemoryStore) -> None:
    """Newest updated_at first; equal updated_at lists the most recently written first."""
    await store.put_many(ALICE, [entry("msg-2-0", updated_at=20), entry("msg-2-1", updated_at=20)])
    await store.put(ALICE, entry("msg-1-0", updated_at=10))
    await store.put(ALICE, entry("msg-10-0", updated_at=30))
    assert await list_all(store, ALICE, 100) == ["msg-10-0", "msg-2-1", "msg-2-0", "msg-1-0"]


async def test_overwrite_moves_entry_to_front_of_its_tie(store: MemoryStore) -> None:
    """Re-writing an entry gives it a new write position among equal timestamps."""
    await store.put_many(ALICE, [entry("a", updated_at=5), entry("b", updated_at=5)])
    await store.put(ALICE, entry("a", updated_at=5))
    assert await list_all(store, ALICE, 100) == ["a", "b"]


async def test_ttl_expired_invisible_to_every_read(store: MemoryStore, clock: Clock) -> None:
    """expires_at <= now hides an entry from get and list; expires_at == now is expired."""
    await store.put(ALICE, entry("gone", expires_at=clock.now))
    await store.put(ALICE, entry("later", expires_at=clock.now + 10))
    await store.put(ALICE, entry("zero", expires_at=0))
    assert await store.get(ALICE, "gone") is None
    assert await store.get(ALICE, "zero") is None
    assert await list_all(store, ALICE, 1) == ["later"]
    clock.now += 10
    assert await store.get(ALICE, "later") is None
    assert await list_all(store, ALICE, 100) == []


async def test_tier_filter_skips_untiered(store: MemoryStore) -> None:
    """A tier-filtered list returns only entries of those tiers, never untiered ones."""
    await store.put_many(ALICE, [entry("h", tier="hot"), entry("c", tier="cold"), entry("u")])
    assert [e.id for e in (await store.list(ALICE, tiers=["hot"])).entries] == ["h"]
    assert (await store.list(ALICE, tiers=[])).entries == []


async def test_limit_is_checked_and_capped(store: MemoryStore) -> None:
    """A non-positive limit is refused; a huge limit is capped at 1000 per page."""
    with pytest.raises(ValueError, match="limit"):
        await store.list(ALICE, limit=0)
    await store.put_many(ALICE, [entry(f"e{i}") for i in range(1001)])
    page = await store.list(ALICE, limit=5000)
    assert len(page.entries) == 1000 and page.cursor is not None


async def test_bad_cursor_is_refused_by_name(store: MemoryStore) -> None:
    """A cursor the store never handed out raises InvalidCursorError naming the store."""
    with pytest.raises(InvalidCursorError, match="cursor"):
        await store.list(ALICE, cursor="not-a-cursor")


async def test_signatures_recognised_isolated_and_survive_delete(store: MemoryStore) -> None:
    """seen is False until record_signature, per identity, and deleting entries keeps it."""
    assert not await store.seen(ALICE, "s")
    await store.put(ALICE, entry("a", signature="s"))
    await store.record_signature(ALICE, "s")
    await store.record_signature(ALICE, "s")
    await store.delete(ALICE, "a")
    assert await store.seen(ALICE, "s")
    assert not await store.seen(MemoryIdentity("c1"), "s")


@pytest.mark.parametrize(
    "other",
    [
        MemoryIdentity("c1", principal="alice", tenant="other"),
        MemoryIdentity("c1", principal="alice"),
        MemoryIdentity("c1", principal="alice", tenant="_"),
        MemoryIdentity("alice/c1", tenant="acme"),
        MemoryIdentity("c1", principal="acme/alice"),
        MemoryIdentity("..", principal="alice", tenant="acme"),
        MemoryIdentity("c1'; DROP TABLE af_memory_entries; --"),
    ],
)
async def test_namespaces_are_isolated(store: MemoryStore, other: MemoryIdentity) -> None:
    """Entries, signatures and turn claims of one identity are invisible to any other."""
    await store.put(ALICE, entry("x'); --"))
    await store.record_signature(ALICE, "s")
    assert await store.claim_turn(ALICE, 1)
    assert await store.get(other, "x'); --") is None
    assert (await store.list(other)).entries == []
    assert not await store.seen(other, "s")
    assert await store.claim_turn(other, 1)
    assert await store.get(ALICE, "x'); --") is not None


async def test_claim_turn_once(store: MemoryStore) -> None:
    """claim_turn returns True the first time a turn is claimed and False afterwards."""
    assert await store.claim_turn(ALICE, 3)
    assert not await store.claim_turn(ALICE, 3)
    assert await store.claim_turn(ALICE, 4)


async def test_concurrent_claims_one_winner(store: MemoryStore) -> None:
    """Of twenty concurrent claims of one turn exactly one wins."""
    results = await asyncio.gather(*(store.claim_turn(ALICE, 7) for _ in range(20)))
    assert results.count(True) == 1


async def test_capabilities_are_declared_not_faked(store: MemoryStore) -> None:
    """A store has a search method exactly when it declares vector search."""
    assert store.capabilities.vector_search is hasattr(store, "search")
    assert store.capabilities.vector_search is isinstance(store, VectorSearchStore)
    assert store.capabilities.atomic_turn_claim is True
    assert isinstance(store, MemoryStore)


async def test_every_store_closes_the_same_way(store: MemoryStore) -> None:
    """aclose() twice is harmless; afterwards a call names the store instead of reopening."""
    await store.put(ALICE, entry("a"))
    closable: Any = store
    async with closable:
        assert await store.get(ALICE, "a") is not None
    await closable.aclose()
    with pytest.raises(MemoryStoreError, match="after the store was closed"):
        await store.get(ALICE, "a")


def test_close_sync_from_plain_code(kind: str, tmp_path: Path, clock: Clock) -> None:
    """close_sync() is aclose() for code with no event loop (a script, a sync web handler)."""
    made: Any = make_store(kind, tmp_path, clock)
    try:
        run_sync(made.put(ALICE, entry("a")))
        made.close_sync()
        made.close_sync()
        with pytest.raises(MemoryStoreError, match=made.name.split("(")[0]):
            run_sync(made.get(ALICE, "a"))
    finally:
        close(made)


# -- vector search (only stores that declare it) ----------------------------------------------


@pytest.fixture
def vstore(store: MemoryStore) -> VectorSearchStore:
    if not isinstance(store, VectorSearchStore):
        pytest.skip(f"{store.name} declares no vector search")
    return store


def vec(entry_id: str, vector: list[float], **fields: object) -> MemoryEntry:
    return entry(entry_id, embedding=vector, **fields)


async def test_search_ranks_by_cosine_ties_by_id(vstore: VectorSearchStore) -> None:
    """Scores descend; equal scores list ids ascending; k caps; k > n returns all."""
    await vstore.put_many(
        ALICE,
        [
            vec("far", [0.0, 1.0]),
            vec("b-tie", [1.0, 0.0]),
            vec("a-tie", [2.0, 0.0]),
            vec("near", [1.0, 0.5]),
        ],
    )
    hits = await vstore.search(ALICE, [1.0, 0.0], k=10)
    assert [h.entry.id for h in hits] == ["a-tie", "b-tie", "near", "far"]
    assert hits[0].score == pytest.approx(1.0) and hits[-1].score == pytest.approx(0.0)
    assert all(-1.0 <= h.score <= 1.0 for h in hits)
    assert [h.entry.id for h in await vstore.search(ALICE, [1.0, 0.0], k=1)] == ["a-tie"]
    assert hits[0].entry.embedding == [2.0, 0.0]


async def test_search_default_k_is_ten_and_k_checked(vstore: VectorSearchStore) -> None:
    """Without k at most ten hits come back; a non-positive k is refused."""
    await vstore.put_many(ALICE, [vec(f"e{i:02d}", [1.0, i / 100]) for i in range(15)])
    assert len(await vstore.search(ALICE, [1.0, 0.0])) == 10
    with pytest.raises(ValueError, match="k=0"):
        await vstore.search(ALICE, [1.0, 0.0], k=0)


async def test_search_skips_what_cannot_be_compared(vstore: VectorSearchStore) -> None:
    """No embedding, another length, a zero vector, another named embedder: all skipped."""
    await vstore.put_many(
        ALICE,
        [
            entry("plain"),
            vec("short", [1.0]),
            vec("zero", [0.0, 0.0]),
            vec("other-model", [1.0, 0.0], embedding_model="m2"),
            vec("anonymous", [1.0, 0.1]),
            vec("mine", [1.0, 0.2], embedding_model="m1"),
        ],
    )
    hits = await vstore.search(ALICE, [1.0, 0.0], embedder_id="m1")
    assert [h.entry.id for h in hits] == ["anonymous", "mine"]
    assert await vstore.search(ALICE, [0.0, 0.0]) == []


async def test_search_filters_min_score_tier_expiry_and_identity(
    vstore: VectorSearchStore, clock: Clock
) -> None:
    """min_score drops weak hits; tiers filter (untiered skipped); expired and foreign unseen."""
    await vstore.put_many(
        ALICE,
        [
            vec("hot", [1.0, 0.0], tier="hot"),
            vec("untiered", [1.0, 0.0]),
            vec("weak", [0.0, 1.0], tier="hot"),
            vec("expiring", [1.0, 0.0], expires_at=clock.now + 10),
        ],
    )
    await vstore.put(BOB, vec("bobs", [1.0, 0.0]))
    assert [h.entry.id for h in await vstore.search(ALICE, [1.0, 0.0], tiers=["hot"])] == [
        "hot",
        "weak",
    ]
    strong = await vstore.search(ALICE, [1.0, 0.0], min_score=0.5)
    assert {h.entry.id for h in strong} == {"hot", "untiered", "expiring"}
    clock.now += 10
    assert {h.entry.id for h in await vstore.search(ALICE, [1.0, 0.0])} == {
        "hot",
        "untiered",
        "weak",
    }
    assert [h.entry.id for h in await vstore.search(BOB, [1.0, 0.0])] == ["bobs"]


async def test_search_sees_overwrites_and_deletes(vstore: VectorSearchStore) -> None:
    """A rewritten vector is ranked by its new value; a deleted entry is gone."""
    await vstore.put_many(ALICE, [vec("a", [1.0, 0.0]), vec("b", [0.0, 1.0])])
    assert (await vstore.search(ALICE, [1.0, 0.0], k=1))[0].entry.id == "a"
    await vstore.put(ALICE, vec("b", [1.0, 0.0], value="new"))
    await vstore.delete(ALICE, "a")
    hits = await vstore.search(ALICE, [1.0, 0.0])
    assert [(h.entry.id, h.entry.value) for h in hits] == [("b", "new")]


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


def run_on_store(kind: str, body: object) -> None:
    """Run ``body(store, clock)`` against a fresh store of ``kind``."""

    async def main(directory: Path) -> None:
        clock = Clock()
        store = make_store(kind, directory, clock)
        try:
            await body(store, clock)  # type: ignore[operator]
        finally:
            close(store)

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(main(Path(directory)))


@pytest.mark.parametrize("kind", STORE_KINDS)
@settings(max_examples=40, deadline=None)
@given(value=json_values)
def test_property_json_values_round_trip(kind: str, value: object) -> None:
    """Any JSON value put is the value got back."""

    async def body(store: MemoryStore, clock: Clock) -> None:
        await store.put(ALICE, entry("v", value=value))
        got = await store.get(ALICE, "v")
        assert got is not None and got.value == value

    run_on_store(kind, body)


@pytest.mark.parametrize("kind", STORE_KINDS)
@settings(max_examples=30, deadline=None)
@given(
    stamps=st.lists(st.integers(0, 4), min_size=0, max_size=25),
    limit=st.integers(1, 6),
)
def test_property_order_and_paging(kind: str, stamps: list[int], limit: int) -> None:
    """Pages list every entry exactly once, newest first, ties most-recently-written first."""

    async def body(store: MemoryStore, clock: Clock) -> None:
        for i, stamp in enumerate(stamps):
            await store.put(ALICE, entry(f"e{i}", updated_at=stamp))
        expected = [
            f"e{i}" for i, _ in sorted(enumerate(stamps), key=lambda p: (p[1], p[0]), reverse=True)
        ]
        assert await list_all(store, ALICE, limit) == expected

    run_on_store(kind, body)


@pytest.mark.parametrize("kind", STORE_KINDS)
@settings(max_examples=30, deadline=None)
@given(expiries=st.lists(st.one_of(st.none(), st.integers(0, 20)), max_size=15))
def test_property_expired_invisible(kind: str, expiries: list[int | None]) -> None:
    """Exactly the entries with no expiry or expires_at > now are visible to get and list."""

    async def body(store: MemoryStore, clock: Clock) -> None:
        clock.now = 10
        for i, expires in enumerate(expiries):
            await store.put(ALICE, entry(f"e{i}", expires_at=expires))
        live = {f"e{i}" for i, x in enumerate(expiries) if x is None or x > 10}
        assert set(await list_all(store, ALICE, 4)) == live
        for i in range(len(expiries)):
            assert (await store.get(ALICE, f"e{i}") is not None) == (f"e{i}" in live)

    run_on_store(kind, body)


async def test_embedding_round_trips_exactly_as_float32(store: MemoryStore) -> None:
    """Embeddings are float32 on construction, so get and list return them bit for bit."""
    written = vec("v", [0.1, -0.2, 1e-3, 3.0], embedding_model="m1")
    assert written.embedding != [0.1, -0.2, 1e-3, 3.0]  # rounded to float32 once
    await store.put(ALICE, written)
    assert await store.get(ALICE, "v") == written
    assert (await store.list(ALICE)).entries == [written]


async def test_search_over_many_vectors_matches_brute_force(vstore: VectorSearchStore) -> None:
    """Past the small-set path (NumPy matrices, cached per namespace) the ranking is the same."""
    import math
    import random

    rng = random.Random(3)
    written = [vec(f"e{i:03d}", [rng.uniform(-1, 1) for _ in range(8)], tier="hot")
               for i in range(120)]
    written.append(vec("short", [1.0, 0.0]))
    await vstore.put_many(ALICE, written)
    query = [rng.uniform(-1, 1) for _ in range(8)]

    def cosine(a: list[float], b: list[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))

    expected = sorted((e for e in written if len(e.embedding or []) == 8),
                      key=lambda e: -cosine(e.embedding or [], query))[:7]
    for _ in range(2):  # the second search reads the cached index
        hits = await vstore.search(ALICE, query, k=7)
        assert [h.entry.id for h in hits] == [e.id for e in expected]
    await vstore.delete(ALICE, expected[0].id)
    assert (await vstore.search(ALICE, query, k=1))[0].entry.id == expected[1].id
