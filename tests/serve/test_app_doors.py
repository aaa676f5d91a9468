"""The other doors of ``serve_app`` in process (Starlette's TestClient, which runs the
lifespan): the WebSocket's refusals and errors, the MCP mount behind the same auth, and the
``agentfootprint serve`` command's user errors (one line, exit 2, nothing served)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient, WebSocketDenialResponse

from agentfootprint.cli import main
from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions

TARGET = "serve_factories:make_agent"
ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
AUTH = {"Authorization": f"Bearer {ALICE}"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = serve_app(TARGET, sessions=sqlite_sessions(tmp_path / "s.db"),
                    auth=api_key_auth({ALICE: "alice", BOB: "bob"}), max_body_bytes=2_000)
    with TestClient(app) as test_client:
        yield test_client


def _frames(ws: Any, sent: str) -> list[dict[str, Any]]:
    ws.send_text(sent)
    frames = []
    while not frames or frames[-1]["type"] not in ("reply", "error"):
        frames.append(json.loads(ws.receive_text()))
    return frames


def test_the_websocket_refuses_before_accepting_and_answers_bad_frames(
        client: TestClient) -> None:
    """No key: denied with 401; Bob on Alice's session, or an unknown one: 404 (never 403).
    On an accepted socket, a bad frame, a resume of a session not paused and an oversized
    frame are error frames with their status, and the socket goes on to a real turn."""
    session = client.post("/sessions", headers=AUTH).json()["id"]
    for headers, where, status in (({}, session, 401),
                                   ({"Authorization": f"Bearer {BOB}"}, session, 404),
                                   (AUTH, "s-unknown", 404)):
        with pytest.raises(WebSocketDenialResponse) as denied, \
                client.websocket_connect(f"/sessions/{where}/ws", headers=headers):
            pass
        assert denied.value.status_code == status
        assert denied.value.json()["detail"]
    with client.websocket_connect(f"/sessions/{session}/ws", headers=AUTH) as ws:
        errors = [_frames(ws, text)[0] for text in (
            "not json", json.dumps({"message": 3}), json.dumps({"resume": "yes"}),
            json.dumps({"message": "x" * 3_000}))]
        turn = _frames(ws, json.dumps({"message": "hello"}))
    assert [(e["type"], e["status"]) for e in errors] == [
        ("error", 422), ("error", 422), ("error", 409), ("error", 413)]
    assert turn[-1]["type"] == "reply" and turn[-1]["turn"] == 1
    assert turn[-1]["answer"] == "turn 1: you said 'hello'"


def test_a_websocket_reader_that_leaves_does_not_stop_its_turn(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A binary frame of JSON is read like text; a reader that closes the socket while its
    slow turn runs leaves the turn running: it finishes and is stored."""
    monkeypatch.setenv("SERVE_TEST_SLOW", "0.3")
    session = client.post("/sessions", headers=AUTH).json()["id"]
    with client.websocket_connect(f"/sessions/{session}/ws", headers=AUTH) as ws:
        ws.send_bytes(json.dumps({"message": "hi"}).encode())
        while json.loads(ws.receive_text())["type"] != "reply":
            pass
        ws.send_bytes(b"\xff")
        assert json.loads(ws.receive_text())["status"] == 422
        ws.send_text(json.dumps({"message": "slow please"}))
        assert json.loads(ws.receive_text())["type"] == "tool_call"
    deadline = time.monotonic() + 10
    while True:
        entries = client.get(f"/sessions/{session}/transcript", headers=AUTH).json()["entries"]
        if len(entries) == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [(e["turn"], e["content"]) for e in entries[2:]] == [
        (2, "slow please"), (2, "Done: order A-7: delivered.")]


def test_the_mcp_mount_is_behind_the_same_auth(tmp_path: Path) -> None:
    """mcp=True mounts the agent's MCP server at /mcp: without a key 401, with one the MCP
    initialize handshake is answered by the agent's server."""
    app = serve_app(TARGET, sessions=sqlite_sessions(tmp_path / "s.db"),
                    auth=api_key_auth({ALICE: "alice"}), mcp=True)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    with TestClient(app) as test_client:
        refused = test_client.post("/mcp/", json=initialize, headers=accept)
        answered = test_client.post("/mcp/", json=initialize, headers={**accept, **AUTH})
    assert refused.status_code == 401
    assert answered.status_code == 200
    assert '"serverInfo":{"name":"support"' in answered.text


@pytest.mark.parametrize(("args", "said"), [
    (["nosuch_module:make"], "cannot import 'nosuch_module'"),
    (["serve_factories:not_an_agent"], "is not callable"),
    (["serve_factories"], "must be 'module:function'"),
    ([TARGET], "no API keys are configured"),
    ([TARGET, "--insecure-local", "--host", "0.0.0.0"], "binds 127.0.0.1 only"),
    ([TARGET, "--insecure-local", "--sessions", "ftp://x"], "--sessions must be"),
    ([TARGET, "--insecure-local", "--port", "70000"], "--port 70000"),
    ([TARGET, "--insecure-local", "--workers", "0"], "--workers 0"),
])
def test_a_user_error_is_one_line_and_exit_2(args: list[str], said: str,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing is served: one line on stderr naming the problem, status 2, no traceback."""
    monkeypatch.delenv("AGENTFOOTPRINT_API_KEYS", raising=False)
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentfootprint serve: ") and said in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(("spec", "shown"), [
    ("redis://127.0.0.1:1/0", "redis_sessions('redis://127.0.0.1:1/0'"),
    ("postgresql://u:pw@127.0.0.1:1/db", "postgres_sessions('db@127.0.0.1:1'"),
    ("sqlite:{tmp}/s.db", "sqlite_sessions("),
])
def test_sessions_are_named_like_the_cli_names_them(spec: str, shown: str,
                                                    tmp_path: Path) -> None:
    """``--sessions`` (and ``serve_app(sessions="...")``) picks the store from the spelling;
    nothing connects until a request needs the store, and no password is shown."""
    pytest.importorskip("redis")
    pytest.importorskip("psycopg")
    app = serve_app(TARGET, sessions=spec.format(tmp=tmp_path),
                    auth=api_key_auth({ALICE: "alice"}))
    assert repr(app.state.standing.store).startswith("<" + shown)
    assert "pw" not in repr(app.state.standing.store)
