"""One run of a conversation in its own process: resolve the turn, write its two messages."""

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


async def main(path: str, conversation_id: str) -> None:
    identity = MemoryIdentity(conversation_id)
    async with SQLiteStore(path, busy_timeout_ms=30_000) as store:
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
    asyncio.run(main(sys.argv[1], sys.argv[2]))
