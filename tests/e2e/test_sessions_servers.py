"""Session stores on real servers: the standing-agent suite and the store model on Redis and
PostgreSQL (the servers ``.ci/run`` starts; skipped locally without them, failed under CI)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))

from session_suite import (
    OPERATIONS,
    Backend,
    StoreModel,
    concurrent_sends_one_busy,
    conversation_across_processes,
    foreign_principal_finds_nothing,
    pause_resumed_elsewhere,
)
from standing_agents import CALLS

from agentfootprint.errors import SessionStoreError
from agentfootprint.flow._run import run_sync
from agentfootprint.serve import postgres_sessions, redis_sessions

pytestmark = pytest.mark.e2e

REDIS_URL_ENV = "AGENTFOOTPRINT_REDIS_URL"


def _redis_url() -> str:
    found = os.environ.get(REDIS_URL_ENV)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{REDIS_URL_ENV} is unset under CI; .ci/run starts redis-server and sets it.")
    pytest.skip(f"needs {REDIS_URL_ENV}=redis://… (a running server)")


def _drop_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}/*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    CALLS.clear()
    if request.param == "redis":
        url, prefix = _redis_url(), f"aftest-{uuid.uuid4().hex}"
        yield Backend(url, {"SESSIONS_PREFIX": prefix})
        _drop_prefix(url, prefix)
    else:
        url, schema = request.getfixturevalue("pg_url"), f"aftest_{uuid.uuid4().hex}"
        yield Backend(url, {"SESSIONS_SCHEMA": schema})
        _drop_schema(url, schema)


async def test_three_turns_across_two_processes_keep_their_numbers(backend: Backend) -> None:
    await conversation_across_processes(backend)


async def test_a_check_in_pause_is_resumed_by_another_process(backend: Backend) -> None:
    await pause_resumed_elsewhere(backend)


async def test_another_principal_finds_no_session(backend: Backend) -> None:
    await foreign_principal_finds_nothing(backend)


async def test_concurrent_sends_exactly_one_runs(backend: Backend) -> None:
    await concurrent_sends_one_busy(backend)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_redis_store_matches_the_model(operations: list[tuple[Any, ...]]) -> None:
    url, prefix = _redis_url(), f"aftest-{uuid.uuid4().hex}"
    store = redis_sessions(url, prefix=prefix)
    try:
        StoreModel(store).run(operations)
    finally:
        run_sync(store.aclose())
        _drop_prefix(url, prefix)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_postgres_store_matches_the_model(pg_url: str, pg_schema: str,
                                          operations: list[tuple[Any, ...]]) -> None:
    store = postgres_sessions(pg_url, schema=pg_schema, table=f"s_{uuid.uuid4().hex[:12]}")
    try:
        StoreModel(store).run(operations)
    finally:
        run_sync(store.aclose())


async def test_unreachable_servers_raise_naming_the_store() -> None:
    """A store that cannot reach its server raises SessionStoreError, never an empty answer."""
    redis_store = redis_sessions("redis://127.0.0.1:1/0")
    with pytest.raises(SessionStoreError, match=r"redis_sessions\('redis://127.0.0.1:1/0'"):
        await redis_store.get("s1")
    await redis_store.aclose()
    pg_store = postgres_sessions("postgresql://u:secret@127.0.0.1:1/db", timeout=1)
    with pytest.raises(SessionStoreError, match=r"postgres_sessions\('db@127.0.0.1:1'") as caught:
        await pg_store.get("s1")
    assert "secret" not in str(caught.value)
    await pg_store.aclose()


async def test_unreadable_redis_hash_is_an_error_not_a_fresh_session() -> None:
    import redis.asyncio

    backend = Backend(_redis_url(), {"SESSIONS_PREFIX": f"aftest-{uuid.uuid4().hex}"})
    standing = backend.standing()
    session = await standing.start(principal="alice")
    client = redis.asyncio.Redis.from_url(backend.where, decode_responses=True)
    await client.hset(f"{backend.env['SESSIONS_PREFIX']}/s/{session.id}", "turns", "many")
    await client.aclose()
    with pytest.raises(SessionStoreError, match=rf"{session.id}.*unreadable"):
        await standing.get(session.id, principal="alice")
    await standing.close()
    _drop_prefix(backend.where, backend.env["SESSIONS_PREFIX"])
