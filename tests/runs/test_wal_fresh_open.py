"""Several processes opening one fresh SQLite run store at once all open it.

A fresh file is switched to WAL by whichever connection comes first; SQLite answers ``database
is locked`` at once (no busy timeout) to one that asks while another holds the write lock on the
still rollback-mode file (``runs/_wal.py``). Celery workers starting on a new store did exactly
that for their first jobs, and a job failed with "cannot open the run store". Here the other
process is a connection holding that lock, released shortly after.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from _sqlite_lock import another_opener
from agentfootprint.errors import ConfigurationError
from agentfootprint.runs import RunStore
from agentfootprint.runs._wal import enter_wal


def test_a_fresh_store_another_process_is_creating_opens_once_that_one_lets_go(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with another_opener(path, 0.2):
        began = time.monotonic()
        store = RunStore(path)  # before: ConfigurationError "database is locked", at once
        waited = time.monotonic() - began
    try:
        assert waited >= 0.15  # it waited for the other opener instead of failing
        assert store.list() == []
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close()


def test_a_lock_never_let_go_still_fails_after_the_timeout_naming_the_error(
        tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    with another_opener(path, 0.5):
        db = sqlite3.connect(path, isolation_level=None)
        began = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            enter_wal(db, timeout=0.1)
        assert 0.1 <= time.monotonic() - began < 0.45
        db.close()
    db = sqlite3.connect(path, isolation_level=None)
    assert enter_wal(db, timeout=0.1) == "wal"  # once let go, the switch is made
    db.close()


def test_the_run_store_error_names_the_file_when_it_cannot_be_opened(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db"
    path.write_bytes(b"this is no SQLite file" * 100)
    with pytest.raises(ConfigurationError, match="cannot open the run store"):
        RunStore(path)
