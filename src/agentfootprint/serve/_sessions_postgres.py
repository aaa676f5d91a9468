"""Sessions in PostgreSQL, shared by every process and host that can reach the server.

Two tables in ``schema``: ``{table}`` (one row per session) and ``{table}_entries`` (transcript
lines), created on first use under the shared DDL lock (``agentfootprint._postgres``). The SQL is
the SQLite store's (``_sessions_sql``); a claim is one conditional ``UPDATE`` (the row lock makes
it atomic across connections), and a turn's outcome with its transcript lines is one
transaction. Durability is PostgreSQL's normal one: a committed turn survives a crash of the
server (``synchronous_commit`` on, as by default).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._postgres import DDL_LOCK, check_identifier, import_driver, server_label
from ..errors import ConfigurationError, SessionStoreError
from ._sessions import (
    NamedStore,
    SessionRecord,
    SessionUpdate,
    TranscriptEntry,
    parse_entry,
    taken,
)
from ._sessions_sql import COLUMNS, DDL, SQL, record_of

if TYPE_CHECKING:
    from psycopg import AsyncCursor
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresSessionStore", "postgres_sessions"]

_T = TypeVar("_T")
_MAX_TABLE: Final = 63 - len("_entries")


def postgres_sessions(url: str | None = None, *, pool: AsyncConnectionPool[Any] | None = None,
                      schema: str = "public", table: str = "af_sessions",
                      max_connections: int = 10, timeout: float = 10.0
                      ) -> PostgresSessionStore:
    """A session store in PostgreSQL: ``url`` (the store opens and closes a pool of up to
    ``max_connections``) or ``pool`` (a psycopg_pool ``AsyncConnectionPool`` you own, with
    ``autocommit=True`` connections). Tables are ``{schema}.{table}`` and ``{table}_entries``."""
    return PostgresSessionStore(url, pool=pool, schema=schema, table=table,
                                max_connections=max_connections, timeout=timeout)


class PostgresSessionStore(NamedStore):
    """A ``SessionStore`` in PostgreSQL (see ``postgres_sessions``). It belongs to the event
    loop that first uses it."""

    def __init__(self, url: str | None = None, *,
                 pool: AsyncConnectionPool[Any] | None = None, schema: str = "public",
                 table: str = "af_sessions", max_connections: int = 10,
                 timeout: float = 10.0) -> None:
        if (url is None) == (pool is None) or url == "":
            raise ConfigurationError(
                "postgres_sessions needs exactly one of url= or pool=; e.g. "
                "postgres_sessions('postgresql://…')")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or (
                max_connections < 1):
            raise ConfigurationError(
                f"postgres_sessions(max_connections={max_connections!r}) must be an int >= 1")
        self._psycopg, self._psycopg_pool = import_driver("postgres_sessions")
        self._schema = check_identifier("postgres_sessions", "schema", schema, 63)
        self._table = check_identifier("postgres_sessions", "table", table, _MAX_TABLE)
        self._url = url
        self._pool = pool
        self._owns_pool = url is not None
        self._max_connections = max_connections
        self._timeout = timeout
        self._setup_lock = asyncio.Lock()
        self._sql: dict[str, Any] | None = None
        self._closed = False
        conninfo = url if url is not None else getattr(pool, "conninfo", "")
        where = server_label(self._psycopg, conninfo)
        self._name = f"postgres_sessions({where!r}, schema={schema!r}, table={table!r})"

    @property
    def schema(self) -> str:
        return self._schema

    def _compose(self, template: str) -> Any:
        sql = self._psycopg.sql
        return sql.SQL(template.replace("?", "%s")).format(
            sessions=sql.Identifier(self._schema, self._table),
            entries=sql.Identifier(self._schema, f"{self._table}_entries"),
            owner_index=sql.Identifier(f"{self._table}_owner"),
            updated_index=sql.Identifier(f"{self._table}_updated"), columns=sql.SQL(COLUMNS))

    async def _open_pool(self) -> AsyncConnectionPool[Any]:
        if self._pool is not None:
            return self._pool
        pool: AsyncConnectionPool[Any] = self._psycopg_pool.AsyncConnectionPool(
            self._url, min_size=1, max_size=self._max_connections,
            kwargs={"autocommit": True}, timeout=self._timeout,
            name="agentfootprint-sessions", open=False)
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except (self._psycopg.Error, self._psycopg_pool.PoolTimeout) as exc:
            await pool.close()
            raise SessionStoreError(
                f"{self._name} cannot connect ({exc}); check the URL and that PostgreSQL is "
                "running and reachable", store=self._name) from exc
        self._pool = pool
        return pool

    async def _prepare(self, cur: AsyncCursor[Any]) -> dict[str, Any]:
        sql = self._psycopg.sql
        await cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (DDL_LOCK,))
        await cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(self._schema)))
        for statement in DDL:
            await cur.execute(self._compose(statement))
        return {name: self._compose(text) for name, text in SQL.items()}

    @asynccontextmanager
    async def _cursor(self, operation: str) -> AsyncIterator[tuple[AsyncCursor[Any],
                                                                   dict[str, Any]]]:
        if self._closed:
            raise SessionStoreError(
                f"{self._name}.{operation}() after the store was closed; make a new one",
                store=self._name)
        async with self._setup_lock:
            pool = await self._open_pool()
        async with pool.connection(timeout=self._timeout) as conn:
            if self._sql is None:
                async with self._setup_lock, conn.transaction(), conn.cursor() as cur:
                    if self._sql is None:
                        self._sql = await self._prepare(cur)
            async with conn.transaction(), conn.cursor() as cur:
                yield cur, self._sql

    async def _run(self, operation: str,
                   work: Callable[[AsyncCursor[Any], dict[str, Any]], Awaitable[_T]]) -> _T:
        try:
            async with self._cursor(operation) as (cur, sql):
                return await work(cur, sql)
        except (self._psycopg.Error, self._psycopg_pool.PoolTimeout) as exc:
            raise SessionStoreError(
                f"{self._name}.{operation}() failed ({type(exc).__name__}: {exc})".rstrip()
                + "; check that PostgreSQL is reachable and the tables are sessions tables",
                store=self._name) from exc

    async def create(self, record: SessionRecord) -> None:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> None:
            await cur.execute(sql["insert"], (
                record.id, record.owner, record.agent, record.created_at, record.updated_at,
                record.turns, record.status, record.checkpoint, record.holder,
                record.lease_until))
            if cur.rowcount != 1:
                raise taken(record.id, self._name)
        await self._run("create", work)

    async def get(self, session_id: str) -> SessionRecord | None:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> SessionRecord | None:
            await cur.execute(sql["get"], (session_id,))
            row = await cur.fetchone()
            return None if row is None else record_of(row, self._name)
        return await self._run("get", work)

    async def claim(self, session_id: str, holder: str, *, now: float, until: float) -> bool:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> bool:
            await cur.execute(sql["claim"], (holder, until, session_id, now))
            return bool(cur.rowcount == 1)
        return await self._run("claim", work)

    async def renew(self, session_id: str, holder: str, *, until: float) -> bool:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> bool:
            await cur.execute(sql["renew"], (until, session_id, holder))
            return bool(cur.rowcount == 1)
        return await self._run("renew", work)

    async def release(self, session_id: str, holder: str,
                      update: SessionUpdate | None = None) -> bool:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> bool:
            if update is None:
                await cur.execute(sql["free"], (session_id, holder))
                return bool(cur.rowcount == 1)
            await cur.execute(sql["finish"], (update.turns, update.status, update.checkpoint,
                                              update.updated_at, session_id, holder))
            if cur.rowcount != 1:
                return False
            for entry in update.entries:
                await cur.execute(sql["append"],
                                  (session_id, session_id, entry.model_dump_json()))
            return True
        return await self._run("release", work)

    async def transcript(self, session_id: str) -> list[TranscriptEntry]:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> list[str]:
            await cur.execute(sql["transcript"], (session_id,))
            return [row[0] for row in await cur.fetchall()]
        bodies = await self._run("transcript", work)
        return [parse_entry(session_id, body, self._name) for body in bodies]

    async def list(self, owner: str, *, limit: int) -> list[SessionRecord]:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> list[SessionRecord]:
            await cur.execute(sql["list"], (owner, limit))
            return [record_of(row, self._name) for row in await cur.fetchall()]
        return await self._run("list", work)

    async def delete(self, session_id: str) -> None:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> None:
            await cur.execute(sql["delete_entries"], (session_id,))
            await cur.execute(sql["delete"], (session_id,))
        await self._run("delete", work)

    async def purge(self, *, before: float, now: float) -> int:
        async def work(cur: AsyncCursor[Any], sql: dict[str, Any]) -> int:
            await cur.execute(sql["stale"], (before, now))
            gone = 0
            for (session_id,) in await cur.fetchall():
                await cur.execute(sql["delete_stale"], (session_id, before, now))
                if cur.rowcount == 1:
                    await cur.execute(sql["delete_entries"], (session_id,))
                    gone += 1
            return gone
        return await self._run("purge", work)

    async def aclose(self) -> None:
        """Close the pool this store opened (a passed-in pool stays open)."""
        self._closed = True
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
