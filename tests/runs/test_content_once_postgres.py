"""Content stored once in PostgreSQL: a 10 MB user message grows the run store's tables by at
most 12 MB (43.6 MB before: the body held it three times, and begin's body once more)."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest

from agentfootprint import Agent, Tracing
from agentfootprint.memory import InMemoryStore, MemoryIdentity, define_memory, window
from agentfootprint.providers import mock
from agentfootprint.runs import PostgresRunStore, Recording
from agentfootprint.runs._content import address_of

pytestmark = pytest.mark.e2e

MB = 1024 * 1024


def _size(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN "
            "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,)).fetchone()
    return int(found[0]) if found else 0


def _agent(store: PostgresRunStore, memory: InMemoryStore) -> Agent:
    chat = define_memory(id="chat", type="episodic", strategy=window(5), store=memory)
    return Agent(provider=mock(script=["ok"]), name="Big", memory=[chat],
                 identity=MemoryIdentity("c-1"), tracing=Tracing(run_store=store))


def test_a_10_mb_user_message_grows_postgres_by_at_most_12_mb(pg_url: str,
                                                              pg_schema: str) -> None:
    """Tables, indexes and TOAST of the schema, measured around the run (incompressible text,
    so TOAST compression cannot hide a copy)."""
    import psycopg
    from psycopg import sql

    memory = InMemoryStore()
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        _agent(store, memory).run_sync("hi")
    before = _size(pg_url, pg_schema)
    message = base64.b64encode(os.urandom(10 * MB))[:10 * MB].decode()
    with PostgresRunStore(pg_url, schema=pg_schema) as store:
        result = _agent(store, memory).run_sync(message)
        loaded = store.load(result.run_id)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        kept: Any = dict(conn.execute(sql.SQL("SELECT address, body FROM {}").format(
            sql.Identifier(pg_schema, "af_runs_contents"))).fetchall())
    grown = _size(pg_url, pg_schema) - before
    assert grown <= 12 * MB, f"a 10 MB message grew PostgreSQL by {grown / MB:.1f} MB"
    assert loaded.log == Recording.of(result).log
    listed = json.loads(kept[address_of(message)])["$chunks"]  # kept in chunks, each once
    assert "".join(json.loads(kept[part]) for part in listed) == message
    assert len(kept) == len(set(listed)) + 1
