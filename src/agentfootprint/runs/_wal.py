"""Putting a SQLite file in write-ahead-log mode when several processes open it at once.

``PRAGMA journal_mode=WAL`` on a file still in rollback-journal mode (a fresh file) takes a read
lock, then asks for the write lock to rewrite the header. When another connection is doing the
same at that moment (several Celery workers opening one fresh run store for their first jobs),
one of the two would wait for the other's read lock while holding what the other waits for, so
SQLite answers ``database is locked`` *at once*, without waiting the busy timeout
(it does not call the busy handler for a lock asked for inside a transaction). The switch is
made by whichever connection comes first; the others only have to ask again: :func:`enter_wal`
does, for up to ``timeout`` seconds, so a fresh file opened by many processes at once opens in
every one of them.
"""

from __future__ import annotations

import sqlite3
import time

__all__ = ["enter_wal"]


def _locked(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc)


def enter_wal(db: sqlite3.Connection, *, timeout: float = 5.0) -> str:
    """Ask for WAL mode on ``db`` (outside a transaction) until SQLite stops answering that
    the file is locked, for at most ``timeout`` seconds (then its error is raised); the
    journal mode the file is in afterwards (``"wal"``, or what a file system without WAL
    support leaves). Any other error is raised at once."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            return str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if not _locked(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
