"""A SQLite file another process is in the middle of creating, for the tests of opening one
fresh file from several processes at once (``runs/_wal.py``, the fleet's effects file)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def another_opener(path: Path, hold: float) -> Iterator[None]:
    """A connection holding the write lock on ``path`` while it is still a rollback-journal
    file (as the first of several processes creating it does), let go after ``hold`` seconds.
    SQLite answers a WAL switch asked meanwhile with ``database is locked`` at once."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE IF NOT EXISTS other_side (a)")
    timer = threading.Timer(hold, lambda: other.execute("COMMIT"))
    timer.start()
    try:
        yield
    finally:
        timer.join()
        other.close()


def journal_mode(path: Path) -> str:
    """The journal mode the file at ``path`` is in, read by a connection of its own."""
    check = sqlite3.connect(path)
    try:
        return str(check.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        check.close()
