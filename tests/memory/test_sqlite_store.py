"""SQLiteStore specifics: a durable WAL file, refusals, and unreadable rows that are never reset."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from memory_helpers import entry

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import (
    MemoryIdentity,
    MemoryStoreError,
    SQLiteStore,
    UnreadableEntryError,
)

ME = MemoryIdentity("c1")


async def test_file_is_wal_and_durable(tmp_path: Path) -> None:
    """The file uses WAL and a second store on the same file sees what the first wrote."""
    path = tmp_path / "m.db"
    async with SQLiteStore(path) as first:
        await first.put(ME, entry("a"))
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()
    async with SQLiteStore(str(path)) as second:
        assert await second.get(ME, "a") is not None


@pytest.mark.parametrize("path", ["", ":memory:"])
def test_in_memory_path_refused(path: str) -> None:
    """A non-durable path is refused with a pointer to InMemoryStore."""
    with pytest.raises(ConfigurationError, match="InMemoryStore"):
        SQLiteStore(path)


def test_not_a_database_refused_by_name(tmp_path: Path) -> None:
    """A file that is not SQLite raises MemoryStoreError naming the store, and is left as it is."""
    path = tmp_path / "junk.db"
    path.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(MemoryStoreError, match=r"junk\.db"):
        SQLiteStore(path)
    assert path.read_bytes() == b"definitely not sqlite" * 100


def test_newer_schema_refused(tmp_path: Path) -> None:
    """A file written by a newer schema version is refused, not rewritten."""
    path = tmp_path / "m.db"
    SQLiteStore(path).close_sync()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE af_memory_meta SET value = '99' WHERE key = 'schema_version'")
    raw.close()
    with pytest.raises(MemoryStoreError, match="schema version '99'"):
        SQLiteStore(path)


@pytest.mark.parametrize("body", ["{not json", '{"id": "a"}', '{"id": "other", "value": 1}'])
async def test_unreadable_row_raises_and_is_kept(tmp_path: Path, body: str) -> None:
    """A row that cannot be decoded raises UnreadableEntryError naming store and id, and stays."""
    path = tmp_path / "m.db"
    async with SQLiteStore(path) as store:
        await store.put(ME, entry("a"))
        with sqlite3.connect(path) as raw:
            raw.execute("UPDATE af_memory_entries SET body = ? WHERE id = 'a'", (body,))
        raw.close()
        for read in (store.get(ME, "a"), store.list(ME)):
            with pytest.raises(UnreadableEntryError) as info:
                await read
            assert info.value.entry_id == "a" and "m.db" in info.value.store
            assert "'a'" in str(info.value)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT body FROM af_memory_entries").fetchall() == [(body,)]
    raw.close()


async def test_put_many_is_one_transaction(tmp_path: Path) -> None:
    """A batch that fails midway leaves nothing written."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        with sqlite3.connect(tmp_path / "m.db") as raw:
            raw.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON af_memory_entries WHEN NEW.id = 'b' "
                "BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        raw.close()
        with pytest.raises(MemoryStoreError, match="boom"):
            await store.put_many(ME, [entry("a"), entry("b")])
        assert (await store.list(ME)).entries == []


async def test_closed_store_refuses(tmp_path: Path) -> None:
    """Calls after aclose() raise MemoryStoreError instead of reopening silently."""
    store = SQLiteStore(tmp_path / "m.db")
    await store.aclose()
    with pytest.raises(MemoryStoreError, match="close"):
        await store.get(ME, "a")
