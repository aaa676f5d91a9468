"""The row an entry becomes in both SQL stores (SQLite and PostgreSQL share the column order).

Columns: namespace, id, updated_at, expires_at, tier, body (the entry as JSON, without its
vector), embedding (in the backend's own vector form, from ``pack``), embedding_model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentfootprint.memory.entry import MemoryEntry

__all__ = ["entry_row"]


def entry_row(namespace: str, entry: MemoryEntry,
              pack: Callable[[Sequence[float]], object]) -> tuple[object, ...]:
    """``entry`` as one row of the entries table, its vector stored by ``pack``."""
    return (namespace, entry.id, entry.updated_at, entry.expires_at, entry.tier,
            entry.model_dump_json(exclude={"embedding"}),
            None if entry.embedding is None else pack(entry.embedding), entry.embedding_model)
