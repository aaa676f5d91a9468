"""The checks every session store must pass, shared by the SQLite tests here and the Redis and
PostgreSQL ones in ``tests/e2e/test_sessions_servers.py``.

``Backend`` says where the sessions live (``where``: a SQLite path or a server URL, and the
environment a fresh interpreter needs to find the same prefix or schema); the functions below
run a conversation across processes, a pause resumed elsewhere, ownership and busy sessions
against it; ``StoreModel`` drives the store port itself against a model, over Hypothesis's
``OPERATIONS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from standing_agents import CALLS, standing_for

from agentfootprint import check_in_approved
from agentfootprint.errors import SessionBusy, SessionNotFound, SessionStoreError
from agentfootprint.flow._run import run_sync
from agentfootprint.serve import SessionStore, StandingAgent
from agentfootprint.serve._sessions import SessionRecord, SessionUpdate, TranscriptEntry

HERE = Path(__file__).parent


@dataclass
class Backend:
    """Where a test's sessions live, for this process and for a fresh one."""

    where: str
    env: dict[str, str] = field(default_factory=dict)

    def standing(self, factory: str = "chat") -> StandingAgent:
        os.environ.update(self.env)
        return standing_for(self.where, factory)

    def turn_elsewhere(self, factory: str, command: str, session_id: str, principal: str,
                       text: str) -> dict[str, Any]:
        """One ``send``/``resume`` in a brand-new interpreter; its reply as a dict."""
        done = subprocess.run(
            [sys.executable, str(HERE / "standing_agents.py"), self.where, factory, command,
             session_id, principal, text],
            capture_output=True, text=True, timeout=60, cwd=HERE,
            env={**os.environ, **self.env}, check=False)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def conversation_across_processes(backend: Backend) -> None:
    """Turns 1 and 3 here, turn 2 in another process: numbered 1, 2, 3, nothing lost."""
    standing = backend.standing()
    try:
        session = await standing.start(principal="alice")
        first = await standing.send(session.id, "one", principal="alice")
        second = backend.turn_elsewhere("chat", "send", session.id, "alice", "two")
        third = await standing.send(session.id, "three", principal="alice")
        assert [first.turn, second["turn"], third.turn] == [1, 2, 3]
        assert third.answer == "seen 3: three"  # turn 2's messages reached turn 3
        assert third.run_id.startswith(f"{session.id}.3.")
        lines = await standing.transcript(session.id, principal="alice")
        assert [(e.turn, e.role, e.content) for e in lines] == [
            (1, "user", "one"), (1, "assistant", "seen 1: one"),
            (2, "user", "two"), (2, "assistant", "seen 2: two"),
            (3, "user", "three"), (3, "assistant", "seen 3: three")]
        assert lines[2].run_id == second["run_id"]
        again = await standing.get(session.id, principal="alice")
        assert (again.turns, again.status) == (3, "idle")
    finally:
        await standing.close()


async def pause_resumed_elsewhere(backend: Backend) -> None:
    """A check-in pause started here is resumed by another process; the tool ran there."""
    standing = backend.standing("refunds")
    try:
        session = await standing.start(principal="alice")
        paused = await standing.send(session.id, "refund A-7 please", principal="alice")
        assert paused.status == "paused" and paused.answer is None and CALLS == []
        assert paused.pause is not None and paused.pause["kind"] == "check_in"
        assert paused.pause["evidence"]["will_do"]["args"] == {"order": "A-7", "amount": 250.0}
        shown = await standing.get(session.id, principal="alice")
        assert shown.status == "paused" and shown.pause == paused.pause
        done = backend.turn_elsewhere("refunds", "resume", session.id, "alice",
                                      json.dumps(check_in_approved(by="ops")))
        assert done["status"] == "done" and done["turn"] == 1
        assert done["answer"] == "Done: refunded 250.0 on A-7"
        assert done["calls"] == ["refund A-7 250.0"] and CALLS == []
        assert done["run_id"] == paused.run_id  # the same run, continued
        after = await standing.get(session.id, principal="alice")
        assert (after.status, after.turns, after.pause) == ("idle", 1, None)
        lines = await standing.transcript(session.id, principal="alice")
        assert [(e.turn, e.role) for e in lines] == [(1, "user"), (1, "assistant")]
    finally:
        await standing.close()


