"""standing_agent on SQLite sessions: turns across processes, pauses resumed elsewhere, owners,
one turn at a time, retention, and stored state that is never guessed around."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from session_suite import (
    Backend,
    busy_across_processes,
    concurrent_sends_one_busy,
    conversation_across_processes,
    foreign_principal_finds_nothing,
    pause_resumed_elsewhere,
)
from standing_agents import CALLS, make_chat, make_refunds

from agentfootprint import Agent, Tracing, check_in_approved
from agentfootprint.errors import (
    ConfigurationError,
    ProviderError,
    SessionBusy,
    SessionNotFound,
    SessionStateError,
    SessionStoreError,
)
from agentfootprint.events import RunFinished
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.runs import RedactionPolicy
from agentfootprint.serve import Session, StandingAgent, sqlite_sessions, standing_agent


@pytest.fixture(autouse=True)
def fresh_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


@pytest.fixture
def backend(tmp_path: Path) -> Backend:
    return Backend(str(tmp_path / "sessions.db"))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_three_turns_across_two_processes_keep_their_numbers(backend: Backend) -> None:
    await conversation_across_processes(backend)


async def test_a_check_in_pause_is_resumed_by_another_process(backend: Backend) -> None:
    await pause_resumed_elsewhere(backend)


async def test_another_principal_finds_no_session(backend: Backend) -> None:
    await foreign_principal_finds_nothing(backend)


async def test_concurrent_sends_exactly_one_runs(backend: Backend) -> None:
    await concurrent_sends_one_busy(backend)


async def test_a_turn_in_another_process_makes_the_session_busy(backend: Backend,
                                                                 tmp_path: Path) -> None:
    await busy_across_processes(backend, tmp_path / "gate")


async def test_a_claim_held_elsewhere_is_busy_until_its_lease_lapses(tmp_path: Path) -> None:
    """A process that crashed mid-turn holds the session only until its lease runs out."""
    clock = Clock()
    store = sqlite_sessions(tmp_path / "s.db")
    standing = standing_agent(make_chat, sessions=store, clock=clock,
                              lease=timedelta(seconds=30))
    session = await standing.start(principal="alice")
    assert await store.claim(session.id, "crashed", now=clock.now, until=clock.now + 30)
    assert (await standing.get(session.id, principal="alice")).status == "running"
    with pytest.raises(SessionBusy, match="busy"):
        await standing.send(session.id, "hi", principal="alice")
    clock.now += 31
    reply = await standing.send(session.id, "hi", principal="alice")
    assert reply.turn == 1 and reply.answer == "seen 1: hi"
    assert not await store.release(session.id, "crashed")  # the old holder lost its claim
    await standing.close()


async def test_a_turn_longer_than_its_lease_keeps_the_session_by_renewing(
        tmp_path: Path) -> None:
    """The claim is renewed while the turn runs: a 0.6 s turn under a 0.15 s lease still
    holds the session against another send, and its outcome is stored."""

    async def slow(request: Any) -> str:
        await asyncio.sleep(0.6)
        return "slow answer"

    standing = standing_agent(Agent(provider=mock(respond=slow), model="m"),
                              sessions=sqlite_sessions(tmp_path / "s.db"),
                              lease=timedelta(seconds=0.15))
    session = await standing.start(principal="alice")
    first = asyncio.ensure_future(standing.send(session.id, "one", principal="alice"))
    await asyncio.sleep(0.4)  # well past the lease: renewed meanwhile
    with pytest.raises(SessionBusy):
        await standing.send(session.id, "two", principal="alice")
    assert (await first).answer == "slow answer"
    assert (await standing.get(session.id, principal="alice")).turns == 1
    await standing.close()


async def test_a_failing_renewal_is_logged_not_swallowed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def slow(request: Any) -> str:
        await asyncio.sleep(0.3)
        return "done"

    store = sqlite_sessions(tmp_path / "s.db")

    async def unreachable(*args: Any, **kwargs: Any) -> bool:
        raise SessionStoreError("the store is unreachable", store=store.name)

    store.renew = unreachable  # type: ignore[method-assign]
    standing = standing_agent(Agent(provider=mock(respond=slow), model="m"), sessions=store,
                              lease=timedelta(seconds=0.15))
    session = await standing.start(principal="alice")
    with caplog.at_level("WARNING", logger="agentfootprint.serve"):
        reply = await standing.send(session.id, "one", principal="alice")
    assert reply.answer == "done"  # nobody took the lapsed claim: the outcome is stored
    assert f"session {session.id!r}" in caplog.text and "unreachable" in caplog.text
    await standing.close()


async def test_the_run_is_numbered_and_named_as_the_session_says(tmp_path: Path) -> None:
    """The turn the run records (agent.turn_start) is the session's, and its run id names
    the session and the turn."""
    started: list[tuple[int, str | None]] = []

    def make() -> Agent:
        agent = make_chat()
        agent.on("agent.turn_start", lambda e: started.append((e.payload["turn"], e.run_id)))
        return agent

    standing = standing_agent(make, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    replies = [await standing.send(session.id, m, principal="alice") for m in "ab"]
    assert started == [(1, replies[0].run_id), (2, replies[1].run_id)]
    assert [r.run_id.split(".")[:2] for r in replies] == [[session.id, "1"], [session.id, "2"]]
    await standing.close()


async def test_send_to_a_paused_session_names_resume_and_resume_needs_a_pause(
        tmp_path: Path) -> None:
    standing = standing_agent(make_refunds, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    with pytest.raises(SessionStateError, match=r"not paused.*send\(\)"):
        await standing.resume(session.id, check_in_approved(by="a"), principal="alice")
    await standing.send(session.id, "refund", principal="alice")
    with pytest.raises(SessionStateError, match=rf"resume\({session.id!r}, answer\)"):
        await standing.send(session.id, "another", principal="alice")
    with pytest.raises(ConfigurationError, match="check_in_approved"):  # the agent's own check
        await standing.resume(session.id, "yes", principal="alice")
    reply = await standing.resume(session.id, check_in_approved(by="a"), principal="alice")
    assert reply.status == "done" and CALLS == ["refund A-7 250.0"]
    await standing.close()


async def test_bad_session_ids_never_reach_the_store(tmp_path: Path) -> None:
    """An id that cannot name a session is SessionNotFound before the store is asked."""

    class Refusing:
        name = "refusing"

        def __getattr__(self, attribute: str) -> Any:
            raise AssertionError(f"the store was asked for {attribute}")

    standing = StandingAgent(make_chat, sessions=sqlite_sessions(tmp_path / "s.db"))
    standing.store = Refusing()  # type: ignore[assignment]
    for bad in ("", "../x", "a/b", "x" * 65, "a b", "\x00", 7, None, "-lead"):
        with pytest.raises(SessionNotFound, match="no session"):
            await standing.get(bad, principal="alice")  # type: ignore[arg-type]
        with pytest.raises(SessionNotFound):
            await standing.send(bad, "hi", principal="alice")  # type: ignore[arg-type]
    for who in ("", " ", "x" * 257, "a\x00b", None, 3):
        with pytest.raises(ConfigurationError, match="principal="):
            await standing.get("s1", principal=who)  # type: ignore[arg-type]


async def test_retention_deletes_untouched_sessions_lazily_and_by_purge(tmp_path: Path) -> None:
    clock = Clock()
    standing = standing_agent(make_chat, sessions=sqlite_sessions(tmp_path / "s.db"),
                              retention=timedelta(hours=1), clock=clock)
    old = await standing.start(principal="alice")
    await standing.send(old.id, "hi", principal="alice")
    clock.now += 1800
    young = await standing.start(principal="alice")
    clock.now += 1801  # old: untouched 3601 s; young: 1801 s
    with pytest.raises(SessionNotFound):
        await standing.get(old.id, principal="alice")
    assert [s.id for s in await standing.sessions(principal="alice")] == [young.id]
    assert await standing.store.transcript(old.id) == []  # its transcript went with it
    await standing.send(young.id, "still here", principal="alice")  # touched: kept
    clock.now += 3000
    assert await standing.purge() == 0
    clock.now += 700
    assert await standing.purge() == 1
    assert await standing.sessions(principal="alice") == []
    await standing.close()


async def test_unreadable_state_raises_naming_session_and_store(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    standing = standing_agent(make_chat, sessions=sqlite_sessions(path))
    session = await standing.start(principal="alice")
    await standing.send(session.id, "one", principal="alice")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE af_sessions SET checkpoint = '{not json' WHERE id = ?", (session.id,))
    with pytest.raises(SessionStoreError, match=rf"{session.id}.*s.db.*unreadable"):
        await standing.send(session.id, "two", principal="alice")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE af_sessions SET status = 'weird' WHERE id = ?", (session.id,))
    with pytest.raises(SessionStoreError, match="unreadable"):
        await standing.get(session.id, principal="alice")
    with sqlite3.connect(path) as db:  # nothing was replaced by a fresh session
        row = db.execute("SELECT checkpoint, status, turns, holder FROM af_sessions").fetchone()
    assert row == ("{not json", "weird", 1, None)
    await standing.close()


async def test_a_failed_turn_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    fail = {"now": False}

    def respond(request: Any) -> Any:
        if fail["now"]:
            return ProviderError("the model is down", provider="mock", status=503,
                                 retryable=False)
        return "ok"

    standing = standing_agent(Agent(provider=mock(respond=respond), model="m"),
                              sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    await standing.send(session.id, "one", principal="alice")
    fail["now"] = True
    with pytest.raises(ProviderError, match="down"):
        await standing.send(session.id, "two", principal="alice")
    kept = await standing.get(session.id, principal="alice")
    assert (kept.turns, kept.status) == (1, "idle")  # claim released, no turn written
    fail["now"] = False
    assert (await standing.send(session.id, "two", principal="alice")).turn == 2
    await standing.close()


async def test_a_bad_message_is_refused_and_frees_the_session(tmp_path: Path) -> None:
    standing = standing_agent(make_chat, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    for bad in (None, 42, b"bytes", ["a list"]):
        with pytest.raises(ConfigurationError, match="str"):
            await standing.send(session.id, bad, principal="alice")  # type: ignore[arg-type]
    assert (await standing.send(session.id, "fine", principal="alice")).turn == 1
    await standing.close()


async def test_a_conversation_redacted_whole_is_refused_not_restarted(tmp_path: Path) -> None:
    """A checkpoint whose history the redaction dropped cannot continue the conversation:
    turn 2 is refused naming the fix, never run as if it were turn 1 of a new one."""
    agent = Agent(provider=mock(reply="ok"), model="m",
                  tracing=Tracing(redaction=RedactionPolicy(keys=["history"])))
    standing = standing_agent(agent, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    await standing.send(session.id, "one", principal="alice")
    with pytest.raises(ConfigurationError, match=r"cannot be continued.*define_memory"):
        await standing.send(session.id, "two", principal="alice")
    kept = await standing.get(session.id, principal="alice")
    assert (kept.turns, kept.status) == (1, "idle")
    await standing.close()


async def test_a_store_that_fails_is_not_guessed_around(tmp_path: Path) -> None:
    store = sqlite_sessions(tmp_path / "s.db")
    standing = standing_agent(make_chat, sessions=store)
    session = await standing.start(principal="alice")

    async def broken(*args: Any, **kwargs: Any) -> bool:
        raise SessionStoreError("the disk is gone", store=store.name)

    store.release = broken  # type: ignore[method-assign]
    with pytest.raises(SessionStoreError, match="disk is gone"):
        await standing.send(session.id, "one", principal="alice")
    await standing.close()
    with pytest.raises(SessionStoreError, match="closed"):
        await store.get(session.id)


async def test_the_stream_updates_the_session_when_the_run_finishes(tmp_path: Path) -> None:
    standing = standing_agent(make_chat, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    await standing.send(session.id, "one", principal="alice")
    seen: list[Any] = []
    async with standing.send_stream(session.id, "two", principal="alice") as events:
        async for event in events:
            seen.append(event)
        assert events.reply.turn == 2 and events.reply.answer == "seen 2: two"
    assert isinstance(seen[-1], RunFinished) and seen[-1].turn == 2
    assert "".join(getattr(e, "text", "") for e in seen[:-1]) == "seen 2: two"
    # leaving early (the run waits for its reader: one event buffered): the run is cancelled,
    # the claim released, no turn written
    async with standing.send_stream(session.id, "three", principal="alice",
                                    max_buffered=1) as events:
        async for _ in events:
            break
    assert (await standing.get(session.id, principal="alice")).turns == 2
    # a reader that stops at RunFinished still gets the session updated
    async with standing.send_stream(session.id, "three", principal="alice") as events:
        async for event in events:
            if isinstance(event, RunFinished):
                break
    assert (await standing.get(session.id, principal="alice")).turns == 3
    lines = await standing.transcript(session.id, principal="alice")
    assert [(e.turn, e.content) for e in lines][-2:] == [(3, "three"), (3, "seen 3: three")]
    await standing.close()


async def test_a_streamed_turn_that_pauses_leaves_the_session_paused(tmp_path: Path) -> None:
    standing = standing_agent(make_refunds, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    async with standing.send_stream(session.id, "refund", principal="alice") as events:
        last = [event async for event in events][-1]
    assert isinstance(last, RunFinished) and last.status == "paused"
    assert events.reply.status == "paused" and events.reply.pause is not None
    assert (await standing.get(session.id, principal="alice")).status == "paused"
    done = await standing.resume(session.id, check_in_approved(by="a"), principal="alice")
    assert done.answer == "Done: refunded 250.0 on A-7" and done.run_id == events.reply.run_id
    await standing.close()


async def test_an_agent_with_memory_keeps_the_conversation_under_the_session(
        tmp_path: Path) -> None:
    """With memory, turns run under MemoryIdentity(session id, owner) and take their number
    from the memory store; the conversation comes back through recall, not the checkpoint."""
    memory = SQLiteStore(tmp_path / "memory.db")

    def make() -> Agent:
        return Agent(provider=mock(respond=lambda r: f"{len(r.messages)} messages"), model="m",
                     memory=[define_memory(type="episodic", strategy="window", store=memory,
                                           keep_turns=10)])

    standing = standing_agent(make, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = await standing.start(principal="alice")
    replies = [await standing.send(session.id, m, principal="alice") for m in ("a", "b", "c")]
    assert [r.turn for r in replies] == [1, 2, 3]
    identity = MemoryIdentity(conversation_id=session.id, principal="alice")
    stored = await memory.list(identity)
    assert {e.source.turn for e in stored.entries if e.source is not None} == {1, 2, 3}
    await standing.close()
    memory.close_sync()


def test_sync_twins_and_an_agent_instance(tmp_path: Path) -> None:
    standing = standing_agent(make_chat(), sessions=sqlite_sessions(tmp_path / "s.db"))
    session = standing.start_sync(principal="bob")
    assert isinstance(session, Session) and session.agent == "chat" and session.turns == 0
    assert standing.send_sync(session.id, "one", principal="bob").turn == 1
    assert standing.send_sync(session.id, "two", principal="bob").answer == "seen 2: two"
    assert len(standing.transcript_sync(session.id, principal="bob")) == 4
    assert [s.turns for s in standing.sessions_sync(principal="bob")] == [2]
    standing.close_sync()


async def test_the_default_store_is_a_sqlite_file_beside_the_run_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    standing = standing_agent(make_chat)
    session = await standing.start(principal="alice")
    await standing.close()
    assert (tmp_path / ".agentfootprint" / "sessions.db").exists()
    again = standing_agent(make_chat)
    assert (await again.get(session.id, principal="alice")).owner == "alice"
    await again.close()


async def test_bad_arguments_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="Agent or a function"):
        standing_agent("make_agent")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="retention="):
        standing_agent(make_chat, retention=timedelta(0), sessions=sqlite_sessions(tmp_path))
    with pytest.raises(ConfigurationError, match="not a session store"):
        standing_agent(make_chat, sessions=str(tmp_path))  # type: ignore[arg-type]
    standing = standing_agent(lambda: "nope", sessions=sqlite_sessions(tmp_path / "s.db"))
    with pytest.raises(ConfigurationError, match="not an Agent"):
        await standing.start(principal="a")
    with pytest.raises(ConfigurationError, match="limit="):
        await standing_agent(make_chat, sessions=sqlite_sessions(tmp_path / "t.db")).sessions(
            principal="a", limit=0)
    await standing.close()


def test_replies_are_json(tmp_path: Path) -> None:
    standing = standing_agent(make_refunds, sessions=sqlite_sessions(tmp_path / "s.db"))
    session = standing.start_sync(principal="a")
    reply = standing.send_sync(session.id, "refund", principal="a")
    shown = json.loads(reply.model_dump_json())
    assert shown["pause"]["tool"] == "refund" and shown["status"] == "paused"
    assert json.loads(standing.get_sync(session.id, principal="a").model_dump_json())["pause"]
    standing.close_sync()
    asyncio.run(asyncio.sleep(0))
