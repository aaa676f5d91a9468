"""A fresh SQLite sessions file another process is creating at that moment opens once that one
lets go (``runs/_wal.py``), as several served processes starting on one new file do."""

from __future__ import annotations

import time
from pathlib import Path

from _sqlite_lock import another_opener, journal_mode
from agentfootprint.serve import sqlite_sessions


async def test_a_fresh_sessions_file_another_process_is_creating_opens(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = sqlite_sessions(path)
    with another_opener(path, 0.2):
        began = time.monotonic()
        assert await store.get("absent") is None  # opens here; before: SessionStoreError
        waited = time.monotonic() - began
    try:
        assert waited >= 0.15
        assert journal_mode(path) == "wal"
    finally:
        await store.aclose()
