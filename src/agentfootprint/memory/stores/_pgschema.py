"""The PostgreSQL layout behind ``PostgresStore``: its tables, their creation, pgvector's names.

Creation runs only when the ``_meta`` table is missing, under a transaction-scoped advisory lock
shared by every agentfootprint process, so many processes may start at once against an empty
database and exactly one of them creates the tables (and the ``vector`` extension). pgvector
may live in any schema; its type, functions and operator are always named with that schema, so
nothing depends on the caller's ``search_path``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentfootprint._postgres import DDL_LOCK, check_identifier, server_label
from agentfootprint.errors import ConfigurationError
from agentfootprint.memory._errors import MemoryStoreError

if TYPE_CHECKING:
    from psycopg import AsyncCursor, sql

__all__ = [
    "DDL_LOCK",
    "SCHEMA_VERSION",
    "Tables",
    "check_identifier",
    "format_vector",
    "parse_vector",
    "prepare",
    "server_label",
]

SCHEMA_VERSION = 1
"""The table layout this code writes; tables with a newer one are refused, never rewritten."""

_PG_MAX_IDENTIFIER = 63
_SUFFIXES = ("meta", "entries", "signatures", "turn_claims", "turn_holders")
_ORDER_INDEX = "_entries_order"
MAX_PREFIX = _PG_MAX_IDENTIFIER - len(_ORDER_INDEX)
"""The longest table prefix whose every derived name fits PostgreSQL's identifier limit."""

_HOLDERS_DDL = (
    "CREATE TABLE IF NOT EXISTS {turn_holders} ("
    " namespace text NOT NULL, turn bigint NOT NULL, owner text NOT NULL,"
    " PRIMARY KEY (namespace, turn))"
)
"""Which run holds each turn claim; created on open too, for tables made before it existed."""

_TABLES_DDL = (
    "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {entries} ("
    " namespace text NOT NULL, id text NOT NULL, seq bigserial NOT NULL,"
    " updated_at bigint NOT NULL, expires_at bigint, tier text, body text NOT NULL,"
    " embedding {vector}, embedding_model text, PRIMARY KEY (namespace, id))",
    "CREATE INDEX IF NOT EXISTS {order} ON {entries} (namespace, updated_at DESC, seq DESC)",
    "CREATE TABLE IF NOT EXISTS {signatures} ("
    " namespace text NOT NULL, signature text NOT NULL, PRIMARY KEY (namespace, signature))",
    "CREATE TABLE IF NOT EXISTS {turn_claims} ("
    " namespace text NOT NULL, turn bigint NOT NULL, claimed_at bigint NOT NULL,"
    " PRIMARY KEY (namespace, turn))",
    _HOLDERS_DDL,
)


@dataclass(frozen=True, slots=True)
class Tables:
    """Qualified names of the store's tables and of pgvector's type, functions and operator."""

    entries: sql.Composable
    signatures: sql.Composable
    claims: sql.Composable
    holders: sql.Composable
    vector: sql.Composable
    dims: sql.Composable
    norm: sql.Composable
    cosine: sql.Composable


async def prepare(
    cur: AsyncCursor[Any], *, driver: Any, schema: str, prefix: str, create: bool, store: str
) -> Tables:
    """Create the layout when allowed and missing, check its version, return its names.

    Runs inside the caller's transaction (the advisory lock is held until it commits).
    """
    sql = driver.sql
    names = {s: sql.Identifier(schema, f"{prefix}_{s}") for s in _SUFFIXES}
    if create and not await _has_table(cur, schema, f"{prefix}_meta"):
        await cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (DDL_LOCK,))
        if not await _has_table(cur, schema, f"{prefix}_meta"):
            await _create(cur, driver, schema, prefix, names, store)
    vector_schema = await _vector_schema(cur)
    if vector_schema is None:
        raise ConfigurationError(
            f"{store} needs the pgvector extension in its database; install pgvector on the "
            "server and run CREATE EXTENSION vector (or let create_schema=True do it with a "
            "role allowed to)."
        )
    if not await _has_table(cur, schema, f"{prefix}_meta"):
        raise ConfigurationError(
            f"{store} finds no table {schema}.{prefix}_meta; pass create_schema=True, or point "
            "schema=/table_prefix= at tables this store created."
        )
    if create and not await _has_table(cur, schema, f"{prefix}_turn_holders"):
        await cur.execute(sql.SQL(_HOLDERS_DDL).format(**names))
    await cur.execute(
        sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(names["meta"])
    )
    row = await cur.fetchone()
    version = row[0] if row else None
    if version != str(SCHEMA_VERSION):
        raise MemoryStoreError(
            f"{store} holds schema version {version!r}, this code reads {SCHEMA_VERSION}; "
            "upgrade agentfootprint to open it.",
            store=store,
        )
    return Tables(
        entries=names["entries"],
        signatures=names["signatures"],
        claims=names["turn_claims"],
        holders=names["turn_holders"],
        vector=sql.Identifier(vector_schema, "vector"),
        dims=sql.Identifier(vector_schema, "vector_dims"),
        norm=sql.Identifier(vector_schema, "vector_norm"),
        cosine=sql.SQL("OPERATOR({}.<=>)").format(sql.Identifier(vector_schema)),
    )


async def _has_table(cur: AsyncCursor[Any], schema: str, table: str) -> bool:
    await cur.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s", (schema, table)
    )
    return await cur.fetchone() is not None


async def _vector_schema(cur: AsyncCursor[Any]) -> str | None:
    await cur.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    )
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def _create(
    cur: AsyncCursor[Any],
    driver: Any,
    schema: str,
    prefix: str,
    names: dict[str, sql.Identifier],
    store: str,
) -> None:
    sql = driver.sql
    await cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    if await cur.fetchone() is None:
        await cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    vector_schema = await _vector_schema(cur)
    if vector_schema is None:
        try:
            await cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except driver.Error as exc:
            raise ConfigurationError(
                f"{store} cannot create the pgvector extension ({exc}); install pgvector on "
                "the server and run CREATE EXTENSION vector as a superuser."
            ) from exc
        vector_schema = await _vector_schema(cur)
    vector = sql.Identifier(vector_schema, "vector")
    order = sql.Identifier(prefix + _ORDER_INDEX)
    for statement in _TABLES_DDL:
        await cur.execute(sql.SQL(statement).format(order=order, vector=vector, **names))
    await cur.execute(
        sql.SQL(
            "INSERT INTO {} (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING"
        ).format(names["meta"]),
        (str(SCHEMA_VERSION),),
    )


def format_vector(vector: Sequence[float]) -> str:
    """pgvector's text form. ``repr`` of a float32 value parses back to that exact float32."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def parse_vector(text: str) -> list[float]:
    """The inverse of pgvector's text output, rounded to float32 (what the column holds)."""
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"{text[:40]!r} is not a pgvector value")
    return array("f", (float(x) for x in text[1:-1].split(","))).tolist()
