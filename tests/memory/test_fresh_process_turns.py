"""Seed 000's bug as an acceptance test: a fresh agent per turn must not overwrite earlier turns.

Each turn is taken by a fresh process that knows nothing but the store and the conversation id
(the production shape: a new agent per request). Five such turns must leave ``msg-1-*`` …
``msg-5-*`` all present, each still holding its own turn's text. Runs on a SQLite file and on
Redis (when ``AGENTFOOTPRINT_REDIS_URL`` is set; required under CI).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from memory_helpers import drop_redis_prefix, redis_prefix, redis_url

from agentfootprint.memory import MemoryIdentity, SQLiteStore
from agentfootprint.memory.stores._redis import RedisStore

CONVERSATION = "support-thread-42"
TURNS = 5

# One turn, run by `python -c` in a fresh interpreter.
# argv: kind (sqlite|redis), target (file|URL), key prefix, conversation id, user message.
FRESH_AGENT_TURN = """
import asyncio, sys

from agentfootprint import Agent
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory, window
from agentfootprint.memory.stores._redis import RedisStore
from agentfootprint.providers import mock


async def turn(kind: str, target: str, prefix: str, conversation: str, message: str) -> None:
    store = (
        SQLiteStore(target, busy_timeout_ms=30_000)
        if kind == "sqlite"
        else RedisStore(target, prefix=prefix)
    )
    async with store:
        chat = define_memory(id="chat", type="episodic", strategy=window(20), store=store)
        agent = Agent(provider=mock(reply="reply to " + message), model="m", memory=[chat],
                      identity=MemoryIdentity(conversation))
        result = await agent.run(message)
    print(result.turn)


asyncio.run(turn(*sys.argv[1:]))
"""


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, target, prefix) of one store every fresh process of the test shares."""
    if request.param == "sqlite":
        yield ("sqlite", str(tmp_path / "memory.db"), "")
        return
    prefix = redis_prefix()
    yield ("redis", redis_url(), prefix)
    drop_redis_prefix(prefix)


def run_fresh_agent(backend: tuple[str, str, str], message: str) -> int:
    """Run one turn in a new interpreter and return the turn it says it took."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_AGENT_TURN, *backend, CONVERSATION, message],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


async def test_five_fresh_processes_keep_all_five_turns(
    backend: tuple[str, str, str],
) -> None:
    """Turn t of a fresh process is turn t: ids msg-1-* … msg-5-* all present, none overwritten."""
    for expected in range(1, TURNS + 1):
        taken = await asyncio.to_thread(run_fresh_agent, backend, f"question {expected}")
        assert taken == expected

    kind, target, prefix = backend
    store = SQLiteStore(target) if kind == "sqlite" else RedisStore(target, prefix=prefix)
    async with store:
        page = await store.list(MemoryIdentity(CONVERSATION), limit=100)
    assert page.cursor is None
    assert [e.id for e in page.entries] == [
        f"msg-{t}-{i}" for t in range(TURNS, 0, -1) for i in (1, 0)
    ]
    by_id = {e.id: e for e in page.entries}
    for t in range(1, TURNS + 1):
        assert by_id[f"msg-{t}-0"].value == {"role": "user", "content": f"question {t}"}
        assert by_id[f"msg-{t}-1"].value == {
            "role": "assistant",
            "content": f"reply to question {t}",
        }
        assert all(by_id[f"msg-{t}-{i}"].source.turn == t for i in (0, 1))  # type: ignore[union-attr]
