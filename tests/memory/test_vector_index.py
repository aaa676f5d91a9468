"""The persisted vector index (``memory/stores/_vector_index.py``): after any sequence of puts,
deletes and reopens, SQLite's and Redis's searches return exactly what the per-entry index
returns for the same entries (same ids, same order, ties and scores); a fresh store reads the
blocks, not each entry; and a write by another process (or by a writer that keeps no blocks)
is seen by the next search."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memory_helpers import (
    _disconnecting_client,
    drop_redis_prefix,
    redis_prefix,
    redis_url,
)

from agentfootprint.memory import MemoryEntry, MemoryIdentity, SQLiteStore
from agentfootprint.memory.stores import _redis
from agentfootprint.memory.stores._redis import RedisStore
from agentfootprint.memory.stores._sql import entry_row
from agentfootprint.memory.stores._vectors import (
    VectorIndex,
    pack_float32,
    search_filter,
    unpack_float32,
)

NOW = 1_000_000
WHO = MemoryIdentity("vector-index")

components = st.integers(-2, 2).map(float)
vectors = st.one_of(st.lists(components, min_size=3, max_size=3),
                    st.lists(components, min_size=4, max_size=4))  # two lengths, zero vectors
entries = st.builds(
    lambda n, vec, model, tier, expires: MemoryEntry(
        id=f"e{n}", value={"n": n}, created_at=1_000 + n, embedding=vec,
        embedding_model=model, tier=tier, expires_at=expires),
    st.integers(0, 59), st.one_of(st.none(), vectors), st.sampled_from([None, "a", "b"]),
    st.sampled_from([None, "hot"]), st.sampled_from([None, 500_000, 2_000_000]))
searches = st.tuples(st.just("search"), st.lists(components, min_size=3, max_size=4),
                     st.integers(1, 12), st.sampled_from([None, ("hot",)]),
                     st.sampled_from([None, "a"]), st.sampled_from([None, 0.0]))
puts = st.tuples(st.just("put"), st.lists(entries, min_size=1, max_size=20))
operations = st.lists(st.one_of(
    puts, puts, st.tuples(st.just("delete"), st.integers(0, 59)), st.tuples(st.just("reopen")),
    searches, searches), min_size=4, max_size=25)
COMPACTED = [("put", [MemoryEntry(id=f"e{i}", value=i, embedding=[1.0, float(i), 0.0])])
             for i in range(5)] + [("search", [1.0, 1.0, 0.0], 3, None, None, None)]
"""Pushes enough blocks for a compaction (Redis, in these tests) before a search."""


def _reference(held: dict[str, MemoryEntry], op: tuple[Any, ...]) -> list[tuple[str, float]]:
    """The per-entry index over the held entries: what the stores searched before blocks."""
    _, query, k, tiers, embedder, min_score = op
    rows = [e for e in held.values() if e.embedding is not None]
    index = VectorIndex([(e.id, e.embedding or []) for e in rows])
    keep = search_filter([(e.embedding_model, e.expires_at, e.tier) for e in rows], now=NOW,
                         tiers=tiers, embedder_id=embedder)
    return index.rank(query, keep=keep, k=k, min_score=min_score)


async def _play(open_store: Any, ops: list[tuple[Any, ...]]) -> None:
    held: dict[str, MemoryEntry] = {}
    store = open_store()
    try:
        for op in ops:
            if op[0] == "put":
                await store.put_many(WHO, op[1])
                for entry in op[1]:
                    held[entry.id] = entry.model_copy(update={"embedding": entry.embedding})
            elif op[0] == "delete":
                await store.delete(WHO, f"e{op[1]}")
                held.pop(f"e{op[1]}", None)
            elif op[0] == "reopen":
                await store.aclose()
                store = open_store()
            else:
                got = await store.search(WHO, op[1], k=op[2], tiers=op[3], embedder_id=op[4],
                                         min_score=op[5])
                want = _reference(held, op)
                assert [(h.entry.id, h.score) for h in got] == want
    finally:
        await store.aclose()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
@example(ops=COMPACTED)
def test_sqlite_search_equals_the_per_entry_index(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        asyncio.run(_play(lambda: SQLiteStore(path, clock=lambda: NOW), ops))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
@example(ops=COMPACTED)
def test_redis_search_equals_the_per_entry_index(ops: list[tuple[Any, ...]]) -> None:
    url, prefix = redis_url(), redis_prefix()
    compact_at = _redis.REDIS_COMPACT_AT
    _redis.REDIS_COMPACT_AT = 1  # type: ignore[misc]  # compact often, to test it too
    try:
        asyncio.run(_play(lambda: RedisStore(client=_disconnecting_client(url), prefix=prefix,
                                             clock=lambda: NOW), ops))
    finally:
        _redis.REDIS_COMPACT_AT = compact_at  # type: ignore[misc]
        drop_redis_prefix(prefix)


def _batch(start: int, n: int) -> list[MemoryEntry]:
    return [MemoryEntry(id=f"m{i}", value=i, created_at=1_000 + i,
                        embedding=[float(i % 7), 1.0, float(i % 3)]) for i in range(start, n)]


async def test_a_fresh_sqlite_store_reads_blocks_not_entries(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        for start in range(0, 2_000, 100):
            await store.put_many(WHO, _batch(start, start + 100))
    statements: list[str] = []
    with SQLiteStore(tmp_path / "m.db") as fresh:
        assert fresh._conn is not None
        fresh._conn.set_trace_callback(statements.append)
        hits = await fresh.search(WHO, [1.0, 1.0, 1.0], k=5)
    assert len(hits) == 5
    assert len(statements) < 40  # a handful of blocks, never a read per entry


async def test_a_fresh_redis_store_reads_blocks_not_entries() -> None:
    url, prefix = redis_url(), redis_prefix()
    try:
        async with RedisStore(client=_disconnecting_client(url), prefix=prefix) as store:
            for start in range(0, 2_000, 100):
                await store.put_many(WHO, _batch(start, start + 100))
        async with RedisStore(client=_disconnecting_client(url), prefix=prefix) as fresh:
            reads: list[Any] = []
            script = fresh._read_fields_script

            def counted(*args: Any, **kwargs: Any) -> Any:
                reads.append(kwargs.get("keys"))
                return script(*args, **kwargs)

            fresh._read_fields_script = counted  # type: ignore[method-assign]
            hits = await fresh.search(WHO, [1.0, 1.0, 1.0], k=5)
        assert len(hits) == 5
        assert len(reads) == 1 and len(reads[0]) == 5  # only the hits' own entries
    finally:
        drop_redis_prefix(prefix)


_WRITER = textwrap.dedent("""
    import asyncio, sys
    from agentfootprint.memory import MemoryEntry, MemoryIdentity, SQLiteStore
    from agentfootprint.memory.stores._redis import RedisStore

    async def main(kind, where, prefix):
        store = SQLiteStore(where) if kind == "sqlite" else RedisStore(where, prefix=prefix)
        who = MemoryIdentity("vector-index")
        await store.put(who, MemoryEntry(id="new", value=1, embedding=[1.0, -1.0, 1.0]))
        await store.delete(who, "m0")
        await store.aclose()

    asyncio.run(main(*sys.argv[1:]))
