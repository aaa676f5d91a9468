"""Memory store implementations: in-process and SQLite."""

from agentfootprint.memory.stores.memory import InMemoryStore
from agentfootprint.memory.stores.sqlite import SQLiteStore

__all__ = ["InMemoryStore", "SQLiteStore"]
