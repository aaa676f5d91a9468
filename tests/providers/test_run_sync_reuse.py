"""``*_sync`` twice in one thread with a real HTTP client: the second call must still work.

An SDK client keeps its connection pool on the event loop of its first call; a ``run_sync``
that opened and closed a new loop each time would break the second ``agent.run_sync`` with
"Event loop is closed". Tested against a real loopback server speaking the OpenAI wire format.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent
from agentfootprint.providers import openai

REPLY = json.loads((Path(__file__).parent / "fixtures_openai" / "chat_text.json").read_text())


@pytest.fixture
def server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            body = REPLY.get("body", REPLY) if isinstance(REPLY, dict) else REPLY
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_agent_run_sync_twice_on_one_sdk_client(server: str) -> None:
    """Three sync runs share one provider (one SDK client, one pool) and all succeed."""
    provider = openai(model="local", api_key="x", base_url=server)
    agent = Agent(provider=provider, model="local")
    answers = [agent.run_sync(f"question {i}").content for i in range(3)]
    provider.close_sync()  # type: ignore[attr-defined]
    assert answers == ["Paris."] * 3
