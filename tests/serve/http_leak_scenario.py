"""The leak test's conversation, driven over ``serve_app``'s HTTP, SSE and WebSocket doors.

``run_scenario(sessions, tmp)`` serves an agent with the leak test's redaction
(``POLICY_KINDS``, sealed with ``SEAL_KEY``) on the given session store and plants the
secret of ``tests/test_leaks.py`` everywhere a caller can: in a user message (JSON, SSE and
WebSocket turns), as a tool argument (the check-in pause's payload carries it), in a tool
result and a tool error (both quote it), in the check-in verdict's note, in a refused body
(an unknown field, bad JSON), in a message sent to a paused session, and in a foreign
principal's request. It returns every byte a caller or operator could see — response bodies
and headers, SSE streams (also replayed with ``Last-Event-ID``), WebSocket frames, and every
log record (root logger, DEBUG, with tracebacks) — by sink name, and what the tools received
(the check that the secret really went through). The callers add the session store's own
bytes (SQLite file, Redis keys and values, PostgreSQL rows) and check every sink with the
leak test's ``assert_clean``.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from starlette.testclient import TestClient

from agentfootprint import Agent, Tracing, tool
from agentfootprint.memory import SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.runs import RedactionPolicy
from agentfootprint.serve import api_key_auth, serve_app
from test_leaks import POLICY_KINDS, SEAL_KEY, SECRET

ALICE, MALLORY = "alice-key-0123456789", "mallory-key-0123456789"


@dataclass
class Seen:
    """What the scenario's callers and operators could see, by sink."""

    sinks: dict[str, bytes] = field(default_factory=dict)
    tool_saw: list[str] = field(default_factory=list)
    statuses: list[tuple[str, int]] = field(default_factory=list)

    def add(self, name: str, blob: bytes | str) -> None:
        data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
        self.sinks[name] = self.sinks.get(name, b"") + data + b"\n"

    def response(self, what: str, answer: Any) -> Any:
        self.statuses.append((what, answer.status_code))
        self.add("HTTP response bodies", answer.content)
        self.add("HTTP response headers", json.dumps(list(answer.headers.multi_items())))
        return answer


class _Logs(logging.Handler):
    def __init__(self, seen: Seen) -> None:
        super().__init__(logging.DEBUG)
        self.seen = seen
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.add("server log", self.format(record) + json.dumps(record.args, default=repr))


def _agent_factory(seen: Seen, memory: SQLiteStore) -> Any:
    @tool(check_in=True)
    def save_key(key: str) -> str:
        """Save an API key in the vault."""
        seen.tool_saw.append(key)
        raise RuntimeError(f"the vault rejected {key}: quota exceeded")

    @tool
    def check_key(key: str) -> str:
        """Check whether an API key works."""
        seen.tool_saw.append(key)
        return f"the key {key} works"

    def respond(request: Any) -> Any:
        last = request.messages[-1]
        text = str(last["content"])
        if last["role"] == "user" and "save my API key" in text:
            return {"tool_calls": [{"name": "save_key", "args": {"key": SECRET}}]}
        if last["role"] == "user" and "Check my key" in text:
            return {"tool_calls": [{"name": "check_key", "args": {"key": SECRET}}]}
        return "Done." if last["role"] == "tool" else "I keep your key but will not repeat it."

    def make() -> Agent:
        return Agent(provider=mock(respond=respond), model="mock", name="vault",
                     tools=[save_key, check_key],
                     memory=[define_memory(id="chat", type="episodic", strategy="window",
                                           keep_turns=10, store=memory)],
                     tracing=Tracing(redaction=RedactionPolicy(kinds=POLICY_KINDS,
                                                               seal_key=SEAL_KEY)))
    return make


def _ws_turn(ws: Any, seen: Seen, sent: str) -> dict[str, Any]:
    ws.send_text(sent)
    while True:
        text = ws.receive_text()
        seen.add("WebSocket frames", text)
        frame: dict[str, Any] = json.loads(text)
        if frame["type"] in ("reply", "error"):
            return frame


def run_scenario(sessions: Any, tmp: Path) -> Seen:
    """The conversation over every door; see the module."""
    seen = Seen()
    memory = SQLiteStore(tmp / "memory.db")
    handler = _Logs(seen)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        app = serve_app(_agent_factory(seen, memory), sessions=sessions,
                        auth=api_key_auth({ALICE: "alice", MALLORY: "mallory"}))
        with TestClient(app, headers={"Authorization": f"Bearer {ALICE}"}) as client:
            _drive(client, seen)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        memory.close_sync()
    return seen


def _drive(client: TestClient, seen: Seen) -> None:
    session = seen.response("start", client.post("/sessions")).json()["id"]
    paused = seen.response("send, pauses", client.post(
        f"/sessions/{session}/messages",
        json={"message": f"Please save my API key {SECRET} in the vault."}))
    assert paused.status_code == 202, paused.text
    seen.response("send while paused", client.post(
        f"/sessions/{session}/messages", json={"message": f"my key is {SECRET}"}))
    seen.response("listing while paused", client.get("/sessions"))
    seen.response("transcript while paused", client.get(f"/sessions/{session}/transcript"))
    seen.response("foreign principal", client.post(
        f"/sessions/{session}/resume", headers={"Authorization": f"Bearer {MALLORY}"},
        json={"answer": {"check_in": "approved", "note": SECRET}}))
    done = seen.response("resume", client.post(f"/sessions/{session}/resume", json={
        "answer": {"check_in": "approved", "note": f"fine, keep {SECRET}"}}))
    assert done.status_code == 200, done.text
    for body in (json.dumps({"message": "hi", "key": SECRET}), '{"message": "' + SECRET,
                 json.dumps({"message": 7, "note": SECRET})):
        seen.response("refused body", client.post(f"/sessions/{session}/messages",
                                                  content=body.encode()))
    stream = {"Accept": "text/event-stream"}
    streamed = seen.response("SSE turn", client.post(
        f"/sessions/{session}/messages", headers=stream,
        json={"message": f"Check my key works: {SECRET}"}))
    seen.add("SSE stream", streamed.content)
    ids = [line[4:] for line in streamed.text.splitlines() if line.startswith("id: ")]
    assert len(ids) >= 3 and '"type": "reply"' in streamed.text, streamed.text[-500:]
    replayed = seen.response("SSE replay", client.post(
        f"/sessions/{session}/messages", headers={**stream, "Last-Event-ID": ids[0]}))
    seen.add("SSE stream", replayed.content)
    with client.websocket_connect(f"/sessions/{session}/ws") as ws:
        frames = [_ws_turn(ws, seen, json.dumps({"message": f"Which key? It was {SECRET}"})),
                  _ws_turn(ws, seen, json.dumps({"message": f"save my API key {SECRET}"})),
                  _ws_turn(ws, seen, json.dumps({"message": f"and again {SECRET}"})),
                  _ws_turn(ws, seen, json.dumps({"resume": {"check_in": "declined",
                                                            "note": f"no: {SECRET}"}})),
                  _ws_turn(ws, seen, '{"message": ' + json.dumps(SECRET) + ", "),
                  ]
    assert [f["type"] for f in frames] == ["reply", "reply", "error", "reply", "error"], frames
    assert frames[1]["status"] == "paused" and frames[3]["status"] == "done", frames
    seen.response("transcript", client.get(f"/sessions/{session}/transcript"))
    seen.response("listing", client.get("/sessions"))
