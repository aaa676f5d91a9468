"""One run of a conversation in its own process: resolve the turn, write its two messages.

Usage: ``turn_worker.py KIND TARGET CONVERSATION_ID [PREFIX]`` where KIND is ``sqlite`` (TARGET
is the file), ``redis`` (TARGET is the URL, PREFIX the key prefix) or ``postgres`` (TARGET is
the URL, PREFIX the schema). Prints the turn.
"""

from __future__ import annotations

import asyncio
import sys

from agentfootprint.memory import (
    MemoryEntry,
    MemoryIdentity,
    MemorySource,
    SQLiteStore,
    resolve_turn_number,
)
from agentfootprint.memory.stores._postgres import PostgresStore
from agentfootprint.memory.stores._redis import RedisStore


def open_store(
    kind: str, target: str, prefix: str = ""
) -> SQLiteStore | RedisStore | PostgresStore:
    """The store a run of this backend writes to; use it with ``async with``."""
    if kind == "sqlite":
        return SQLiteStore(target, busy_timeout_ms=30_000)
    if kind == "redis":
        return RedisStore(target, prefix=prefix)
    if kind == "postgres":
        return PostgresStore(target, schema=prefix)
    raise ValueError(f"unknown store kind {kind!r}; use 'sqlite', 'redis' or 'postgres'.")


async def main(kind: str, target: str, conversation_id: str, prefix: str = "") -> None:
    identity = MemoryIdentity(conversation_id)
    async with open_store(kind, target, prefix) as store:
        turn = await resolve_turn_number(stores=[store], identity=identity)
        await store.put_many(
            identity,
            [
                MemoryEntry(
                    id=f"msg-{turn}-{i}",
                    value=text,
                    source=MemorySource(turn=turn, identity=identity),
                )
                for i, text in enumerate(("question", "answer"))
            ],
        )
    print(turn)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
