"""Fixtures shared across test folders: the test PostgreSQL server and a schema of one's own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_URL_ENV = "AGENTFOOTPRINT_PG_URL"


@pytest.fixture
def pg_url() -> str:
    """``$AGENTFOOTPRINT_PG_URL``: skipped locally when unset, a failure under CI."""
    found = os.environ.get(PG_URL_ENV)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{PG_URL_ENV} is unset under CI; .ci/run starts PostgreSQL and sets it.")
    pytest.skip(f"PostgreSQL tests need {PG_URL_ENV}=postgresql://… (a running server).")


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A fresh schema name, dropped with everything in it when the test ends."""
    import psycopg
    from psycopg import sql

    name = f"aftest_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
