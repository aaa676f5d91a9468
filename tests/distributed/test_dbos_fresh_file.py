"""A DBOS system database (SQLite) that another process is creating at the same moment is
still put in WAL mode: ``_write_ahead`` waits its turn (``runs/_wal.py``) instead of failing
with ``database is locked`` at once, as processes launched together on a fresh file did."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from _sqlite_lock import another_opener

pytest.importorskip("dbos")


def test_a_fresh_system_database_another_process_is_creating_goes_to_wal(
        tmp_path: Path) -> None:
    from agentfootprint.distributed._dbos import _write_ahead

    path = tmp_path / "dbos.sqlite"
    with another_opener(path, 0.2):
        _write_ahead(f"sqlite:///{path}")  # before: OperationalError, database is locked
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()
