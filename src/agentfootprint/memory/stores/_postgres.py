"""``PostgresStore``: memory in PostgreSQL, vectors ranked by pgvector's cosine distance.

Entries are rows keyed by ``(namespace, id)``; the entry itself is JSON text (exact bytes, so a
value reads back as it was written) and the columns reads filter and sort on sit beside it. The
embedding lives in a pgvector ``vector`` column with no fixed dimensions, so one table holds
every embedder's vectors; a search compares only rows of the query's length. ``seq`` is a
``bigserial`` write sequence that every put draws afresh, which pins the order of entries that
share ``updated_at``. Turn claims are rows under a primary key inserted with ``ON CONFLICT DO
NOTHING``: exactly one inserter wins, whichever process or connection it runs on. A search is an
exact scan of the namespace's rows in SQL (no approximate index), so it ranks as InMemoryStore
and SQLiteStore do, within float32 rounding. The SQL it shares with ``SQLiteStore`` (paging,
expiry, reads and writes by key, claims) is written once in ``_sql``; the scoring is its own.

With ``create_schema=True`` (the default) the first call creates what is missing — the schema,
the ``vector`` extension, the tables (see ``_pgschema``) — so a fresh database just works; with
``create_schema=False`` an operator must have created them, and a missing table is refused.
"""

from __future__ import annotations

