"""Memory: entries, identities, the store port, stores and turn numbering."""

from agentfootprint.memory.entry import MemoryEntry, MemorySource, Tier, turn_of
from agentfootprint.memory.errors import InvalidCursorError, MemoryStoreError, UnreadableEntryError
from agentfootprint.memory.identity import MemoryIdentity, identity_namespace, parse_namespace
from agentfootprint.memory.store import (
    MemoryPage,
    MemoryStore,
    ScoredEntry,
    StoreCapabilities,
    VectorSearchStore,
)
from agentfootprint.memory.stores import InMemoryStore, SQLiteStore
from agentfootprint.memory.turn import max_stored_turn, normalize_host_turn, resolve_turn_number

__all__ = [
    "InMemoryStore",
    "InvalidCursorError",
    "MemoryEntry",
    "MemoryIdentity",
    "MemoryPage",
    "MemorySource",
    "MemoryStore",
    "MemoryStoreError",
    "SQLiteStore",
    "ScoredEntry",
    "StoreCapabilities",
    "Tier",
    "UnreadableEntryError",
    "VectorSearchStore",
    "identity_namespace",
    "max_stored_turn",
    "normalize_host_turn",
    "parse_namespace",
    "resolve_turn_number",
    "turn_of",
]
