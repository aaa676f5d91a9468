"""``SQLiteStore``: the embedded durable default — one SQLite file, WAL, stdlib ``sqlite3``.

Each entry is one row keyed by ``(namespace, id)`` (separate columns, so no id can compose
another namespace's key), holding the entry as JSON plus the columns reads filter and sort on.
Embeddings live in their own column as little-endian float32 blobs (the JSON body omits them);
a search hydrates the namespace's vectors once and keeps them until any connection writes to
the file (``PRAGMA data_version``) or this store writes. Each put also appends its vectors to
packed float32 blocks (``_vector_index.py``), which a fresh process reads in a few rows.
``seq`` is an AUTOINCREMENT write sequence: every put gets a new, larger one, which pins the
order of entries that share ``updated_at``. Turn claims are rows under a primary key, inserted
inside a ``BEGIN IMMEDIATE`` transaction, so two processes can never claim the same turn; the run
holding a claim is a row of ``af_memory_turn_holders`` until it settles or gives the turn back.
The SQL it shares with ``PostgresStore`` (paging, expiry, reads and writes by key, claims) is
written once in ``_sql``.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

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
from agentfootprint.memory.stores._sql import (
    SQLITE,
    entry_row,
    page_of,
    page_query,
    same_id,
    scored,
    statements,
)
from agentfootprint.memory.stores._vector_index import (
    SQLITE_VECTOR_SCHEMA,
    BlockCache,
    append_sqlite,
    load_sqlite,
)
from agentfootprint.memory.stores._vectors import (
    VectorIndex,
    VectorMeta,
    pack_float32,
    search_filter,
    unpack_float32,
)
from agentfootprint.runs._wal import enter_wal

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

SCHEMA_VERSION = 1
"""The table layout this code writes; a file with a newer one is refused, never rewritten."""

_T = TypeVar("_T")

_TABLES = {"entries": "af_memory_entries", "signatures": "af_memory_signatures",
           "claims": "af_memory_turn_claims", "holders": "af_memory_turn_holders"}
_SQL = statements(SQLITE).named(_TABLES)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS af_memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS af_memory_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER,
    tier TEXT,
    body TEXT NOT NULL,
    embedding BLOB,
    embedding_model TEXT,
    UNIQUE (namespace, id)
) STRICT;
CREATE INDEX IF NOT EXISTS af_memory_entries_order
    ON af_memory_entries (namespace, updated_at DESC, seq DESC);
CREATE TABLE IF NOT EXISTS af_memory_signatures (
    namespace TEXT NOT NULL, signature TEXT NOT NULL, PRIMARY KEY (namespace, signature)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS af_memory_turn_claims (
    namespace TEXT NOT NULL, turn INTEGER NOT NULL, claimed_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, turn)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS af_memory_turn_holders (
    namespace TEXT NOT NULL, turn INTEGER NOT NULL, owner TEXT NOT NULL,
    PRIMARY KEY (namespace, turn)
) STRICT, WITHOUT ROWID;
"""


