"""PostgresStore specifics: set-up, connection modes, refusals, and rows that are never reset.

The shared behaviour is pinned by test_store_conformance.py (kind "postgres"); these tests need
a server too (``AGENTFOOTPRINT_PG_URL``), except the first few, which refuse before connecting.
"""

from __future__ import annotations

import asyncio
import random
import sys
from array import array
from collections.abc import AsyncIterator, Iterator

import pytest
from memory_helpers import drop_pg_schema, entry, pg_schema, pg_url

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import MemoryEntry, MemoryIdentity, MemoryStoreError
from agentfootprint.memory import UnreadableEntryError as Unreadable
from agentfootprint.memory.stores._postgres import PostgresStore

ME = MemoryIdentity("c1")


# -- refusals that need no server ------------------------------------------------------------


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without psycopg installed the error says exactly what to pip install."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[postgres\]"'):
        PostgresStore("postgresql://localhost/db")


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"url": ""}, {"url": "postgresql://h/db", "conn": object()}],
)
def test_exactly_one_connection_source(kwargs: dict[str, object]) -> None:
    """One of url=, pool= or conn= is required, and only one."""
    with pytest.raises(ConfigurationError, match="exactly one of url=, pool= or conn="):
        PostgresStore(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("schema", "public; DROP TABLE x"),
        ("schema", "1abc"),
        ("schema", 'a"b'),
        ("table_prefix", "af-memory"),
        ("table_prefix", "x" * 50),
        ("schema", ""),
    ],
)
def test_identifiers_are_validated(field: str, value: str) -> None:
    """Schema and table prefix must be plain identifiers that fit PostgreSQL's length limit."""
    with pytest.raises(ConfigurationError, match=field):
        PostgresStore("postgresql://localhost/db", **{field: value})  # type: ignore[arg-type]


def test_name_shows_where_but_never_the_password() -> None:
    """The store's name (used in every error) names database, host and port, not secrets."""
    store = PostgresStore("postgresql://bob:s3cret@db.example:5433/app", schema="mem")
    assert "app@db.example:5433" in store.name and "mem" in store.name
    assert "s3cret" not in store.name


# -- against a server ------------------------------------------------------------------------


@pytest.fixture
def url() -> str:
    return pg_url()


@pytest.fixture
def schema(url: str) -> Iterator[str]:
    name = pg_schema()
    yield name
    drop_pg_schema(name)


@pytest.fixture
async def store(url: str, schema: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(url, schema=schema) as made:
        yield made


async def execute(url: str, statement: str, params: tuple[object, ...] = ()) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement, params)


async def test_creates_its_tables_and_is_durable(url: str, schema: str) -> None:
    """A fresh schema is created on first use; a second store sees what the first wrote."""
    async with PostgresStore(url, schema=schema) as first:
        await first.put(ME, entry("a", embedding=[1.0, 2.0]))
    async with PostgresStore(url, schema=schema, create_schema=False) as second:
        got = await second.get(ME, "a")
        assert got is not None and got.embedding == [1.0, 2.0]


async def test_create_schema_false_refuses_missing_tables(url: str, schema: str) -> None:
    """Without create_schema the tables must exist; the error says how to fix it."""
    async with PostgresStore(url, schema=schema, create_schema=False) as store:
        with pytest.raises(ConfigurationError, match="create_schema=True"):
            await store.get(ME, "a")


async def test_newer_schema_version_refused(store: PostgresStore, url: str, schema: str) -> None:
    """Tables written by a newer layout are refused, never rewritten."""
    await store.get(ME, "a")
    await execute(url, f"UPDATE {schema}.af_memory_meta SET value = '99'")
    async with PostgresStore(url, schema=schema) as again:
        with pytest.raises(MemoryStoreError, match="schema version '99'"):
            await again.get(ME, "a")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("body", "{not json"),
        ("body", '{"id": "a"}'),
        ("body", '{"id": "other", "value": 1}'),
    ],
)
async def test_unreadable_row_raises_and_is_kept(
    store: PostgresStore, url: str, schema: str, column: str, value: str
) -> None:
    """A row that cannot be decoded raises naming store and id, on every read, and stays."""
    await store.put(ME, entry("a", embedding=[1.0, 0.0]))
    await execute(url, f"UPDATE {schema}.af_memory_entries SET {column} = %s", (value,))
    reads = (store.get(ME, "a"), store.list(ME), store.search(ME, [1.0, 0.0]))
    for read in reads:
        with pytest.raises(Unreadable) as info:
            await read
        assert info.value.entry_id == "a" and schema in info.value.store
        assert "'a'" in str(info.value)
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(f"SELECT {column} FROM {schema}.af_memory_entries")
        assert await cursor.fetchall() == [(value,)]


async def test_put_many_is_one_transaction(store: PostgresStore) -> None:
    """A batch that fails midway (a vector pgvector refuses) leaves nothing written."""
    too_long = [1.0] * 16_001
    with pytest.raises(MemoryStoreError, match=r"put_many\(\) failed") as info:
        await store.put_many(ME, [entry("a"), entry("b", embedding=too_long)])
    assert info.value.store == store.name
    assert (await store.list(ME)).entries == []


async def test_driver_errors_name_the_store(store: PostgresStore, url: str, schema: str) -> None:
    """Tables dropped under a running store raise MemoryStoreError; nothing reads as empty."""
    await store.put(ME, entry("a"))
    await execute(url, f"DROP TABLE {schema}.af_memory_entries")
    for call in (store.get(ME, "a"), store.list(ME), store.put(ME, entry("b"))):
        with pytest.raises(MemoryStoreError, match="af_memory_entries") as info:
            await call
        assert info.value.store == store.name and isinstance(info.value.__cause__, Exception)


