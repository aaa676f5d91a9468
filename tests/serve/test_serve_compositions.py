"""A composition served like an agent (``serve_app`` in process, httpx over ASGI): turns,
transcript, SSE, a member's pause resumed, the run store; and bad targets refused at startup
(``serve_app`` raises, ``agentfootprint serve`` says one line and exits 2).

The team is ``team_factories.make_team`` (planner → writer ``Sequence``, the mock provider).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

import team_factories

from agentfootprint.cli import main
from agentfootprint.errors import ConfigurationError
from agentfootprint.runs import RunStore
from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions, standing_agent

KEY = "alice-key-0123456789"
Make = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def make_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                      ) -> AsyncIterator[Make]:
    """``await make_client(target)``: a client of a fresh app; members record to runs.db."""
    monkeypatch.setenv("TEAM_RUNS_DB", str(tmp_path / "runs.db"))
    opened: list[tuple[httpx.AsyncClient, Any]] = []

    async def make(target: Any = "team_factories:make_team") -> httpx.AsyncClient:
        app = serve_app(target, sessions=sqlite_sessions(tmp_path / f"s{len(opened)}.db"),
                        auth=api_key_auth({KEY: "alice"}))
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://testserver",
                                 headers={"Authorization": f"Bearer {KEY}"}, timeout=20)
        opened.append((http, app))
        return http

    yield make
    for http, app in opened:
        await http.aclose()
        await app.state.standing.close()
    team_factories.close_stores()


async def _send(client: httpx.AsyncClient, session: str, message: str) -> httpx.Response:
    return await client.post(f"/sessions/{session}/messages", json={"message": message})


async def test_a_composition_is_served_turn_after_turn_with_its_transcript(
        make_client: Make, tmp_path: Path) -> None:
    """Two turns of the planner → writer team: numbered 1 and 2 by the session, each the
    team's answer to that turn's message, the transcript holds both, and each run is the
    whole composition's one recording in the members' run store, named by the session."""
    client = await make_client()
    started = await client.post("/sessions")
    assert started.status_code == 201 and started.json()["agent"] == "team"
    session = started.json()["id"]
    first = await _send(client, session, "a post about tea")
    second = await _send(client, session, "now about coffee")
    assert first.status_code == 200 and second.status_code == 200, second.text
    assert [first.json()["turn"], second.json()["turn"]] == [1, 2]
    assert first.json()["answer"] == "post from plan: a post about tea"
    assert second.json()["answer"] == "post from plan: now about coffee"
    entries = (await client.get(f"/sessions/{session}/transcript")).json()["entries"]
    assert [(e["turn"], e["role"], e["content"]) for e in entries] == [
        (1, "user", "a post about tea"), (1, "assistant", "post from plan: a post about tea"),
        (2, "user", "now about coffee"), (2, "assistant", "post from plan: now about coffee")]
    run_ids = [first.json()["run_id"], second.json()["run_id"]]
    assert [r.split(".")[:2] for r in run_ids] == [[session, "1"], [session, "2"]]
    team_factories.close_stores()  # every write landed
    with RunStore(tmp_path / "runs.db") as store:
        listed = {s.run_id: s for s in store.list(limit=10)}
        assert set(listed) == set(run_ids)
        assert all(listed[r].status == "done" for r in run_ids)
        kept = store.load(run_ids[1])
        assert kept.output == "post from plan: now about coffee"
        stages = {r.runtime_stage_id for r in kept.commit_log().records}
        assert any(s.startswith("plan/") for s in stages)  # one recording spans the members
        assert any(s.startswith("write/") for s in stages)


async def test_a_members_pause_pauses_the_turn_and_resume_continues_the_composition(
        make_client: Make, tmp_path: Path) -> None:
    """The writer asks consent to refund: 202 with its check-in, nothing refunded, a message
    refused (409) until the resume, which runs the refund once and answers as the team; the
    run store holds the run paused, then done."""
    team_factories.REFUNDS.clear()
    client = await make_client()
    session = (await client.post("/sessions")).json()["id"]
    paused = await _send(client, session, "refund my order")
    assert paused.status_code == 202, paused.text
    body = paused.json()
    assert body["status"] == "paused" and body["answer"] is None and body["turn"] == 1
    assert body["pause"]["kind"] == "check_in" and body["pause"]["tool"] == "refund"
    assert team_factories.REFUNDS == []
    assert (await _send(client, session, "hello?")).status_code == 409
    team_factories.close_stores()
    with RunStore(tmp_path / "runs.db") as store:
        assert store.list()[0].status == "paused"
    bad = await client.post(f"/sessions/{session}/resume", json={"answer": "yes"})
    assert bad.status_code == 422 and "check_in_approved" in bad.json()["detail"]
    done = await client.post(f"/sessions/{session}/resume",
                             json={"answer": {"check_in": "approved", "by": "x"}})
    assert done.status_code == 200, done.text
    assert done.json() | {"usage": None} == done.json() | {
        "status": "done", "turn": 1, "answer": "done: refunded A-7", "usage": None,
        "run_id": body["run_id"]}
    assert team_factories.REFUNDS == ["A-7"]
    again = await client.post(f"/sessions/{session}/resume",
                              json={"answer": {"check_in": "approved", "by": "x"}})
    assert again.status_code == 409
    entries = (await client.get(f"/sessions/{session}/transcript")).json()["entries"]
    assert [(e["turn"], e["role"]) for e in entries] == [(1, "user"), (1, "assistant")]
    after = await _send(client, session, "thanks")
    assert after.json()["turn"] == 2 and after.json()["answer"] == "post from plan: thanks"
    team_factories.close_stores()
    with RunStore(tmp_path / "runs.db") as store:
        resumed = {s.run_id: s.status for s in store.list()}
        assert resumed[body["run_id"]] == "done"


async def test_a_composition_streams_every_members_events_then_the_reply(
        make_client: Make) -> None:
    """SSE: the members' events in order (the planner's LLM call before the writer's), the
    run's end, then the turn's reply."""
    client = await make_client()
    session = (await client.post("/sessions")).json()["id"]
    answer = await client.post(f"/sessions/{session}/messages", json={"message": "hi"},
                               headers={"Accept": "text/event-stream"})
    assert answer.status_code == 200
    frames = [json.loads(line.removeprefix("data: ")) for line in answer.text.splitlines()
              if line.startswith("data: ")]
    kinds = [f["type"] for f in frames]
    assert kinds[-2:] == ["result", "reply"], kinds
    assert frames[-1]["turn"] == 1 and frames[-1]["answer"] == "post from plan: hi"
    steps = [f.get("step", "") for f in frames]
    assert any(s.startswith("plan/") for s in steps)
    assert any(s.startswith("write/") for s in steps)
    assert max(i for i, s in enumerate(steps) if s.startswith("plan/")) < min(
        i for i, s in enumerate(steps) if s.startswith("write/"))


async def test_a_pattern_and_a_composition_instance_and_an_async_factory_serve(
        make_client: Make) -> None:
    """A pattern (reflection), a team instance and an async factory are served too."""
    for target in ("team_factories:make_critic", team_factories.make_team(),
                   team_factories.make_team_async):
        client = await make_client(target)
        session = (await client.post("/sessions")).json()["id"]
        answer = await _send(client, session, "tea")
        assert answer.status_code == 200, answer.text
        assert answer.json()["answer"] in ("plan: tea", "post from plan: tea")


@pytest.mark.parametrize(("target", "said"), [
    ("team_factories:bad_raises", "RuntimeError: no model configured"),
    ("team_factories:bad_type", "gave str, not an Agent or a composition"),
    ("team_factories:not_callable", "is not callable"),
    ("no_such_module:make", "cannot import 'no_such_module'"),
])
def test_a_bad_target_fails_at_startup_not_per_request(
        target: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``serve_app`` raises a ConfigurationError naming the problem (before any request), and
    ``agentfootprint serve`` prints that one line and exits 2, serving nothing."""
    with pytest.raises(ConfigurationError, match=said.replace("(", r"\(")):
        serve_app(target, sessions=sqlite_sessions(tmp_path / "s.db"),
                  allow_unauthenticated=True)
    monkeypatch.setenv("AGENTFOOTPRINT_API_KEYS", f"{KEY}=alice")
    assert main(["serve", target, "--sessions", f"sqlite:{tmp_path / 's2.db'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentfootprint serve: ") and said in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_bad_factory_function_is_named_and_the_checked_instance_is_not_kept(
        tmp_path: Path) -> None:
    """A function target is named in the error; a good factory is built once at startup and
    then once per turn (the startup instance is dropped, not reused)."""
    with pytest.raises(ConfigurationError, match=r"bad_raises\(\) failed to build"):
        serve_app(team_factories.bad_raises, sessions=sqlite_sessions(tmp_path / "s.db"),
                  allow_unauthenticated=True)
    built: list[object] = []

    def counting() -> Any:
        built.append(team := team_factories.make_team())
        return team

    standing = standing_agent(counting, sessions=sqlite_sessions(tmp_path / "t.db"))
    assert standing.check() == "team" and len(built) == 1
    session = standing.start_sync(principal="p")
    reply = standing.send_sync(session.id, "tea", principal="p")
    assert reply.answer == "post from plan: tea" and len(built) == 2
    standing.close_sync()


async def test_a_members_pause_is_resumed_by_another_server_sharing_the_sessions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two apps (two factories' worth of fresh teams) on one session file: the pause made on
    A is resumed on B, whose team never saw the run before: the checkpoint is the session's."""
    monkeypatch.delenv("TEAM_RUNS_DB", raising=False)
    team_factories.REFUNDS.clear()
    clients = []
    for _ in range(2):
        app = serve_app("team_factories:make_team", sessions=sqlite_sessions(tmp_path / "s.db"),
                        auth=api_key_auth({KEY: "alice"}))
        clients.append((httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver",
            headers={"Authorization": f"Bearer {KEY}"}, timeout=20), app))
    (a, _), (b, _) = clients
    try:
        session = (await a.post("/sessions")).json()["id"]
        assert (await _send(a, session, "refund it")).status_code == 202
        done = await b.post(f"/sessions/{session}/resume",
                            json={"answer": {"check_in": "approved", "by": "x"}})
        assert done.status_code == 200 and done.json()["answer"] == "done: refunded A-7"
        assert team_factories.REFUNDS == ["A-7"]
        later = await _send(a, session, "and now?")
        assert later.json()["turn"] == 2
    finally:
        for http, app in clients:
            await http.aclose()
            await app.state.standing.close()


def test_a_composition_over_the_websocket_and_the_mcp_mount(tmp_path: Path) -> None:
    """The WebSocket door runs the team's turns (a pause answered with {"resume": ...}); the
    MCP mount serves the team under its name."""
    from starlette.testclient import TestClient

    app = serve_app("team_factories:make_team", sessions=sqlite_sessions(tmp_path / "s.db"),
                    auth=api_key_auth({KEY: "alice"}), mcp=True)
    auth = {"Authorization": f"Bearer {KEY}"}
    with TestClient(app) as client:
        session = client.post("/sessions", headers=auth).json()["id"]
        with client.websocket_connect(f"/sessions/{session}/ws", headers=auth) as ws:
            ws.send_text(json.dumps({"message": "tea"}))
            while (frame := json.loads(ws.receive_text()))["type"] != "reply":
                pass
            assert frame["turn"] == 1 and frame["answer"] == "post from plan: tea"
            ws.send_text(json.dumps({"message": "refund"}))
            while (frame := json.loads(ws.receive_text()))["type"] != "reply":
                pass
            assert frame["status"] == "paused" and frame["pause"]["tool"] == "refund"
            ws.send_text(json.dumps({"resume": {"check_in": "declined", "by": "x",
                                                "note": "no"}}))
            frame = json.loads(ws.receive_text())
            assert frame["type"] == "reply" and frame["status"] == "done"
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}
        answered = client.post("/mcp/", json=initialize, headers={
            **auth, "Accept": "application/json, text/event-stream"})
        assert answered.status_code == 200 and '"serverInfo":{"name":"team"' in answered.text