def _open_fix(path: str) -> str:
    """What to do when SQLite cannot open ``path``: its own message never says which."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"it is a directory — pass a file path, e.g. {os.path.join(path, 'memory.db')!r}"
    if not os.path.isdir(folder):
        return f"its directory {folder!r} does not exist — create it first, or pass another path"
    return f"check that {folder!r} is writable and the file is not locked by another program"


class SQLiteStore(Closing):
    """A durable ``MemoryStore`` in one SQLite file, shareable by threads and processes.

    Calls run in a worker thread, one at a time per instance. Close it with ``aclose()``,
    ``close_sync()``, ``with`` or ``async with`` when done.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._path = os.fspath(path)
        if self._path in ("", ":memory:") or self._path.startswith("file::memory:"):
            raise ConfigurationError(
                f"SQLiteStore({self._path!r}) needs a file path; an in-memory database is not "
                "durable — use InMemoryStore() for that."
            )
        self._clock = clock
        self._lock = threading.Lock()
        self._vectors: dict[str, tuple[int, VectorIndex, list[VectorMeta]]] = {}
        self._blocks = BlockCache()  # the persisted vector blocks read so far
        self._conn: sqlite3.Connection | None = self._open(busy_timeout_ms)

    @property
    def name(self) -> str:
        return f"SQLiteStore({self._path!r})"

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def backend(self) -> str:
        """Where the data lives: the resolved file, so two objects on one file are one store."""
        return f"sqlite:{os.path.realpath(self._path)}"

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=True, atomic_turn_claim=True)

    # -- lifecycle ---------------------------------------------------------------------------

    def _open(self, busy_timeout_ms: int) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise MemoryStoreError(
                f"{self.name} cannot open the file ({exc}); {_open_fix(self._path)}.",
                store=self.name,
            ) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            enter_wal(conn)  # (asked again while another process creates the file)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            for statement in (_SCHEMA + SQLITE_VECTOR_SCHEMA).split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO af_memory_meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            row = conn.execute(
                "SELECT value FROM af_memory_meta WHERE key = 'schema_version'"
            ).fetchone()
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.close()
            raise MemoryStoreError(
                f"{self.name} is not a readable agentfootprint memory file ({exc}); "
                "point it at a new path or at a file this store wrote.",
                store=self.name,
            ) from exc
        version = row[0] if row else None
        if version != str(SCHEMA_VERSION):
            conn.close()
            raise MemoryStoreError(
                f"{self.name} holds schema version {version!r}, this code reads "
                f"{SCHEMA_VERSION}; upgrade agentfootprint to open it.",
                store=self.name,
            )
        return conn

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``MemoryStoreError``."""
        self.close_sync()

    def close_sync(self) -> None:
        """``aclose`` from synchronous code (closing a SQLite file never waits on I/O)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close_sync()


    async def _run(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        def call() -> _T:
            with self._lock:
                if self._conn is None:
                    raise MemoryStoreError(
                        f"{self.name}.{operation}() after the store was closed; "
                        "open a new SQLiteStore.",
                        store=self.name,
                    )
                try:
                    return work(self._conn)
                except BaseException as exc:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.Error):
                        raise MemoryStoreError(
                            f"{self.name}.{operation}() failed: {exc}.", store=self.name
                        ) from exc
                    raise

        return await asyncio.to_thread(call)

    # -- entries -----------------------------------------------------------------------------

    def _decode(self, entry_id: str, body: str, blob: bytes | None = None) -> MemoryEntry:
        try:
            entry = MemoryEntry.model_validate_json(body)
            if blob is not None:
                entry = entry.model_copy(update={"embedding": unpack_float32(blob)})
        except ValidationError as exc:
            raise UnreadableEntryError(
                f"{self.name} holds entry {entry_id!r} but cannot read it ({exc.error_count()} "
                "problem(s)); the row is left as it is — repair or delete it, nothing was "
                "replaced.",
                store=self.name,
                entry_id=entry_id,
            ) from exc
        return same_id(entry, entry_id, store=self.name)

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        params = (identity.namespace, entry_id, self._clock())

        def work(conn: sqlite3.Connection) -> tuple[str, bytes | None] | None:
            row = conn.execute(_SQL.get, params).fetchone()
            return None if row is None else (row[0], row[1])

        found = await self._run("get", work)
        return None if found is None else self._decode(entry_id, *found)

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        await self.put_many(identity, [entry])

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        check_entries(entries, store=self.name)
        if not entries:
            return
        namespace = identity.namespace
        rows = [entry_row(namespace, e, pack_float32) for e in entries]

        def work(conn: sqlite3.Connection) -> None:
            self._vectors.pop(namespace, None)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_SQL.put, rows)
            append_sqlite(conn, namespace)  # the new vectors' block, in the same transaction
            conn.execute("COMMIT")

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
        query, params = page_query(SQLITE, identity.namespace, self._clock(), tiers=tiers,
                                   after=after, size=size)
        statement = query.format_map(_TABLES)

        def work(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement, params).fetchall()

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
        check_k(k)
        namespace, now = identity.namespace, self._clock()
        query = list(vector)

        def work(conn: sqlite3.Connection) -> builtins.list[tuple[str, str, bytes, float]]:
            index, meta = self._hydrate(conn, namespace)
            keep = search_filter(meta, now=now, tiers=tiers, embedder_id=embedder_id)
            hits = index.rank(query, keep=keep, k=k, min_score=min_score)
            found: builtins.list[tuple[str, str, bytes, float]] = []
            for entry_id, score in hits:
                row = conn.execute(_SQL.read, (namespace, entry_id)).fetchone()
                if row is not None:
                    found.append((entry_id, row[0], row[1], score))
            return found

        return scored(await self._run("search", work), self._decode)

    def _hydrate(self, conn: sqlite3.Connection, namespace: str
                 ) -> tuple[VectorIndex, builtins.list[VectorMeta]]:
        """The namespace's vectors, cached until the file changes (any connection)."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        cached = self._vectors.get(namespace)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        index, meta = load_sqlite(conn, namespace, self._blocks)  # _vector_index.py
        self._vectors[namespace] = (version, index, meta)
        return index, meta

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        namespace = identity.namespace

        def work(conn: sqlite3.Connection) -> None:
            self._vectors.pop(namespace, None)
            conn.execute(_SQL.delete, (namespace, entry_id))

        await self._run("delete", work)

    # -- signatures and turn claims ----------------------------------------------------------

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        namespace = identity.namespace

        def work(conn: sqlite3.Connection) -> bool:
            return conn.execute(_SQL.seen, (namespace, signature)).fetchone() is not None

        return await self._run("seen", work)

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        namespace = identity.namespace

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(_SQL.record_signature, (namespace, signature))

        await self._run("record_signature", work)

    async def claim_turn(
        self,
        identity: MemoryIdentity,
        turn: int,
        *,
        owner: str | None = None,
        reclaim_before: int | None = None,
    ) -> bool:
        namespace, now = identity.namespace, self._clock()

        def work(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            won = conn.execute(_SQL.claim_turn, (namespace, turn, now)).rowcount == 1
            if not won and owner is not None:
                row = conn.execute(_SQL.holder, (namespace, turn)).fetchone()
                won = row is not None and row[0] == owner
            if not won and reclaim_before is not None:
                won = conn.execute(_SQL.reclaim, (now, namespace, turn, reclaim_before,
                                                  namespace, turn)).rowcount == 1
            if won:
                conn.execute(_SQL.restamp, (now, namespace, turn))
                if owner is not None:
                    conn.execute(_SQL.hold, (namespace, turn, owner))
            conn.execute("COMMIT")
            return won

        return await self._run("claim_turn", work)

    async def release_turn(
        self, identity: MemoryIdentity, turn: int, *, owner: str, keep: bool
    ) -> None:
        namespace, now = identity.namespace, self._clock()

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute(_SQL.unhold, (namespace, turn, owner)).rowcount == 1:
                if keep:
                    conn.execute(_SQL.restamp, (now, namespace, turn))
                else:
                    conn.execute(_SQL.unclaim, (namespace, turn))
            conn.execute("COMMIT")

        await self._run("release_turn", work)