async def test_unreachable_server_is_a_store_error(tmp_path: object) -> None:
    """A server that is not there raises MemoryStoreError naming the store and the fix."""
    store = PostgresStore(f"postgresql://nobody@/db?host={tmp_path}&connect_timeout=1", timeout=1.0)
    with pytest.raises(MemoryStoreError, match="cannot connect") as info:
        await store.get(ME, "a")
    assert info.value.store == store.name
    await store.aclose()


async def test_closed_store_refuses(url: str, schema: str) -> None:
    """Calls after aclose() raise MemoryStoreError instead of reopening silently."""
    store = PostgresStore(url, schema=schema)
    await store.put(ME, entry("a"))
    await store.aclose()
    with pytest.raises(MemoryStoreError, match="was closed"):
        await store.get(ME, "a")


async def test_embeddings_round_trip_bit_for_bit(store: PostgresStore) -> None:
    """Float32 values across the whole range come back exactly, through get, list and search."""
    rng = random.Random(7)
    extreme = [rng.uniform(-1, 1) * 10 ** rng.randint(-38, 38) for _ in range(512)]
    extreme += [1.4e-45, -3.4028234663852886e38, -0.0, 1.0]
    usual = [rng.uniform(-1, 1) * 10 ** rng.randint(-6, 3) for _ in range(384)]
    written = [
        MemoryEntry(id=i, value=None, embedding=v) for i, v in (("x", extreme), ("u", usual))
    ]
    assert written[0].embedding == array("f", extreme).tolist()
    await store.put_many(ME, written)
    assert [await store.get(ME, "x"), await store.get(ME, "u")] == written
    assert (await store.list(ME)).entries == written[::-1]
    assert [h.entry for h in await store.search(ME, usual)] == [written[1]]


async def test_search_query_is_checked(store: PostgresStore) -> None:
    """A non-finite query is refused; one that is zero in float32 finds nothing."""
    await store.put(ME, entry("a", embedding=[1.0, 0.0]))
    with pytest.raises(ValueError, match="finite"):
        await store.search(ME, [float("nan"), 1.0])
    with pytest.raises(ValueError, match="finite"):
        await store.search(ME, [1e39, 1.0])
    assert await store.search(ME, [1e-46, 0.0]) == []
    assert await store.search(ME, []) == []


async def test_one_column_holds_every_dimension(store: PostgresStore) -> None:
    """Vectors of different lengths share the table; a search ranks only its own length."""
    await store.put_many(ME, [entry(f"d{n}", embedding=[1.0] * n) for n in (1, 3, 384, 1536)])
    for n in (1, 3, 384, 1536):
        hits = await store.search(ME, [1.0] * n)
        assert [h.entry.id for h in hits] == [f"d{n}"]
        assert hits[0].score == pytest.approx(1.0)


async def test_works_when_pgvector_is_off_the_search_path(url: str, schema: str) -> None:
    """pgvector's names are schema-qualified, so a caller's search_path cannot break search."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(
        url, autocommit=True, options="-c search_path=pg_catalog"
    )
    async with conn:
        store = PostgresStore(conn=conn, schema=schema)
        await store.put_many(
            ME, [entry("x", embedding=[1.0, 0.0]), entry("y", embedding=[0.0, 1.0])]
        )
        assert [h.entry.id for h in await store.search(ME, [1.0, 0.2])] == ["x", "y"]
        await store.aclose()
        assert not conn.closed


async def test_caller_connection_joins_the_callers_transaction(url: str, schema: str) -> None:
    """With conn=, writes inside the caller's transaction roll back with it; any row factory."""
    import psycopg
    from psycopg.rows import dict_row

    async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
        store = PostgresStore(conn=conn, schema=schema)
        await store.put(ME, entry("kept"))
        with pytest.raises(RuntimeError, match="caller failed"):
            async with conn.transaction():
                await store.put(ME, entry("rolled-back"))
                assert await store.get(ME, "rolled-back") is not None
                raise RuntimeError("caller failed")
        assert [e.id for e in (await store.list(ME)).entries] == ["kept"]
    async with PostgresStore(url, schema=schema) as other:
        assert [e.id for e in (await other.list(ME)).entries] == ["kept"]


async def test_caller_pool_is_used_and_left_open(url: str, schema: str) -> None:
    """With pool=, the store borrows connections and aclose() leaves the pool to its owner."""
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(url, min_size=1, max_size=2, open=False) as pool:
        store = PostgresStore(pool=pool, schema=schema)
        claims = await asyncio.gather(*(store.claim_turn(ME, turn) for turn in range(1, 11)))
        assert all(claims)
        await store.aclose()
        assert not pool.closed
        async with pool.connection() as conn:
            cursor = await conn.execute(f"SELECT count(*) FROM {schema}.af_memory_turn_claims")
            assert await cursor.fetchone() == (10,)


async def test_many_stores_create_one_schema_at_once(url: str, schema: str) -> None:
    """Ten stores starting together on an empty schema all succeed (creation is serialised)."""
    stores = [PostgresStore(url, schema=schema) for _ in range(10)]
    try:
        results = await asyncio.gather(*(s.claim_turn(ME, 1) for s in stores))
        assert results.count(True) == 1
    finally:
        await asyncio.gather(*(s.aclose() for s in stores))
