"""A conversation that survives a fresh process per request (USAGE.md §3).

Each request builds a new agent, as a web handler does; the turn number comes from the store,
so turn 2 never overwrites turn 1, and the recall of turn 1 is a tracked injection that a
backtrack names by entry and turn.

Run: python examples/conversation_memory.py
"""

import asyncio
import tempfile
from pathlib import Path

from agentfootprint import Agent
from agentfootprint.explain import backtrack
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import LLMRequest, mock

identity = MemoryIdentity(conversation_id="conv-42", principal="user-7")


def model(request: LLMRequest) -> str:
    """A scripted model that reads its recall: 'three' only if it sees Friday's booking."""
    seen = request.system or ""
    if "Friday" in seen:
        return "Done: the table on Friday is now for three."
    return "Booked: a table for two on Friday."


async def request(path: Path, message: str) -> None:
    with SQLiteStore(path) as store:                       # the embedded default
        agent = Agent(provider=mock(respond=model), model="mock",
                      memory=[define_memory(type="episodic", strategy="window", store=store,
                                            keep_turns=10)])
        result = await agent.run(message, identity=identity)
    print(f"turn {result.turn}: {result.content}")
    if result.turn == 2:
        print(backtrack(result, suspect="memory:episodic#msg-1-0"))


async def main() -> None:
    path = Path(tempfile.mkdtemp()) / "chat.db"
    await request(path, "Book a table for two on Friday.")   # turn 1
    await request(path, "Make it three.")                    # turn 2, never turn 1 again


asyncio.run(main())
