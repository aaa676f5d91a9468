"""A fresh SQLite memory file another process is creating at that moment opens once that one
lets go (``runs/_wal.py``): SQLite answers the WAL switch with ``database is locked`` at once,
without the busy timeout, so several workers starting on one new memory file failed."""

from __future__ import annotations

import time
from pathlib import Path

from _sqlite_lock import another_opener, journal_mode
from agentfootprint.memory import MemoryIdentity, SQLiteStore


async def test_a_fresh_memory_file_another_process_is_creating_opens(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with another_opener(path, 0.2):
        began = time.monotonic()
        store = SQLiteStore(path)  # before: MemoryStoreError "database is locked", at once
        waited = time.monotonic() - began
    try:
        assert waited >= 0.15
        assert await store.get(MemoryIdentity(conversation_id="c"), "absent") is None
        assert journal_mode(path) == "wal"
    finally:
        await store.aclose()
