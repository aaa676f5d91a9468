"""The leak test over HTTP with the session store on Redis and on PostgreSQL: the secret
planted through every door of ``serve_app`` is in no key or value under the store's Redis
prefix, no row of its PostgreSQL schema, nor any response, frame or log record.

The scenario is ``tests/serve/http_leak_scenario.py`` (the SQLite store runs it in
``tests/serve/test_http_leaks.py``). Redis is read value by value (strings, hashes, lists,
sets, sorted sets with scores), not with DUMP, whose compression could hide the secret;
PostgreSQL row by row as text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

pytest.importorskip("starlette")
pytest.importorskip("cryptography")

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))
sys.path.insert(0, str(Path(__file__).parents[1] / "memory"))
sys.path.insert(0, str(Path(__file__).parents[1]))

from http_leak_scenario import run_scenario  # noqa: E402
from memory_helpers import drop_redis_prefix, redis_prefix, redis_url  # noqa: E402
from test_http_leaks import check_scenario_went_through  # noqa: E402

from agentfootprint.serve import postgres_sessions, redis_sessions  # noqa: E402
from test_leaks import assert_clean  # noqa: E402


def _redis_bytes(url: str, prefix: str) -> bytes:
    import redis

    client = redis.Redis.from_url(url)
    parts: list[bytes] = []
    try:
        for key in client.scan_iter(match=f"{prefix}/*", count=1000):
            kind = client.type(key).decode()
            parts.append(key)
            if kind == "string":
                parts.append(client.get(key) or b"")
            elif kind == "hash":
                parts += [b for pair in client.hgetall(key).items() for b in pair]
            elif kind == "list":
                parts += client.lrange(key, 0, -1)
            elif kind == "set":
                parts += list(client.smembers(key))
            elif kind == "zset":
                parts += [f"{m!r}{s}".encode() for m, s in client.zrange(key, 0, -1,
                                                                        withscores=True)]
            else:
                raise AssertionError(f"a {kind} key the check cannot read: {key!r}")
    finally:
        client.close()
    return b"\n".join(parts)


def _postgres_bytes(url: str, schema: str) -> bytes:
    import psycopg
    from psycopg import sql

    rows: list[bytes] = []
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [name for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,))]
        assert tables, f"no tables in {schema}"
        for table in tables:
            query = sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(schema, table))
            rows += [str(row).encode() for (row,) in conn.execute(query)]
    return b"\n".join(rows)


def test_the_redis_session_store_holds_no_secret(tmp_path: Path) -> None:
    url, prefix = redis_url(), redis_prefix()
    try:
        seen = run_scenario(redis_sessions(url, prefix=prefix), tmp_path)
        seen.add("Redis keys and values", _redis_bytes(url, prefix))
    finally:
        drop_redis_prefix(prefix)
    check_scenario_went_through(seen)
    assert b"/t/" in seen.sinks["Redis keys and values"]  # the transcript list was read
    for name, blob in seen.sinks.items():
        assert_clean(name, blob)


def test_the_postgres_session_store_holds_no_secret(tmp_path: Path, pg_url: str,
                                                     pg_schema: str) -> None:
    seen = run_scenario(postgres_sessions(pg_url, schema=pg_schema), tmp_path)
    seen.add("PostgreSQL rows", _postgres_bytes(pg_url, pg_schema))
    check_scenario_went_through(seen)
    assert len(seen.sinks["PostgreSQL rows"]) > 1000
    for name, blob in seen.sinks.items():
        assert_clean(name, blob)
