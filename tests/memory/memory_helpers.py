"""Shared helpers for the memory tests: a settable clock and a store factory per backend."""

from __future__ import annotations

from pathlib import Path

from agentfootprint.memory import InMemoryStore, MemoryEntry, MemorySource, SQLiteStore

STORE_KINDS = ["memory", "sqlite"]


class Clock:
    """A settable unix-ms clock so TTL tests do not sleep."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_store(kind: str, directory: Path, clock: Clock) -> InMemoryStore | SQLiteStore:
    if kind == "memory":
        return InMemoryStore(clock=clock)
    return SQLiteStore(directory / "memory.db", clock=clock)


def close(store: object) -> None:
    if isinstance(store, SQLiteStore):
        store.close()


def entry(
    entry_id: str, *, turn: int | None = None, updated_at: int = 1, **fields: object
) -> MemoryEntry:
    source = MemorySource(turn=turn) if turn is not None else None
    return MemoryEntry.model_validate(
        {
            "id": entry_id,
            "value": entry_id,
            "source": source,
            "created_at": updated_at,
            "updated_at": updated_at,
            **fields,
        }
    )