async def foreign_principal_finds_nothing(backend: Backend) -> None:
    """Every call of another principal answers exactly as for a session that does not exist."""
    standing = backend.standing("refunds")
    try:
        session = await standing.start(principal="alice")
        await standing.send(session.id, "refund", principal="alice")  # paused, resumable
        absent = "s" + "0" * 32

        async def outcome(call: Callable[[str], Any], session_id: str) -> str:
            with pytest.raises(SessionNotFound) as caught:
                await call(session_id)
            assert caught.value.session_id == session_id
            return str(caught.value).replace(session_id, "<id>")

        async def stream(session_id: str) -> None:
            async with standing.send_stream(session_id, "hi", principal="mallory") as events:
                async for _ in events:
                    pass

        calls: list[Callable[[str], Any]] = [
            lambda i: standing.get(i, principal="mallory"),
            lambda i: standing.send(i, "hi", principal="mallory"),
            lambda i: standing.resume(i, check_in_approved(by="mallory"), principal="mallory"),
            lambda i: standing.transcript(i, principal="mallory"),
            lambda i: standing.delete(i, principal="mallory"),
            stream,
        ]
        for call in calls:
            assert await outcome(call, session.id) == await outcome(call, absent)
        assert await standing.sessions(principal="mallory") == []
        mine = await standing.sessions(principal="alice")
        assert [s.id for s in mine] == [session.id] and mine[0].owner == "alice"
        kept = await standing.get(session.id, principal="alice")
        assert (kept.status, kept.turns, kept.owner) == ("paused", 1, "alice")
        assert CALLS == []  # mallory's resume ran nothing
    finally:
        await standing.close()


async def concurrent_sends_one_busy(backend: Backend) -> None:
    """Two sends at once on one session: one runs, the other is refused as busy."""
    standing = backend.standing("slow")
    try:
        session = await standing.start(principal="alice")
        outcomes = await asyncio.gather(
            *(standing.send(session.id, f"m{i}", principal="alice") for i in range(2)),
            return_exceptions=True)
        busy = [o for o in outcomes if isinstance(o, SessionBusy)]
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        assert (len(busy), len(done)) == (1, 1), outcomes
        assert busy[0].session_id == session.id
        after = await standing.send(session.id, "next", principal="alice")
        assert after.turn == 2  # the claim was released; the busy sends left no turn
    finally:
        await standing.close()


async def busy_across_processes(backend: Backend, gate: Path) -> None:
    """A turn under way in another process holds the session here too, until it ends."""
    standing = backend.standing()
    try:
        session = await standing.start(principal="alice")
        gate.write_text("closed")
        elsewhere = subprocess.Popen(
            [sys.executable, str(HERE / "standing_agents.py"), backend.where, "gated", "send",
             session.id, "alice", "one"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=HERE, env={**os.environ, **backend.env, "SESSIONS_GATE": str(gate)})
        try:
            for _ in range(300):
                if (await standing.get(session.id, principal="alice")).status == "running":
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the other process never claimed the session")
            with pytest.raises(SessionBusy):
                await standing.send(session.id, "two", principal="alice")
        finally:
            gate.unlink()
            out, err = elsewhere.communicate(timeout=60)
        assert elsewhere.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["turn"] == 1
        assert (await standing.send(session.id, "two", principal="alice")).turn == 2
    finally:
        await standing.close()


# -- the store port against a model ---------------------------------------------------------------

IDS = ("sa", "sb")
OWNERS = ("alice", "bob")
HOLDERS = ("h1", "h2")
_ids, _holders = st.sampled_from(IDS), st.sampled_from(HOLDERS)

OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("tick"), st.sampled_from([1.0, 30.0])),
    st.tuples(st.just("create"), _ids, st.sampled_from(OWNERS)),
    st.tuples(st.just("claim"), _ids, _holders),
    st.tuples(st.just("claim"), _ids, _holders),
    st.tuples(st.just("renew"), _ids, _holders),
    st.tuples(st.just("release"), _ids, _holders, st.sampled_from([None, "idle", "paused"])),
    st.tuples(st.just("delete"), _ids),
    st.tuples(st.just("purge"), st.sampled_from([0.0, 5.0, 20.0])),
), max_size=25)
"""Sequences of store calls (claims drawn twice as often: they are what the port is for)."""


