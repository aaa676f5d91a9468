"""Memory: entries, identities, the store port, stores, turn numbering, and memories an agent
mounts (``define_memory`` with a type and a strategy)."""

from agentfootprint.memory.causal import load_snapshot, write_snapshot
from agentfootprint.memory.define import MemoryDefinition, define_memory
from agentfootprint.memory.embedding import (
    Embedder,
    minilm_embedder,
    mock_embedder,
    openai_embedder,
)
from agentfootprint.memory.entry import MemoryEntry, MemorySource, Tier, turn_of
from agentfootprint.memory.errors import InvalidCursorError, MemoryStoreError, UnreadableEntryError
from agentfootprint.memory.identity import MemoryIdentity, identity_namespace, parse_namespace
from agentfootprint.memory.stages import write_messages
from agentfootprint.memory.store import (
    MemoryPage,
    MemoryStore,
    ScoredEntry,
    StoreCapabilities,
    VectorSearchStore,
)
from agentfootprint.memory.stores import InMemoryStore, PostgresStore, RedisStore, SQLiteStore
from agentfootprint.memory.strategies import (
    budget,
    list_memory_strategies,
    summarize,
    top_k,
    window,
)
from agentfootprint.memory.turn import max_stored_turn, normalize_host_turn, resolve_turn_number

__all__ = [
    "Embedder",
    "InMemoryStore",
    "InvalidCursorError",
    "MemoryDefinition",
    "MemoryEntry",
    "MemoryIdentity",
    "MemoryPage",
    "MemorySource",
    "MemoryStore",
    "MemoryStoreError",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "ScoredEntry",
    "StoreCapabilities",
    "Tier",
    "UnreadableEntryError",
    "VectorSearchStore",
    "budget",
    "define_memory",
    "identity_namespace",
    "list_memory_strategies",
    "load_snapshot",
    "max_stored_turn",
    "minilm_embedder",
    "mock_embedder",
    "normalize_host_turn",
    "openai_embedder",
    "parse_namespace",
    "resolve_turn_number",
    "summarize",
    "top_k",
    "turn_of",
    "window",
    "write_messages",
    "write_snapshot",
]
