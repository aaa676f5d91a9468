"""The leak test's secret, sent through a standing agent, reaches nothing its session store keeps.

The conversation of ``tests/test_leaks.py`` (a secret in the user's message, in a tool argument,
in a check-in pause, in a tool error; turns 2 and 3 recall it from memory) runs through
``standing_agent`` on a SQLite session file, with the pause resumed through the session. The
sinks are the session file (and its WAL), the transcript, the listings and the replies handed
to the host; each is checked with the leak test's own ``assert_clean`` in every encoding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from agentfootprint import Agent, Tracing, check_in_approved, tool
from agentfootprint.flow._redact import REDACTED
from agentfootprint.memory import SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.runs import RedactionPolicy
from agentfootprint.serve import sqlite_sessions, standing_agent
from test_leaks import POLICY_KINDS, SEAL_KEY, SECRET, assert_clean

SAW: list[str] = []


@tool(check_in=True)
def save_key(key: str) -> str:
    """Save an API key in the vault."""
    SAW.append(key)
    raise RuntimeError(f"the vault rejected {key}: quota exceeded")


@tool
def check_key(key: str) -> str:
    """Check whether an API key works."""
    SAW.append(key)
    return "the key works"


def respond(request: Any) -> Any:
    last = request.messages[-1]
    if last["role"] == "user" and "save my API key" in str(last["content"]):
        return {"tool_calls": [{"name": "save_key", "args": {"key": SECRET}}]}
    if last["role"] == "user" and "Check my key" in str(last["content"]):
        seen = (request.system or "") + " ".join(str(m.get("content")) for m in request.messages)
        assert SECRET in seen, "turn 2 did not recall turn 1"
        return {"tool_calls": [{"name": "check_key", "args": {"key": SECRET}}]}
    return "Done." if last["role"] == "tool" else "I keep your key but will not repeat it."


async def test_the_session_store_holds_no_secret(tmp_path: Path) -> None:
    SAW.clear()
    memory = SQLiteStore(tmp_path / "memory.db")

    def make() -> Agent:
        return Agent(provider=mock(respond=respond), model="mock", tools=[save_key, check_key],
                     memory=[define_memory(id="chat", type="episodic", strategy="window",
                                           keep_turns=10, store=memory)],
                     tracing=Tracing(redaction=RedactionPolicy(kinds=POLICY_KINDS,
                                                               seal_key=SEAL_KEY)))

    standing = standing_agent(make, sessions=sqlite_sessions(tmp_path / "sessions.db"))
    session = await standing.start(principal="alice")
    replies = [await standing.send(session.id, f"Please save my API key {SECRET} in the vault.",
                                   principal="alice")]
    assert replies[0].status == "paused"
    paused = await standing.get(session.id, principal="alice")
    replies.append(await standing.resume(session.id, check_in_approved(by="ops"),
                                         principal="alice"))
    for message in ("Check my key works.", "Which key did I give you?"):
        replies.append(await standing.send(session.id, message, principal="alice"))
    lines = await standing.transcript(session.id, principal="alice")
    listed = await standing.sessions(principal="alice")
    await standing.close()
    memory.close_sync()

    assert SAW == [SECRET, SECRET]  # not vacuous: the tools got it, turn 2 recalled it
    assert [r.turn for r in replies] == [1, 1, 2, 3]
    assert lines[0].role == "user" and REDACTED in lines[0].content
    sinks = {
        "session store file": b"".join(p.read_bytes()
                                       for p in sorted(tmp_path.glob("sessions.db*"))),
        "session transcript": json.dumps([e.model_dump(mode="json") for e in lines]),
        "session listing": json.dumps([s.model_dump(mode="json") for s in [paused, *listed]]),
        "replies handed to the host": json.dumps(
            [r.model_dump(mode="json") for r in replies]),
    }
    assert len(sinks["session store file"]) > 0
    for name, blob in sinks.items():
        assert_clean(name, blob)


def test_the_scanner_is_the_leak_tests() -> None:
    """The check above fails on a blob holding the secret (so a leak would be seen)."""
    with pytest.raises(AssertionError, match="leaked"):
        assert_clean("a blob", json.dumps({"content": SECRET}))