class StoreModel:
    """A session store driven side by side with a dict model of the port: every call's answer
    and, after each, every session, transcript and listing must agree."""

    LEASE = 10.0

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.now = 1000.0
        self.model: dict[str, SessionRecord] = {}
        self.lines: dict[str, list[TranscriptEntry]] = {}

    def call(self, coroutine: Any) -> Any:
        return run_sync(coroutine)

    def run(self, operations: list[tuple[Any, ...]]) -> None:
        self.create("sa", "alice")
        self.check()
        for name, *args in operations:
            getattr(self, name)(*args)
            self.check()

    def tick(self, seconds: float) -> None:
        self.now += seconds

    def create(self, session_id: str, owner: str) -> None:
        record = SessionRecord(id=session_id, owner=owner, agent="a", created_at=self.now,
                               updated_at=self.now)
        if session_id in self.model:
            with pytest.raises(SessionStoreError, match="already exists"):
                self.call(self.store.create(record))
            return
        self.call(self.store.create(record))
        self.model[session_id] = record
        self.lines[session_id] = []

    def claim(self, session_id: str, holder: str) -> None:
        won = self.call(self.store.claim(session_id, holder, now=self.now,
                                         until=self.now + self.LEASE))
        held = self.model.get(session_id)
        assert won == (held is not None and (held.holder is None
                                             or held.lease_until < self.now))
        if won:
            self._set(session_id, holder=holder, lease_until=self.now + self.LEASE)

    def renew(self, session_id: str, holder: str) -> None:
        kept = self.call(self.store.renew(session_id, holder, until=self.now + self.LEASE))
        assert kept == (session_id in self.model and self.model[session_id].holder == holder)
        if kept:
            self._set(session_id, lease_until=self.now + self.LEASE)

    def release(self, session_id: str, holder: str, outcome: str | None) -> None:
        update = None
        if outcome is not None:
            turns = self.model[session_id].turns + 1 if session_id in self.model else 1
            update = SessionUpdate(
                turns=turns, status=outcome,  # type: ignore[arg-type]
                checkpoint=json.dumps({"turn": turns}), updated_at=self.now,
                entries=[TranscriptEntry(turn=turns, role="user", content=f"m{turns}",
                                         run_id=f"r{turns}")])
        done = self.call(self.store.release(session_id, holder, update))
        assert done == (session_id in self.model and self.model[session_id].holder == holder)
        if done:
            self._set(session_id, holder=None, lease_until=0.0)
            if update is not None:
                self._set(session_id, turns=update.turns, status=update.status,
                          checkpoint=update.checkpoint, updated_at=update.updated_at)
                self.lines[session_id].extend(update.entries)

    def delete(self, session_id: str) -> None:
        self.call(self.store.delete(session_id))
        self.model.pop(session_id, None)
        self.lines.pop(session_id, None)

    def purge(self, age: float) -> None:
        before = self.now - age
        gone = [i for i, r in self.model.items()
                if r.updated_at < before and (r.holder is None or r.lease_until < self.now)]
        assert self.call(self.store.purge(before=before, now=self.now)) == len(gone)
        for session_id in gone:
            del self.model[session_id]
            del self.lines[session_id]

    def _set(self, session_id: str, **changes: Any) -> None:
        self.model[session_id] = replace(self.model[session_id], **changes)

    def check(self) -> None:
        for session_id in IDS:
            assert self.call(self.store.get(session_id)) == self.model.get(session_id)
            assert self.call(self.store.transcript(session_id)) == self.lines.get(session_id, [])
        for owner in OWNERS:
            listed = [r.id for r in self.call(self.store.list(owner, limit=2))]
            mine = sorted((r for r in self.model.values() if r.owner == owner),
                          key=lambda r: (r.updated_at, r.id), reverse=True)
            assert listed == [r.id for r in mine][:2]
