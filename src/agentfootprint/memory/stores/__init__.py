"""Memory store implementations: in-process (``memory``), ``sqlite``, ``redis`` and ``postgres``.

The stores are imported from ``agentfootprint.memory``. Redis and PostgreSQL import their
drivers only when a store is made.
"""

from ..._lazy import moved_names as _moved_names

__all__: list[str] = []

__getattr__ = _moved_names(__name__, dict.fromkeys(
    ("InMemoryStore", "PostgresStore", "RedisStore", "SQLiteStore"), "agentfootprint.memory"))
