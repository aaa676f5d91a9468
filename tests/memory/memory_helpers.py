"""Shared helpers for the memory tests: a settable clock and a store factory per backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.memory import (
    InMemoryStore,
    MemoryEntry,
    MemorySource,
    MemoryStore,
    SQLiteStore,
)
from agentfootprint.memory.stores._postgres import PostgresStore
from agentfootprint.memory.stores._redis import RedisStore

STORE_KINDS = ["memory", "sqlite", "redis", "postgres"]

REDIS_URL_ENV = "AGENTFOOTPRINT_REDIS_URL"
PG_URL_ENV = "AGENTFOOTPRINT_PG_URL"


class Clock:
    """A settable unix-ms clock so TTL tests do not sleep."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_store(kind: str, directory: Path, clock: Clock) -> MemoryStore:
    if kind == "memory":
        return InMemoryStore(clock=clock)
    if kind == "redis":
        client = _disconnecting_client(redis_url())
        return RedisStore(client=client, prefix=redis_prefix(), clock=clock)
    if kind == "postgres":
        return PostgresStore(pool=ConnectPerUse(pg_url()), schema=pg_schema(), clock=clock)
    return SQLiteStore(directory / "memory.db", clock=clock)


def close(store: object) -> None:
    if isinstance(store, SQLiteStore):
        store.close_sync()
    if isinstance(store, RedisStore):
        drop_redis_prefix(store.prefix)
    if isinstance(store, PostgresStore):
        drop_pg_schema(store.schema)


def redis_url() -> str:
    """The test Redis server: skip when unset, but fail under CI, which must never skip it."""
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(f"{REDIS_URL_ENV} is unset under CI; .ci/run starts redis-server and sets it.")
    pytest.skip(f"Redis tests need {REDIS_URL_ENV}=redis://127.0.0.1:6390/0 (a running server).")


def redis_prefix() -> str:
    """A key prefix no other test uses, so tests share one server without seeing each other."""
    return f"aftest-{uuid.uuid4().hex}"


def drop_redis_prefix(prefix: str) -> None:
    """Delete every key under ``prefix`` (SCAN, never KEYS) with a short-lived sync client."""
    import redis

    client = redis.Redis.from_url(redis_url())
    try:
        keys = list(client.scan_iter(match=f"{prefix}/*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _disconnecting_client(url: str) -> Any:
    """An async client whose connections close when released to the pool.

    The shared conformance suite closes stores synchronously; with no connection left open
    between calls, nothing needs an awaited close and no ResourceWarning fires.
    """
    import redis.asyncio

    class DisconnectingPool(redis.asyncio.ConnectionPool):
        async def release(self, connection: Any) -> None:
            await connection.disconnect()
            await super().release(connection)

    pool = DisconnectingPool.from_url(url)
    return redis.asyncio.Redis(connection_pool=pool)


def pg_url() -> str:
    """The test PostgreSQL (with pgvector): skip when unset, but fail under CI, which must not."""
    url = os.environ.get(PG_URL_ENV)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(f"{PG_URL_ENV} is unset under CI; .ci/run starts PostgreSQL and sets it.")
    pytest.skip(f"PostgreSQL tests need {PG_URL_ENV}=postgresql://… (a server with pgvector).")


def pg_schema() -> str:
    """A schema no other test uses; the store creates it and its tables on first use."""
    return f"aftest_{uuid.uuid4().hex}"


def drop_pg_schema(schema: str) -> None:
    """Drop a test schema and everything in it, with a short-lived sync connection."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class ConnectPerUse:
    """Stands in for a psycopg pool: a fresh connection per use, closed when released.

    The shared conformance suite closes stores synchronously; with no connection left open
    between calls, nothing needs an awaited close and no ResourceWarning fires.
    """

    def __init__(self, url: str) -> None:
        self.conninfo = url

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Any]:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        async with conn:
            yield conn


def entry(
    entry_id: str, *, turn: int | None = None, updated_at: int = 1, **fields: object
) -> MemoryEntry:
    source = MemorySource(turn=turn) if turn is not None else None
    return MemoryEntry.model_validate(
        {
            "id": entry_id,
            "value": entry_id,
            "source": source,
            "created_at": updated_at,
            "updated_at": updated_at,
            **fields,
        }
    )
