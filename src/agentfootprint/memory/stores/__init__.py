"""Memory store implementations: in-process, SQLite, Redis and PostgreSQL.

Redis and PostgreSQL import their drivers only when a store is made.
"""

from agentfootprint.memory.stores.memory import InMemoryStore
from agentfootprint.memory.stores.postgres import PostgresStore
from agentfootprint.memory.stores.redis import RedisStore
from agentfootprint.memory.stores.sqlite import SQLiteStore

__all__ = ["InMemoryStore", "PostgresStore", "RedisStore", "SQLiteStore"]
