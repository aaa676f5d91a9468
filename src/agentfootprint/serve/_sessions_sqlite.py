"""Sessions in one SQLite file: the embedded default, shared by every process on the machine.

Durability is the deployment's choice, stated here: the file is in WAL mode, and
``synchronous="NORMAL"`` (the default) keeps every committed turn through a crash of the
process, though the last commits may be lost if the machine loses power; ``"FULL"`` keeps those
too, at an fsync per commit. Claims are a conditional ``UPDATE`` (one statement, so two
processes can never both hold a session); a turn's outcome and its transcript lines are written
in one ``BEGIN IMMEDIATE`` transaction. Calls run on a worker thread (stdlib ``sqlite3``), one
connection per store.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal, TypeVar

from ..errors import ConfigurationError, SessionStoreError
from ..memory.stores._sqlite import _open_fix
from ..runs._wal import enter_wal
from ._sessions import (
    NamedStore,
    SessionRecord,
    SessionUpdate,
    TranscriptEntry,
    parse_entry,
    taken,
)
from ._sessions_sql import COLUMNS, DDL, SQL, record_of

__all__ = ["DEFAULT_SESSIONS", "SQLiteSessionStore", "sqlite_sessions"]

DEFAULT_SESSIONS: Final = Path(".agentfootprint") / "sessions.db"
"""Where sessions live when no store is given (beside the run store's ``runs.db``)."""

_T = TypeVar("_T")
_NAMES: Final = {"sessions": "af_sessions", "entries": "af_session_entries",
                 "owner_index": "af_sessions_owner", "updated_index": "af_sessions_updated"}
_SQL: Final = {name: text.format(**_NAMES, columns=COLUMNS) for name, text in SQL.items()}


def sqlite_sessions(path: str | os.PathLike[str] = DEFAULT_SESSIONS, *,
                    synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
                    busy_timeout: float = 5.0) -> SQLiteSessionStore:
    """A session store in the SQLite file at ``path`` (made, with its folder, when missing).

    ``synchronous`` is the durability you choose (see the module docstring);
    ``busy_timeout`` how many seconds a call waits for another process's write to finish.
    """
    return SQLiteSessionStore(path, synchronous=synchronous, busy_timeout=busy_timeout)


class SQLiteSessionStore(NamedStore):
    """A ``SessionStore`` in one SQLite file (see ``sqlite_sessions``)."""

    def __init__(self, path: str | os.PathLike[str], *,
                 synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
                 busy_timeout: float = 5.0) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigurationError(
                f"sqlite_sessions(synchronous={synchronous!r}) must be 'NORMAL' or 'FULL'")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or (
                busy_timeout < 0):
            raise ConfigurationError(
                f"sqlite_sessions(busy_timeout={busy_timeout!r}) must be seconds >= 0")
        self._path = Path(path)
        self._name = f"sqlite_sessions({str(self._path)!r})"
        self._synchronous = synchronous
        self._busy_ms = int(busy_timeout * 1000)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False,
                                   timeout=self._busy_ms / 1000)
        except (OSError, sqlite3.Error) as exc:
            fix = (f"it is a directory — pass a file path, e.g. "
                   f"{str(self._path / 'sessions.db')!r}" if self._path.is_dir()
                   else _open_fix(str(self._path)))
            raise SessionStoreError(f"{self._name} cannot open the file ({exc}); {fix}",
                                    store=self._name) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            enter_wal(conn)  # (asked again while another process creates the file)
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            for statement in DDL:
                conn.execute(statement.format(**_NAMES))
            conn.execute("COMMIT")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    async def _run(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise SessionStoreError(
                f"{self._name}.{operation}() after the store was closed; make a new one",
                store=self._name)

        def call() -> _T:
            with self._lock:
                try:
                    conn = self._open()
                    try:
                        return work(conn)
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as exc:
                    raise SessionStoreError(
                        f"{self._name}.{operation}() failed ({type(exc).__name__}: {exc}); "
                        "check that the file is a sessions database and is writable",
                        store=self._name) from exc
        return await asyncio.to_thread(call)

    async def create(self, record: SessionRecord) -> None:
        def work(conn: sqlite3.Connection) -> None:
            if conn.execute(_SQL["insert"], (
                    record.id, record.owner, record.agent, record.created_at, record.updated_at,
                    record.turns, record.status, record.checkpoint, record.holder,
                    record.lease_until)).rowcount != 1:
                raise taken(record.id, self._name)
        await self._run("create", work)

    async def get(self, session_id: str) -> SessionRecord | None:
        def work(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(_SQL["get"], (session_id,)).fetchone()
            return None if row is None else record_of(row, self._name)
        return await self._run("get", work)

    async def claim(self, session_id: str, holder: str, *, now: float, until: float) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            return conn.execute(_SQL["claim"], (holder, until, session_id, now)).rowcount == 1
        return await self._run("claim", work)

    async def renew(self, session_id: str, holder: str, *, until: float) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            return conn.execute(_SQL["renew"], (until, session_id, holder)).rowcount == 1
        return await self._run("renew", work)

    async def release(self, session_id: str, holder: str,
                      update: SessionUpdate | None = None) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            if update is None:
                return conn.execute(_SQL["free"], (session_id, holder)).rowcount == 1
            conn.execute("BEGIN IMMEDIATE")
            done = conn.execute(_SQL["finish"], (
                update.turns, update.status, update.checkpoint, update.updated_at, session_id,
                holder)).rowcount == 1
            if done:
                for entry in update.entries:
                    conn.execute(_SQL["append"],
                                 (session_id, session_id, entry.model_dump_json()))
            conn.execute("COMMIT" if done else "ROLLBACK")
            return done
        return await self._run("release", work)

    async def transcript(self, session_id: str) -> list[TranscriptEntry]:
        def work(conn: sqlite3.Connection) -> list[str]:
            return [row[0] for row in conn.execute(_SQL["transcript"], (session_id,))]
        bodies = await self._run("transcript", work)
        return [parse_entry(session_id, body, self._name) for body in bodies]

    async def list(self, owner: str, *, limit: int) -> list[SessionRecord]:
        def work(conn: sqlite3.Connection) -> list[SessionRecord]:
            return [record_of(row, self._name)
                    for row in conn.execute(_SQL["list"], (owner, limit))]
        return await self._run("list", work)

    async def delete(self, session_id: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_SQL["delete_entries"], (session_id,))
            conn.execute(_SQL["delete"], (session_id,))
            conn.execute("COMMIT")
        await self._run("delete", work)

    async def purge(self, *, before: float, now: float) -> int:
        def work(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            stale = [row[0] for row in conn.execute(_SQL["stale"], (before, now))]
            for session_id in stale:
                conn.execute(_SQL["delete_entries"], (session_id,))
                conn.execute(_SQL["delete"], (session_id,))
            conn.execute("COMMIT")
            return len(stale)
        return await self._run("purge", work)

    async def aclose(self) -> None:
        """Close the file's connection; later calls raise ``SessionStoreError``."""
        self._closed = True

        def close() -> None:
            with self._lock:
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.close()
        await asyncio.to_thread(close)
