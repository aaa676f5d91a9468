"""``agentfootprint serve`` as a user runs it: real uvicorn processes on free 127.0.0.1 ports,
sharing one SQLite session store, driven with httpx and a WebSocket client.

Two processes (A and B) serve ``tests/serve/serve_factories.py:make_agent`` (the mock provider;
it answers with the turn it believes it is in, so a reply proves the history came along). A
conversation moves between them turn by turn; a check-in pause made on A is resumed on B; a
foreign principal is told 404; SSE events arrive in order and ``Last-Event-ID`` resumes; the
WebSocket door holds a conversation; SIGTERM lets the turn under way finish and be stored.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
websockets_sync = pytest.importorskip("websockets.sync.client")

FACTORIES = Path(__file__).resolve().parents[1] / "serve"
TARGET = "serve_factories:make_agent"
KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """One ``agentfootprint serve`` process on a free port (``wait`` for it to answer);
    stopped (and reaped) by ``stop``."""

    def __init__(self, store: Path, workdir: Path, **env: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(FACTORIES), os.environ.get("PYTHONPATH", "")]),
            "AGENTFOOTPRINT_API_KEYS": ",".join(f"{k}={p}" for p, k in KEYS.items()), **env}
        self.log = workdir / f"server-{self.port}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "import sys; from agentfootprint.cli import main; "
                 "sys.exit(main())", "serve", TARGET, "--port", str(self.port),
                 "--sessions", f"sqlite:{store}", "--request-timeout", "20"],
                cwd=workdir, env=environ, stdout=out, stderr=subprocess.STDOUT)

    def wait(self) -> Server:
        """Wait until it answers /healthz (stopping it when it never does)."""
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server never answered: {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _client(server: Server, who: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=20,
                        headers={"Authorization": f"Bearer {KEYS[who]}"})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def processes(workdir: Path) -> Iterator[tuple[Server, Server, Server]]:
    """Processes A and B, and C whose slow tool takes 1.5 s: one session store, all three
    started at once."""
    store = workdir / "sessions.db"
    started = (Server(store, workdir), Server(store, workdir),
               Server(store, workdir, SERVE_TEST_SLOW="1.5",
                      SERVE_TEST_MARKER=str(workdir / "slow-started")))
    try:
        for server in started:
            server.wait()
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def servers(processes: tuple[Server, Server, Server]) -> tuple[Server, Server]:
    return processes[0], processes[1]


def _start(server: Server, who: str = "alice") -> str:
    with _client(server, who) as client:
        reply = client.post("/sessions")
    assert reply.status_code == 201, reply.text
    session: dict[str, Any] = reply.json()
    assert session["owner"] == who and session["turns"] == 0
    return str(session["id"])


def test_three_turns_across_two_processes_keep_their_turn_numbers(
        servers: tuple[Server, Server]) -> None:
    """Turn 1 on A, turn 2 on B, turn 3 on A: numbered 1, 2, 3, each answer built on the
    history the other process left, and the transcript (read on B) holds all three."""
    a, b = servers
    session = _start(a)
    turns = []
    for server, message in ((a, "one"), (b, "two"), (a, "three")):
        with _client(server) as client:
            reply = client.post(f"/sessions/{session}/messages", json={"message": message})
        assert reply.status_code == 200, reply.text
        turns.append(reply.json())
    assert [t["turn"] for t in turns] == [1, 2, 3]
    assert [t["answer"] for t in turns] == [
        "turn 1: you said 'one'", "turn 2: you said 'two'", "turn 3: you said 'three'"]
    assert len({t["run_id"] for t in turns}) == 3
    with _client(b) as client:
        transcript = client.get(f"/sessions/{session}/transcript").json()
        listed = client.get("/sessions").json()["sessions"]
    assert [(e["turn"], e["role"], e["content"]) for e in transcript["entries"]] == [
        (1, "user", "one"), (1, "assistant", "turn 1: you said 'one'"),
        (2, "user", "two"), (2, "assistant", "turn 2: you said 'two'"),
        (3, "user", "three"), (3, "assistant", "turn 3: you said 'three'")]
    assert {s["id"]: s["turns"] for s in listed}[session] == 3


def test_a_check_in_pause_made_on_one_process_is_resumed_on_the_other(
        servers: tuple[Server, Server]) -> None:
    """A's reply is 202 with the pause and its evidence; B resumes it (200, the tool ran);
    resuming again is 409, and the session takes its next message on A."""
    a, b = servers
    session = _start(a)
    with _client(a) as client:
        paused = client.post(f"/sessions/{session}/messages",
                             json={"message": "a refund for A-9, please"})
        assert paused.status_code == 202, paused.text
        busy = client.post(f"/sessions/{session}/messages", json={"message": "hello?"})
    body = paused.json()
    assert body["status"] == "paused" and body["answer"] is None
    assert body["pause"]["kind"] == "check_in" and body["pause"]["tool"] == "issue_refund"
    assert body["pause"]["evidence"]["will_do"]["args"] == {"order_id": "A-9"}
    assert busy.status_code == 409 and "resume" in busy.json()["detail"]
    with _client(b) as client:
        done = client.post(f"/sessions/{session}/resume",
                           json={"answer": {"check_in": "approved", "by": "alice"}})
        again = client.post(f"/sessions/{session}/resume",
                            json={"answer": {"check_in": "approved", "by": "alice"}})
    assert done.status_code == 200, done.text
    assert done.json()["answer"] == "Done: refund issued for A-9."
    assert done.json()["turn"] == body["turn"] == 1
    assert again.status_code == 409
    with _client(a) as client:
        after = client.post(f"/sessions/{session}/messages", json={"message": "thanks"})
    assert after.status_code == 200 and after.json()["turn"] == 2


def test_a_foreign_principal_is_told_404_on_every_route(servers: tuple[Server, Server]) -> None:
    """Bob asking for Alice's session gets the same 404 as for a session that never existed
    (never 403), on both processes, over HTTP and the WebSocket; nothing is run for him."""
    a, b = servers
    session = _start(a, "alice")
    for server in (a, b):
        with _client(server, "bob") as client:
            answers = [
                client.get(f"/sessions/{session}/transcript"),
                client.post(f"/sessions/{session}/messages", json={"message": "hi"}),
                client.post(f"/sessions/{session}/resume", json={"answer": "yes"}),
                client.post(f"/sessions/{session}/messages", json={"message": "hi"},
                            headers={"Accept": "text/event-stream"}),
            ]
            missing = client.get("/sessions/s0000000000000000000000000000000/transcript")
            assert all(session not in s["id"] for s in client.get("/sessions").json()["sessions"])
        assert [r.status_code for r in answers] == [404, 404, 404, 404]
        assert missing.status_code == 404
        assert answers[0].json()["detail"].replace(session, "X") == (
            missing.json()["detail"].replace("s0000000000000000000000000000000", "X"))
    with pytest.raises(Exception) as refused:
        websockets_sync.connect(f"ws://127.0.0.1:{a.port}/sessions/{session}/ws",
                                additional_headers={"Authorization": f"Bearer {KEYS['bob']}"})
    assert "404" in str(refused.value)
    with httpx.Client(base_url=a.url) as anonymous:
        assert anonymous.get(f"/sessions/{session}/transcript").status_code == 401
    with _client(b, "alice") as client:
        assert client.get(f"/sessions/{session}/transcript").json()["entries"] == []


def _sse(response: httpx.Response) -> Iterator[tuple[str, str, dict[str, Any]]]:
    frame: dict[str, str] = {}
    for line in response.iter_lines():
        if line:
            name, _, value = line.partition(": ")
            frame[name] = value
        elif frame:
            yield frame["id"], frame["event"], json.loads(frame["data"])
            frame = {}


def test_sse_events_arrive_in_order_and_last_event_id_resumes(
        servers: tuple[Server, Server]) -> None:
    """A streamed turn: ids count up, tokens then the result last (its turn, the answer the
    tokens spell); a reconnect with Last-Event-ID gets exactly the events after it, and no
    second turn is run; an id this process does not keep is 404."""
    a, _ = servers
    session = _start(a)
    stream = {"Accept": "text/event-stream"}
    with _client(a) as client:
        with client.stream("POST", f"/sessions/{session}/messages", headers=stream,
                           json={"message": "stream this"}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = list(_sse(response))
        assert [int(i.rsplit(".", 1)[1]) for i, _, _ in events] == list(
            range(1, len(events) + 1))
        names = [name for _, name, _ in events]
        assert set(names[:-2]) == {"text_delta"} and names[-2:] == ["result", "reply"]
        result, reply = events[-2][2], events[-1][2]
        assert result["turn"] == reply["turn"] == 1 and result["status"] == "done"
        assert "".join(d["text"] for _, n, d in events if n == "text_delta") == (
            result["content"]) == reply["answer"] == "turn 1: you said 'stream this'"
        assert reply["session_id"] == session and reply["run_id"] == result["run_id"]
        cut = 2
        with client.stream("POST", f"/sessions/{session}/messages", json={"message": "x"},
                           headers={**stream, "Last-Event-ID": events[cut - 1][0]}) as again:
            assert again.status_code == 200
            replayed = list(_sse(again))
        assert replayed == events[cut:]
        gone = client.post(f"/sessions/{session}/messages", json={"message": "x"},
                           headers={**stream, "Last-Event-ID": "0" * 32 + ".1"})
        assert gone.status_code == 404
        assert client.get(f"/sessions/{session}/transcript").json()["entries"][-1][
            "turn"] == 1


def test_a_websocket_conversation(servers: tuple[Server, Server]) -> None:
    """On B's WebSocket: two messages (their events, each ending with its result), a check-in
    pause answered over the same socket, and a bad frame answered with an error frame."""
    _, b = servers
    session = _start(b)
    url = f"ws://127.0.0.1:{b.port}/sessions/{session}/ws"
    auth = {"Authorization": f"Bearer {KEYS['alice']}"}

    def turn(socket_: Any, sent: dict[str, Any]) -> list[dict[str, Any]]:
        socket_.send(json.dumps(sent))
        frames = []
        while True:
            frames.append(json.loads(socket_.recv(timeout=20)))
            if frames[-1]["type"] in ("reply", "error"):
                return frames

    with websockets_sync.connect(url, additional_headers=auth) as ws:
        first = turn(ws, {"message": "hello"})
        second = turn(ws, {"message": "again"})
        paused = turn(ws, {"message": "refund please"})
        resumed = turn(ws, {"resume": {"check_in": "approved", "by": "alice"}})
        bad = turn(ws, {"mesage": "typo"})
    assert {f["type"] for f in first[:-2]} == {"text_delta"}
    assert (first[-2]["type"], first[-2]["turn"], first[-2]["content"]) == (
        "result", 1, "turn 1: you said 'hello'")
    assert (first[-1]["turn"], first[-1]["answer"]) == (1, "turn 1: you said 'hello'")
    assert (second[-1]["turn"], second[-1]["answer"]) == (2, "turn 2: you said 'again'")
    assert paused[-1]["status"] == "paused" and paused[-1]["pause"]["tool"] == "issue_refund"
    assert [f["type"] for f in paused] == ["tool_call", "result", "reply"]
    assert resumed == [{**resumed[0], "type": "reply", "status": "done", "turn": 3,
                        "answer": "Done: refund issued for A-9."}]
    assert bad[0]["type"] == "error" and bad[0]["status"] == 422
    with pytest.raises(Exception) as refused:
        websockets_sync.connect(url)
    assert "401" in str(refused.value)


def test_sigterm_lets_the_turn_under_way_finish_and_store_it(
        processes: tuple[Server, Server, Server], workdir: Path) -> None:
    """A third process (same store) gets SIGTERM while a slow tool runs: the caller still
    gets its 200 reply, the process then exits, and A reads the stored turn."""
    a, _, slow = processes
    marker = workdir / "slow-started"
    try:
        session = _start(slow)
        answered: list[httpx.Response] = []

        def send() -> None:
            with _client(slow) as client:
                answered.append(client.post(f"/sessions/{session}/messages",
                                            json={"message": "slow lookup please"}))

        sender = threading.Thread(target=send)
        sender.start()
        deadline = time.monotonic() + 15
        while not marker.exists():
            assert time.monotonic() < deadline, slow.log.read_text()
            time.sleep(0.02)
        slow.process.send_signal(signal.SIGTERM)
        sender.join(timeout=20)
        # uvicorn re-raises the signal once it has shut down: dead by SIGTERM, after the turn
        assert slow.process.wait(timeout=20) in (0, -signal.SIGTERM)
    finally:
        slow.stop()
    assert [r.status_code for r in answered] == [200], slow.log.read_text()
    assert answered[0].json()["answer"] == "Done: order A-7: delivered."
    with _client(a) as client:
        entries = client.get(f"/sessions/{session}/transcript").json()["entries"]
    assert [(e["turn"], e["role"]) for e in entries] == [(1, "user"), (1, "assistant")]