""")


async def _sees_another_process(store: Any, argv: list[str]) -> None:
    await store.put_many(WHO, _batch(0, 50))
    before = [h.entry.id for h in await store.search(WHO, [1.0, 1.0, 1.0], k=50)]
    assert "m0" in before and "new" not in before
    done = subprocess.run([sys.executable, "-c", _WRITER, *argv], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    after = [h.entry.id for h in await store.search(WHO, [1.0, -1.0, 1.0], k=50)]
    assert after[0] == "new" and "m0" not in after


async def test_sqlite_sees_another_process_write_and_delete(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        await _sees_another_process(store, ["sqlite", str(tmp_path / "m.db"), ""])


async def test_redis_sees_another_process_write_and_delete() -> None:
    url, prefix = redis_url(), redis_prefix()
    try:
        async with RedisStore(client=_disconnecting_client(url), prefix=prefix) as store:
            await _sees_another_process(store, ["redis", url, prefix])
    finally:
        drop_redis_prefix(prefix)


async def test_sqlite_rows_written_without_blocks_are_searched(tmp_path: Path) -> None:
    """A writer that keeps no blocks (an older version) is caught up from the rows."""
    import sqlite3

    with SQLiteStore(tmp_path / "m.db") as store:
        await store.put_many(WHO, _batch(0, 40))
        await store.search(WHO, [1.0, 1.0, 1.0], k=3)  # the cache is warm
        legacy = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
        legacy.execute(
            "INSERT OR REPLACE INTO af_memory_entries (namespace, id, updated_at, expires_at, "
            "tier, body, embedding, embedding_model) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            entry_row(WHO.namespace, MemoryEntry(id="old", value=0, embedding=[9.0, -9.0, 9.0]),
                      pack_float32))
        legacy.execute("DELETE FROM af_memory_entries WHERE id = 'm1'")
        legacy.close()
        ids = [h.entry.id for h in await store.search(WHO, [1.0, -1.0, 1.0], k=40)]
        assert ids[0] == "old" and "m1" not in ids and len(ids) == 40


async def test_redis_entries_written_without_blocks_are_searched() -> None:
    url, prefix = redis_url(), redis_prefix()
    try:
        async with RedisStore(client=_disconnecting_client(url), prefix=prefix) as store:
            await store.put_many(WHO, _batch(0, 40))
            await store.search(WHO, [1.0, 1.0, 1.0], k=3)
            blocks = store._key(WHO, "vblk")
            client = store._redis("test")
            pushed = await client.lrange(blocks, 0, -1)
            await client.delete(blocks)  # as if an older version had written them all
            await store.put(WHO, MemoryEntry(id="late", value=0, embedding=[9.0, -9.0, 9.0]))
            ids = [h.entry.id for h in await store.search(WHO, [1.0, -1.0, 1.0], k=41)]
            assert pushed and ids[0] == "late" and len(ids) == 41
    finally:
        drop_redis_prefix(prefix)


@pytest.mark.parametrize("lengths", [[3, 3, 4, 3], [4, 4]])
def test_mixed_vector_lengths_rank_like_the_per_entry_index(lengths: list[int]) -> None:
    from agentfootprint.memory.stores._vector_index import block_of, packed_index

    rows = [(i, f"x{i}", pack_float32([float((i * 7 + j) % 5 - 2) for j in range(d)]),
             (None, None, None)) for i, d in enumerate(lengths * 12)]
    index, _ = packed_index([block_of(rows[:20]), block_of(rows[20:])], lambda s: s % 5 != 0)
    live = [r for r in rows if r[0] % 5 != 0]
    plain = VectorIndex([(r[1], unpack_float32(r[2])) for r in live])
    for query in ([1.0, 0.0, -1.0], [1.0, 1.0, 1.0, 1.0]):
        assert index.rank(query, keep=lambda _: True, k=10, min_score=None) == \
            plain.rank(query, keep=lambda _: True, k=10, min_score=None)


def test_without_numpy_the_blocks_rank_like_the_per_entry_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfootprint.memory.stores import _vector_index, _vectors

    monkeypatch.setattr(_vectors, "_numpy", lambda: None)
    monkeypatch.setattr(_vector_index, "_numpy", lambda: None)
    many = [MemoryEntry(id=f"e{i}", value=i, embedding=[float(i % 5 - 2), 1.0, float(i % 3)],
                        tier="hot" if i % 4 else None) for i in range(50)]
    query = ("search", [1.0, 0.0, 1.0], 12, None, None, None)
    ops: list[tuple[Any, ...]] = [
        ("put", many[:30]), ("put", many[30:]), query, ("delete", 3),
        ("put", [many[7].model_copy(update={"embedding": [2.0, 2.0, 2.0]})]), ("reopen",),
        query, ("search", [1.0, 0.0, 1.0], 5, ("hot",), None, 0.0)]
    asyncio.run(_play(lambda: SQLiteStore(tmp_path / "m.db", clock=lambda: NOW), ops))
