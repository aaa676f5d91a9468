"""A served composition whose members have memory remembers the session, like a served agent.

The team is ``team_factories.make_memory_team``: a planner → writer ``Sequence``, both with
window memory in one SQLite memory store, served by ``serve_app`` in process (httpx over
ASGI). Each turn runs under ``MemoryIdentity(session id, principal=owner)`` (the rule a served
``Agent`` with memory follows), each member run claims its own turn in that store, a member's
pause is resumed (in another app too), and nothing crosses sessions or principals.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

import team_factories

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import MemoryIdentity, SQLiteStore
from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions, standing_agent
from agentfootprint.serve._served import ServedComposition, remembers, served

ALICE = "alice-key-0123456789"
BOB = "bob-key-0123456789xx"
Make = Callable[..., Awaitable[httpx.AsyncClient]]
APPROVED = {"answer": {"check_in": "approved", "by": "alice"}}


@pytest.fixture
async def make_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                      ) -> AsyncIterator[Make]:
    """``await make_client(key)``: a client (as ``key``'s principal) of a fresh app serving
    the memory team; every app shares one session file and one memory store."""
    monkeypatch.setenv("TEAM_MEMORY_DB", str(tmp_path / "memory.db"))
    monkeypatch.delenv("TEAM_RUNS_DB", raising=False)
    team_factories.PROMPTS.clear()
    team_factories.REFUNDS.clear()
    opened: list[tuple[httpx.AsyncClient, Any]] = []

    async def make(key: str = ALICE) -> httpx.AsyncClient:
        app = serve_app("team_factories:make_memory_team",
                        sessions=sqlite_sessions(tmp_path / "sessions.db"),
                        auth=api_key_auth({ALICE: "alice", BOB: "bob"}))
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://testserver",
                                 headers={"Authorization": f"Bearer {key}"}, timeout=20)
        opened.append((http, app))
        return http

    yield make
    for http, app in opened:
        await http.aclose()
        await app.state.standing.close()
    team_factories.close_memory()


async def _send(client: httpx.AsyncClient, session: str, message: str) -> httpx.Response:
    return await client.post(f"/sessions/{session}/messages", json={"message": message})


async def stored(path: Path, session: str, principal: str = "alice") -> list[str]:
    """The entry ids the memory store holds under the session's identity."""
    store = SQLiteStore(path)
    try:
        page = await store.list(MemoryIdentity(session, principal=principal), limit=100)
        return sorted(entry.id for entry in page.entries)
    finally:
        await store.aclose()


def held_claims(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        count: int = conn.execute("SELECT count(*) FROM af_memory_turn_holders").fetchone()[0]
    return count


def prompts(member: str) -> list[str]:
    return [prompt for name, prompt in team_factories.PROMPTS if name == member]


def ids(*turns: int) -> list[str]:
    return [f"msg-{turn}-{i}" for turn in turns for i in (0, 1)]


async def test_two_turns_of_a_memory_team_remember_the_session_under_its_identity(
        make_client: Make, tmp_path: Path) -> None:
    """Two turns in one session: the session numbers them 1 and 2, the four member runs take
    memory turns 1-4 under MemoryIdentity(session, principal=alice) (none overwrites another),
    the second turn's members recall the first, and no claim is left held."""
    client = await make_client()
    session = (await client.post("/sessions")).json()["id"]
    first = await _send(client, session, "a post about tea")
    assert first.status_code == 200, first.text
    assert first.json()["answer"] == "post from plan: a post about tea"
    assert await stored(tmp_path / "memory.db", session) == ids(1, 2)
    second = await _send(client, session, "now about coffee")
    assert second.status_code == 200, second.text
    assert [first.json()["turn"], second.json()["turn"]] == [1, 2]
    assert await stored(tmp_path / "memory.db", session) == ids(1, 2, 3, 4)
    planner, writer = prompts("planner"), prompts("writer")
    assert "tea" not in planner[0].rpartition("|")[0]  # the first turn recalls nothing
    assert "a post about tea" in planner[1] and "plan: a post about tea" in planner[1]
    assert planner[1].endswith("now about coffee")
    assert "post from plan: a post about tea" in writer[1]
    assert writer[1].endswith("plan: now about coffee")
    assert held_claims(tmp_path / "memory.db") == 0
    # what the store holds is under the session's owner only, never another principal's
    assert await stored(tmp_path / "memory.db", session, principal="bob") == []


async def test_another_session_sees_nothing_and_another_principal_gets_404(
        make_client: Make, tmp_path: Path) -> None:
    """A second session of the same owner starts a conversation of its own (its members
    recall nothing of the first, its memory turns start at 1); Bob cannot send to, read or
    resume Alice's session (404, as if it did not exist) and nothing is stored for him."""
    alice, bob = await make_client(), await make_client(BOB)
    one = (await alice.post("/sessions")).json()["id"]
    assert (await _send(alice, one, "secret tea plans")).status_code == 200
    two = (await alice.post("/sessions")).json()["id"]
    team_factories.PROMPTS.clear()
    reply = await _send(alice, two, "hello")
    assert reply.status_code == 200 and reply.json()["turn"] == 1
    assert all("tea" not in prompt for _, prompt in team_factories.PROMPTS)
    assert await stored(tmp_path / "memory.db", two) == ids(1, 2)
    assert await stored(tmp_path / "memory.db", one) == ids(1, 2)
    for call in (_send(bob, one, "what were the plans?"),
                 bob.get(f"/sessions/{one}/transcript"),
                 bob.post(f"/sessions/{one}/resume", json=APPROVED)):
        assert (await call).status_code == 404
    assert await stored(tmp_path / "memory.db", one) == ids(1, 2)
    assert await stored(tmp_path / "memory.db", one, principal="bob") == []


async def test_a_members_pause_is_resumed_in_another_app_under_the_session_identity(
        make_client: Make, tmp_path: Path) -> None:
    """The writer's check-in pauses turn 2 (its claim held, its memory not yet written); a
    second app sharing the session file resumes it: the refund runs once, the writer's turn
    is written under the session's identity, every claim is settled, and turn 3 recalls all."""
    a, b = await make_client(), await make_client()
    session = (await a.post("/sessions")).json()["id"]
    assert (await _send(a, session, "tea")).status_code == 200
    paused = await _send(a, session, "refund my order")
    assert paused.status_code == 202, paused.text
    assert paused.json()["pause"]["tool"] == "refund" and team_factories.REFUNDS == []
    assert await stored(tmp_path / "memory.db", session) == ids(1, 2, 3)  # planner's turn
    done = await b.post(f"/sessions/{session}/resume", json=APPROVED)
    assert done.status_code == 200, done.text
    assert (done.json()["turn"], done.json()["answer"]) == (2, "done: refunded A-7")
    assert team_factories.REFUNDS == ["A-7"]
    assert await stored(tmp_path / "memory.db", session) == ids(1, 2, 3, 4)
    assert held_claims(tmp_path / "memory.db") == 0
    later = await _send(b, session, "thanks")
    assert later.status_code == 200 and later.json()["turn"] == 3
    assert await stored(tmp_path / "memory.db", session) == ids(1, 2, 3, 4, 5, 6)
    assert "refund my order" in prompts("planner")[-1]
    assert "done: refunded A-7" in prompts("writer")[-1]


async def test_a_streamed_turn_remembers_too_and_a_foreign_checkpoint_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``send_stream`` runs the team under the session's identity as ``send`` does; a paused
    checkpoint whose members ran under another identity is refused on resume, by name."""
    monkeypatch.setenv("TEAM_MEMORY_DB", str(tmp_path / "memory.db"))
    monkeypatch.delenv("TEAM_RUNS_DB", raising=False)
    team_factories.REFUNDS.clear()
    standing = standing_agent(team_factories.make_memory_team,
                              sessions=sqlite_sessions(tmp_path / "sessions.db"))
    try:
        assert standing.check() == "team"
        session = await standing.start(principal="carol")
        async with standing.send_stream(session.id, "tea", principal="carol") as events:
            async for _ in events:
                pass
        assert events.reply.answer == "post from plan: tea"
        assert await stored(tmp_path / "memory.db", session.id, "carol") == ids(1, 2)

        team = served(team_factories.make_memory_team(), "test")
        assert isinstance(team, ServedComposition) and remembers(team)
        paused = await team.run("refund it", identity=MemoryIdentity("other", principal="x"))
        assert paused.paused
        with pytest.raises(ConfigurationError, match="another identity, not the session's"):
            await team.resume(paused.checkpoint, APPROVED["answer"],
                              identity=MemoryIdentity(session.id, principal="carol"))
        assert team_factories.REFUNDS == []
    finally:
        await standing.close()
        team_factories.close_memory()
