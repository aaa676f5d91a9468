"""The bad-input battery's rule on the standing agent and its session stores: each bad input is
refused with an error of ours, on one line, naming the thing and the fix, before harm is done
(``tests/test_bad_inputs.py`` is the battery; its ``Refusal`` rows are reused here)."""

from __future__ import annotations

import socket
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from standing_agents import make_chat, make_refunds

from agentfootprint.errors import (
    AgentFootprintError,
    ConfigurationError,
    SessionNotFound,
    SessionStoreError,
)
from agentfootprint.serve import (
    postgres_sessions,
    redis_sessions,
    sqlite_sessions,
    standing_agent,
)
from test_bad_inputs import Refusal


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(session_id: Any, principal: Any = "alice") -> Any:
    async def attempt(tmp: Path) -> None:
        standing = standing_agent(make_chat, sessions=sqlite_sessions(tmp / "s.db"))
        try:
            await standing.get(session_id, principal=principal)
        finally:
            await standing.close()
    return attempt


def _on_file(write: Any) -> Any:
    async def attempt(tmp: Path) -> None:
        path = write(tmp)
        store = sqlite_sessions(path)
        try:
            await store.get("s1")
        finally:
            await store.aclose()
    return attempt


def _a_directory(tmp: Path) -> Path:
    (tmp / "sessions.db").mkdir()
    return tmp / "sessions.db"


def _garbage(tmp: Path) -> Path:
    (tmp / "sessions.db").write_bytes(b"not a database " * 200)
    return tmp / "sessions.db"


async def _message(tmp: Path, message: Any) -> None:
    standing = standing_agent(make_chat, sessions=sqlite_sessions(tmp / "s.db"))
    try:
        session = await standing.start(principal="alice")
        await standing.send(session.id, message, principal="alice")
    finally:
        await standing.close()


async def _altered_checkpoint(tmp: Path) -> None:
    standing = standing_agent(make_chat, sessions=sqlite_sessions(tmp / "s.db"))
    try:
        session = await standing.start(principal="alice")
        await standing.send(session.id, "one", principal="alice")
        with sqlite3.connect(tmp / "s.db") as db:
            db.execute("UPDATE af_sessions SET checkpoint = '[1, 2' WHERE id = ?", (session.id,))
        await standing.send(session.id, "two", principal="alice")
    finally:
        await standing.close()


async def _resume_with_a_bad_answer(tmp: Path) -> None:
    standing = standing_agent(make_refunds, sessions=sqlite_sessions(tmp / "s.db"))
    try:
        session = await standing.start(principal="alice")
        await standing.send(session.id, "refund", principal="alice")
        await standing.resume(session.id, "sure", principal="alice")
    finally:
        await standing.close()


async def _redis_closed_port(_: Path) -> None:
    store = redis_sessions(f"redis://127.0.0.1:{_closed_port()}/0")
    try:
        await store.get("s1")
    finally:
        await store.aclose()


REFUSALS = [
    *(pytest.param(Refusal(_get(bad), SessionNotFound,
                           ("no session", "a session id is 1-64 letters",
                            "use the id start() returned")), id=name)
      for name, bad in (("session-id-path-traversal", "../../escaped"),
                        ("session-id-ansi-escape", "x\x1b[2J"), ("session-id-newline", "a\nb"),
                        ("session-id-1mb", "s" * 1_000_000), ("session-id-not-a-str", 7))),
    *(pytest.param(Refusal(_get("s1", bad), ConfigurationError,
                           ("principal=", "without NUL", "pass who is calling")), id=name)
      for name, bad in (("principal-nul", "a\x00b"), ("principal-1mb", "p" * 1_000_000),
                        ("principal-empty", ""), ("principal-lone-surrogate", "a\ud800"),
                        ("principal-not-a-str", ["alice"]))),
    pytest.param(Refusal(lambda tmp: _message(tmp, "a\ud800b"), ConfigurationError,
                         ("message", "lone surrogate")), id="session-message-lone-surrogate"),
    pytest.param(Refusal(lambda tmp: _message(tmp, {"text": "hi"}), ConfigurationError,
                         ("run() takes the user's message as a str",)),
                 id="session-message-not-a-str"),
    pytest.param(Refusal(_altered_checkpoint, SessionStoreError,
                         ("the checkpoint of session", "s.db", "unreadable",
                          "the row is left as it is")), id="session-checkpoint-altered"),
    pytest.param(Refusal(_resume_with_a_bad_answer, ConfigurationError,
                         ("paused for consent to call 'refund'", "check_in_approved(by=...)")),
                 id="session-resume-answer-not-a-verdict"),
    pytest.param(Refusal(_on_file(_a_directory), SessionStoreError,
                         ("sessions.db", "it is a directory", "pass a file path")),
                 id="sqlite-sessions-on-a-directory"),
    pytest.param(Refusal(_on_file(_garbage), SessionStoreError,
                         ("sessions.db", "file is not a database",
                          "check that the file is a sessions database")),
                 id="sqlite-sessions-on-a-file-that-is-not-sqlite"),
    pytest.param(Refusal(_redis_closed_port, SessionStoreError,
                         ("redis_sessions('redis://127.0.0.1:", "ConnectionError",
                          "check that Redis is running there")),
                 id="redis-sessions-on-a-closed-port"),
    pytest.param(Refusal(lambda _: redis_sessions("http://nope"), ConfigurationError,
                         ("redis_sessions(url='http://nope')", "not a Redis URL",
                          "use redis://host:port/db")), id="redis-sessions-not-a-redis-url"),
    pytest.param(Refusal(lambda _: postgres_sessions("postgresql://x/db", table="s; DROP"),
                         ConfigurationError,
                         ("postgres_sessions(table='s; DROP')", "plain SQL identifier")),
                 id="postgres-sessions-table-not-an-identifier"),
]


@pytest.mark.parametrize("row", REFUSALS)
async def test_refused_with_one_sentence_naming_the_thing_and_the_fix(row: Refusal,
                                                                    tmp_path: Path) -> None:
    with pytest.raises(row.error) as caught:
        outcome = row.attempt(tmp_path)
        if hasattr(outcome, "__await__"):
            await outcome
    message = str(caught.value)
    assert isinstance(caught.value, AgentFootprintError)
    assert "\n" not in message and len(message) < 600
    for part in row.says:
        assert part in message, f"{part!r} missing from: {message}"
