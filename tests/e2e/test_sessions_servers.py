"""Session stores on real servers: the standing-agent suite and the store model on Redis and
PostgreSQL (the servers ``.ci/run`` starts; skipped locally without them, failed under CI)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))
sys.path.insert(0, str(Path(__file__).parents[1] / "memory"))

from memory_helpers import drop_redis_prefix, redis_prefix, redis_url
from session_suite import (
    OPERATIONS,
    Backend,
    StoreModel,
    busy_across_processes,
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


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    CALLS.clear()
    if request.param == "redis":
        url, prefix = redis_url(), redis_prefix()
        yield Backend(url, {"SESSIONS_PREFIX": prefix})
        drop_redis_prefix(prefix)
    else:
        url, schema = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_schema")
        yield Backend(url, {"SESSIONS_SCHEMA": schema})  # (pg_schema drops it afterwards)


async def test_three_turns_across_two_processes_keep_their_numbers(backend: Backend) -> None:
    await conversation_across_processes(backend)


async def test_a_check_in_pause_is_resumed_by_another_process(backend: Backend) -> None:
    await pause_resumed_elsewhere(backend)


async def test_another_principal_finds_no_session(backend: Backend) -> None:
    await foreign_principal_finds_nothing(backend)


async def test_concurrent_sends_exactly_one_runs(backend: Backend) -> None:
    await concurrent_sends_one_busy(backend)


async def test_a_turn_in_another_process_makes_the_session_busy(backend: Backend,
                                                                 tmp_path: Path) -> None:
    await busy_across_processes(backend, tmp_path / "gate")


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_redis_store_matches_the_model(operations: list[tuple[Any, ...]]) -> None:
    url, prefix = redis_url(), redis_prefix()
    store = redis_sessions(url, prefix=prefix)
    try:
        StoreModel(store).run(operations)
    finally:
        run_sync(store.aclose())
        drop_redis_prefix(prefix)


@settings(max_examples=10, deadline=None,
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

    backend = Backend(redis_url(), {"SESSIONS_PREFIX": redis_prefix()})
    standing = backend.standing()
    session = await standing.start(principal="alice")
    client = redis.asyncio.Redis.from_url(backend.where, decode_responses=True)
    await client.hset(f"{backend.env['SESSIONS_PREFIX']}/s/{session.id}", "turns", "many")
    await client.aclose()
    with pytest.raises(SessionStoreError, match=rf"{session.id}.*unreadable"):
        await standing.get(session.id, principal="alice")
    await standing.close()
    drop_redis_prefix(backend.env["SESSIONS_PREFIX"])