import asyncio
import builtins
import math
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from agentfootprint._postgres import import_driver
from agentfootprint.errors import ConfigurationError
from agentfootprint.memory._entry import MemoryEntry, Tier, now_ms
from agentfootprint.memory._errors import MemoryStoreError, UnreadableEntryError
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import (
    MemoryPage,
    ScoredEntry,
    StoreCapabilities,
    check_entries,
    check_k,
    check_limit,
)
from agentfootprint.memory.stores._closing import Closing
from agentfootprint.memory.stores._keyset import decode_cursor
from agentfootprint.memory.stores._pgschema import (
    MAX_PREFIX,
    SCHEMA_VERSION,
    Tables,
    check_identifier,
    format_vector,
    parse_vector,
    prepare,
    server_label,
)
from agentfootprint.memory.stores._sql import (
    POSTGRES,
    entry_row,
    live,
    page_of,
    page_query,
    same_id,
    scored,
    statements,
    tier_filter,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

_PG_MAX_VECTOR_DIMS = 16000
_T = TypeVar("_T")
_SQL = statements(POSTGRES)


class PostgresStore(Closing):
    """A durable ``MemoryStore`` in PostgreSQL with pgvector search, shared by any number of
    processes.

    Give exactly one of ``url`` (the store opens and owns a pool of up to ``max_connections``
    connections; close it with :meth:`aclose` or ``async with``), ``pool`` (a psycopg_pool
    ``AsyncConnectionPool`` you own) or ``conn`` (one ``AsyncConnection`` you own; calls take
    turns on it and join your transaction when one is open). Tables are named
    ``{table_prefix}_entries``, ``_signatures``, ``_turn_claims``, ``_turn_holders`` and
    ``_meta`` in ``schema``.
    The store belongs to the event loop that first uses it.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        pool: AsyncConnectionPool[Any] | None = None,
        conn: AsyncConnection[Any] | None = None,
        schema: str = "public",
        table_prefix: str = "af_memory",
        create_schema: bool = True,
        max_connections: int = 10,
        timeout: float = 10.0,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        given = [n for n, v in (("url", url), ("pool", pool), ("conn", conn)) if v is not None]
        if len(given) != 1 or url == "":
            raise ConfigurationError(
                "PostgresStore needs exactly one of url=, pool= or conn= "
                f"(got {', '.join(given) or 'none'}); e.g. PostgresStore('postgresql://…')."
            )
        if (
            isinstance(max_connections, bool)
            or not isinstance(max_connections, int)
            or (max_connections < 1)
        ):
            raise ConfigurationError(
                f"PostgresStore(max_connections={max_connections!r}) must be a positive int."
            )
        self._psycopg, self._psycopg_pool = import_driver("PostgresStore")
        self._schema = check_identifier("PostgresStore", "schema", schema, 63)
        self._prefix = check_identifier("PostgresStore", "table_prefix", table_prefix, MAX_PREFIX)
        self._url = url
        self._pool: AsyncConnectionPool[Any] | None = pool
        self._conn = conn
        self._owns_pool = url is not None
        self._create_schema = create_schema
        self._max_connections = max_connections
        self._timeout = timeout
        self._clock = clock
        self._tables: Tables | None = None
        self._setup_lock = asyncio.Lock()
        self._conn_lock = asyncio.Lock()
        self._closed = False
        self._name = (
            f"PostgresStore({self._where()!r}, schema={schema!r}, table_prefix={table_prefix!r})"
        )

    def _where(self) -> str:
        if self._conn is not None:
            return server_label(self._psycopg, self._conn.info.dsn)
        conninfo = self._url if self._url is not None else getattr(self._pool, "conninfo", "")
        return server_label(self._psycopg, conninfo)

    @property
    def name(self) -> str:
        return self._name

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the tables."""
        return self._schema

    @property
    def table_prefix(self) -> str:
        """What every table name starts with."""
        return self._prefix

    @property
    def backend(self) -> str | None:
        """Where the data lives (server, database, schema, prefix): two objects naming the same
        are one store; ``None`` when the connection string cannot be read."""
        where = self._where()
        return None if where == "?" else f"postgres:{where}/{self._schema}/{self._prefix}"

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=True, atomic_turn_claim=True)

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the pool this store opened (never one you passed in); later calls refuse."""
        self._closed = True
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


    async def _open_pool(self) -> AsyncConnectionPool[Any]:
        async with self._setup_lock:
            if self._pool is not None:
                return self._pool
            pool: AsyncConnectionPool[Any] = self._psycopg_pool.AsyncConnectionPool(
                self._url,
                min_size=1,
                max_size=self._max_connections,
                kwargs={"autocommit": True},
                timeout=self._timeout,
                name="agentfootprint-memory",
                open=False,
            )
            try:
                await pool.open(wait=True, timeout=self._timeout)
            except self._psycopg.Error as exc:
                await pool.close()
                raise MemoryStoreError(
                    f"{self.name} cannot connect ({exc}); check the URL and that PostgreSQL "
                    "is running and reachable.",
                    store=self.name,
                ) from exc
            self._pool = pool
            return pool

    @asynccontextmanager
    async def _connection(self, operation: str) -> AsyncIterator[AsyncConnection[Any]]:
        if self._closed:
            raise MemoryStoreError(
                f"{self.name}.{operation}() after the store was closed; make a new PostgresStore.",
                store=self.name,
            )
        if self._conn is not None:
            async with self._conn_lock:
                yield self._conn
            return
        pool = self._pool if self._pool is not None else await self._open_pool()
        async with pool.connection(timeout=self._timeout) as conn:
            yield conn

    async def _run(
        self, operation: str, work: Callable[[AsyncCursor[TupleRow], Tables], Awaitable[_T]]
    ) -> _T:
        """Run ``work`` in one transaction; driver errors become ``MemoryStoreError``."""
        tuple_row = self._psycopg.rows.tuple_row
        try:
            async with self._connection(operation) as conn:
                tables = self._tables or await self._prepare(conn)
                async with conn.transaction(), conn.cursor(row_factory=tuple_row) as cursor:
                    return await work(cursor, tables)
        except self._psycopg.Error as exc:
            raise MemoryStoreError(
                f"{self.name}.{operation}() failed: {exc}".rstrip() + ".", store=self.name
            ) from exc

    async def _prepare(self, conn: AsyncConnection[Any]) -> Tables:
        async with self._setup_lock:
            if self._tables is None:
                tuple_row = self._psycopg.rows.tuple_row
                async with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                    self._tables = await prepare(
                        cur,
                        driver=self._psycopg,
                        schema=self._schema,
                        prefix=self._prefix,
                        create=self._create_schema,
                        store=self.name,
                    )
            return self._tables

    def _compose(self, template: str, t: Tables) -> Any:
        """A shared statement template (``_sql``) with this store's qualified names."""
        return self._psycopg.sql.SQL(template).format(
            entries=t.entries, signatures=t.signatures, claims=t.claims, holders=t.holders,
            vector=t.vector
        )

    # -- entries -----------------------------------------------------------------------------

    def _decode(self, entry_id: str, body: str, embedding: str | None) -> MemoryEntry:
        try:
            entry = MemoryEntry.model_validate_json(body)
            if embedding is not None:
                entry = entry.model_copy(update={"embedding": parse_vector(embedding)})
        except (ValidationError, ValueError) as exc:
            raise UnreadableEntryError(
                f"{self.name} holds entry {entry_id!r} but cannot read it ({exc}); the row is "
                "left as it is — repair or delete it, nothing was replaced.",
                store=self.name,
                entry_id=entry_id,
            ) from exc
        return same_id(entry, entry_id, store=self.name)

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        params = (identity.namespace, entry_id, self._clock())

        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> tuple[str, str | None] | None:
            await cur.execute(self._compose(_SQL.get, t), params)
            row = await cur.fetchone()
            return None if row is None else (row[0], row[1])

        found = await self._run("get", work)
        return None if found is None else self._decode(entry_id, *found)

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        await self.put_many(identity, [entry])

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        """Write the batch in one transaction, in order: each row draws the next ``seq``."""
        check_entries(entries, store=self.name)
        if not entries:
            return
        namespace = identity.namespace
        rows = [entry_row(namespace, e, format_vector) for e in entries]

        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> None:
            await cur.executemany(self._compose(_SQL.put, t), rows)

        await self._run("put_many", work)

    async def list(
        self,
        identity: MemoryIdentity,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        tiers: Sequence[Tier] | None = None,
    ) -> MemoryPage:
        size = check_limit(limit)
        after = decode_cursor(cursor, store=self.name) if cursor is not None else None
        query, params = page_query(POSTGRES, identity.namespace, self._clock(), tiers=tiers,
                                   after=after, size=size)

        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> builtins.list[TupleRow]:
            await cur.execute(self._compose(query, t), params)
            return await cur.fetchall()

        return page_of(await self._run("list", work), size, self._decode)

    async def search(
        self,
        identity: MemoryIdentity,
        vector: Sequence[float],
        *,
        k: int = 10,
        tiers: Sequence[Tier] | None = None,
        min_score: float | None = None,
        embedder_id: str | None = None,
    ) -> builtins.list[ScoredEntry]:
        """Exact cosine ranking in SQL: score ``1 - (embedding <=> query)`` over the rows of
        the query's length, non-zero, live, of the tiers and embedder asked for.

        The query is rounded to float32 as pgvector stores it; a query that is zero there finds
        nothing, and one that is not finite there is refused. pgvector sums in float32, so a row
        whose squared norm overflows or underflows float32 (components beyond ~1e19 or below
        ~1e-19) cannot be scored and is skipped like a zero vector.
        """
        check_k(k)
        query = array("f", vector).tolist()
        if not all(math.isfinite(x) for x in query):
            raise ValueError(
                f"{self.name}.search() needs a vector of finite float32 numbers; "
                "it holds NaN, an infinity or a value too large for float32."
            )
        if not any(query) or len(query) > _PG_MAX_VECTOR_DIMS:
            return []
        sql = self._psycopg.sql
        where = [
            "namespace = %s AND embedding IS NOT NULL",
            live(POSTGRES),
            "(%s::text IS NULL OR embedding_model IS NULL OR embedding_model = %s)",
        ]
        params: builtins.list[object] = [len(query), format_vector(query)]
        params += [identity.namespace, self._clock(), embedder_id, embedder_id]
        if tiers is not None:
            clause, values = tier_filter(POSTGRES, tiers)
            where.append(clause)
            params += values
        outer = ["score IS NOT NULL AND score <> 'NaN'::float8"]
        if min_score is not None:
            outer.append("score >= %s")
            params.append(float(min_score))
        params += [k, identity.namespace]
        # Score once per row (OFFSET 0 keeps the planner from inlining the CASE into every
        # filter and sort key), keep the top k, and only then fetch body and vector text for
        # those k: casting every row's vector to text first made a 100k scan 4x slower.
        template = sql.SQL(
            "SELECT e.id, e.body, e.embedding::text, top.score FROM ("
            "SELECT id, score FROM (SELECT id, "
            "CASE WHEN {dims}(embedding) = %s AND {norm}(embedding) > 0 "
            "THEN 1 - (embedding {cosine} %s::{vector}) END AS score FROM {entries} "
            "WHERE {where} OFFSET 0) AS scored "
            'WHERE {outer} ORDER BY score DESC, id COLLATE "C" LIMIT %s) AS top '
            "JOIN {entries} AS e ON e.namespace = %s AND e.id = top.id "
            'ORDER BY top.score DESC, top.id COLLATE "C"'
        )
        conditions = sql.SQL(" AND ").join(sql.SQL(w) for w in where)
        kept = sql.SQL(" AND ").join(sql.SQL(w) for w in outer)

        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> builtins.list[TupleRow]:
            statement = template.format(
                dims=t.dims,
                norm=t.norm,
                cosine=t.cosine,
                vector=t.vector,
                entries=t.entries,
                where=conditions,
                outer=kept,
            )
            await cur.execute(statement, params)
            return await cur.fetchall()

        return scored(await self._run("search", work), self._decode)

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> None:
            await cur.execute(self._compose(_SQL.delete, t), (identity.namespace, entry_id))

        await self._run("delete", work)

    # -- signatures and turn claims ----------------------------------------------------------

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> bool:
            await cur.execute(self._compose(_SQL.seen, t), (identity.namespace, signature))
            return await cur.fetchone() is not None

        return await self._run("seen", work)

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> None:
            await cur.execute(
                self._compose(_SQL.record_signature, t), (identity.namespace, signature)
            )

        await self._run("record_signature", work)

    async def claim_turn(
        self,
        identity: MemoryIdentity,
        turn: int,
        *,
        owner: str | None = None,
        reclaim_before: int | None = None,
    ) -> bool:
        """``INSERT … ON CONFLICT DO NOTHING`` lets exactly one caller create the claim; taking
        over a settled one is an ``UPDATE`` whose row lock lets exactly one caller win."""
        namespace, now = identity.namespace, self._clock()

        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> bool:
            await cur.execute(self._compose(_SQL.claim_turn, t), (namespace, turn, now))
            won = cur.rowcount == 1
            if not won and owner is not None:
                await cur.execute(self._compose(_SQL.holder, t), (namespace, turn))
                row = await cur.fetchone()
                won = row is not None and row[0] == owner
            if not won and reclaim_before is not None:
                await cur.execute(self._compose(_SQL.reclaim, t),
                                  (now, namespace, turn, reclaim_before, namespace, turn))
                won = cur.rowcount == 1
            if won:
                await cur.execute(self._compose(_SQL.restamp, t), (now, namespace, turn))
                if owner is not None:
                    await cur.execute(self._compose(_SQL.hold, t), (namespace, turn, owner))
            return won

        return await self._run("claim_turn", work)

    async def release_turn(
        self, identity: MemoryIdentity, turn: int, *, owner: str, keep: bool
    ) -> None:
        namespace, now = identity.namespace, self._clock()

        async def work(cur: AsyncCursor[TupleRow], t: Tables) -> None:
            await cur.execute(self._compose(_SQL.unhold, t), (namespace, turn, owner))
            if cur.rowcount == 1:
                statement = _SQL.restamp if keep else _SQL.unclaim
                params = (now, namespace, turn) if keep else (namespace, turn)
                await cur.execute(self._compose(statement, t), params)

        await self._run("release_turn", work)
