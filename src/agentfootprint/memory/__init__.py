"""Memory: identities, stores, turn numbering, and memories an agent mounts (``define_memory``
with a type and a strategy).

Embedders live in ``agentfootprint.memory.embedding``; the store port's details (pages, scored
hits, capabilities), namespaces and the memory stages live in their modules.
"""

from agentfootprint._lazy import moved_names as _moved_names
from agentfootprint.memory._define import MemoryDefinition, define_memory
from agentfootprint.memory._entry import MemoryEntry, MemorySource
from agentfootprint.memory._errors import InvalidCursorError, MemoryStoreError, UnreadableEntryError
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import MemoryStore
from agentfootprint.memory._strategies import budget, summarize, top_k, window
from agentfootprint.memory._turn import resolve_turn_number
from agentfootprint.memory.stores._memory import InMemoryStore
from agentfootprint.memory.stores._postgres import PostgresStore
from agentfootprint.memory.stores._redis import RedisStore
from agentfootprint.memory.stores._sqlite import SQLiteStore

__all__ = [
    "InMemoryStore",
    "InvalidCursorError",
    "MemoryDefinition",
    "MemoryEntry",
    "MemoryIdentity",
    "MemorySource",
    "MemoryStore",
    "MemoryStoreError",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "UnreadableEntryError",
    "budget",
    "define_memory",
    "resolve_turn_number",
    "summarize",
    "top_k",
    "window",
]

__getattr__ = _moved_names(__name__, {
    **dict.fromkeys(("load_snapshot", "write_snapshot"), "agentfootprint.memory._causal"),
    **dict.fromkeys(("Embedder", "minilm_embedder", "mock_embedder", "openai_embedder"),
                    "agentfootprint.memory.embedding"),
    **dict.fromkeys(("Tier", "turn_of"), "agentfootprint.memory._entry"),
    **dict.fromkeys(("identity_namespace", "parse_namespace"), "agentfootprint.memory._identity"),
    "write_messages": "agentfootprint.memory._stages",
    **dict.fromkeys(("MemoryPage", "ScoredEntry", "StoreCapabilities", "VectorSearchStore"),
                    "agentfootprint.memory._store"),
    "list_memory_strategies": "agentfootprint.memory._strategies",
    **dict.fromkeys(("max_stored_turn", "normalize_host_turn"), "agentfootprint.memory._turn"),
})
