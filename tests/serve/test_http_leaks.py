"""The leak test over HTTP: the secret planted through every door of ``serve_app`` reaches no
response, header, SSE event, WebSocket frame, log record, nor the SQLite session file.

The scenario is ``http_leak_scenario.run_scenario``; Redis and PostgreSQL session stores run
it in ``tests/e2e/test_http_leaks_servers.py``. In process (Starlette's TestClient): the sinks
are the app's own bytes and log records; uvicorn adds only its access log (method, path,
status), which never carries a body.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("cryptography")

from http_leak_scenario import run_scenario

from agentfootprint.flow._redact import REDACTED
from agentfootprint.serve import sqlite_sessions
from test_leaks import SECRET, assert_clean


def check_scenario_went_through(seen: object) -> None:
    """Not vacuous: the tools received the real secret, each door answered as expected, and
    what a caller reads back shows the redaction mark where the secret was."""
    assert seen.tool_saw == [SECRET, SECRET], seen.tool_saw  # type: ignore[attr-defined]
    statuses = dict(seen.statuses)  # type: ignore[attr-defined]
    assert statuses["send, pauses"] == 202 and statuses["resume"] == 200
    assert statuses["send while paused"] == 409 and statuses["foreign principal"] == 404
    assert statuses["refused body"] == 422 and statuses["SSE turn"] == 200
    bodies = seen.sinks["HTTP response bodies"]  # type: ignore[attr-defined]
    assert REDACTED.encode() in bodies
    assert b'"kind":"check_in"' in bodies.replace(b" ", b"")


def test_no_http_response_frame_log_or_session_file_holds_the_secret(tmp_path: Path) -> None:
    seen = run_scenario(sqlite_sessions(tmp_path / "sessions.db"), tmp_path)
    check_scenario_went_through(seen)
    files = sorted(tmp_path.glob("sessions.db*"))
    seen.add("session store file", b"".join(p.read_bytes() for p in files))
    assert len(seen.sinks["session store file"]) > 4096
    assert {"HTTP response bodies", "HTTP response headers", "SSE stream", "WebSocket frames",
            "server log"} <= set(seen.sinks)
    for name, blob in seen.sinks.items():
        assert_clean(name, blob)


def test_the_check_is_not_blind() -> None:
    """The same scanner fails on a frame that would carry the secret."""
    with pytest.raises(AssertionError, match="leaked"):
        assert_clean("a frame", json.dumps({"type": "tool_result", "result": SECRET}))
