"""A memory agent mounted over MCP (``serve_app(..., mcp=True)``): each call runs under the
authenticated principal and the caller's MCP session, so a session's second call recalls its
first and another principal's session sees none of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("mcp")

from starlette.testclient import TestClient

from agentfootprint import Agent
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
ACCEPT = {"Accept": "application/json, text/event-stream"}


def remembering_agent(store: SQLiteStore, identity: MemoryIdentity | None = None) -> Agent:
    """A window-memory agent that says whether its memory recalled the name Ada."""

    def respond(request: LLMRequest) -> str:
        return "recalls Ada" if "My name is Ada" in (request.system or "") else "recalls nothing"

    return Agent(provider=mock(respond=respond), model="m", name="concierge", identity=identity,
                 memory=[define_memory(type="episodic", strategy="window", store=store,
                                       keep_turns=10, id="chat")])


def _message(response: Any) -> dict[str, Any]:
    """The JSON-RPC message of a response (plain JSON or one SSE ``data:`` event)."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        found: dict[str, Any] = response.json()
        return found
    [data] = [line[5:].strip() for line in response.text.splitlines()
              if line.startswith("data:") and line[5:].strip()]
    found = json.loads(data)
    return found


class McpSession:
    """One MCP client session over the mount, with one API key."""

    def __init__(self, client: TestClient, key: str) -> None:
        self.client = client
        self.headers = {**ACCEPT, "Authorization": f"Bearer {key}"}
        opened = client.post("/mcp/", headers=self.headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}})
        _message(opened)
        self.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-06-18"
        done = client.post("/mcp/", headers=self.headers,
                           json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status_code == 202
        self.next_id = 2
        self.tool = "concierge"

    def ask(self, request: str) -> str:
        self.next_id += 1
        answered = _message(self.client.post("/mcp/", headers=self.headers, json={
            "jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": self.tool, "arguments": {"request": request}}}))
        result = answered["result"]
        assert not result.get("isError"), result
        text: str = result["content"][0]["text"]
        return text


def test_a_session_continues_its_conversation_and_another_principal_sees_none(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memory.db")
    app = serve_app(lambda: remembering_agent(store),
                    sessions=sqlite_sessions(tmp_path / "s.db"),
                    auth=api_key_auth({ALICE: "alice", BOB: "bob"}), mcp=True)
    with TestClient(app) as client:
        alice = McpSession(client, ALICE)
        assert alice.ask("My name is Ada") == "recalls nothing"
        assert alice.ask("What is my name?") == "recalls Ada"  # same session, same conversation
        bob = McpSession(client, BOB)
        assert bob.ask("What is my name?") == "recalls nothing"
        borrowed = McpSession(client, BOB)  # bob in alice's MCP session still reads only his
        borrowed.headers["mcp-session-id"] = alice.headers["mcp-session-id"]
        assert borrowed.ask("What is my name?") == "recalls nothing"
        assert alice.ask("And now?") == "recalls Ada"
        assert McpSession(client, ALICE).ask("What is my name?") == "recalls nothing"  # new one
    store.close_sync()


async def test_a_call_without_a_session_uses_the_agents_own_identity_else_a_fresh_one(
        tmp_path: Path) -> None:
    """In process (no HTTP, no session, no principal): an agent with its own ``identity=``
    continues that conversation; one without runs each call as a fresh conversation."""
    from mcp import Client

    from agentfootprint.serve import mcp_app

    store = SQLiteStore(tmp_path / "own.db")
    owned = remembering_agent(store, MemoryIdentity("front-desk"))
    async with Client(mcp_app(owned)) as client:
        first = await client.call_tool("concierge", {"request": "My name is Ada"})
        second = await client.call_tool("concierge", {"request": "What is my name?"})
    assert [first.content[0].text, second.content[0].text] == ["recalls nothing", "recalls Ada"]
    async with Client(mcp_app(remembering_agent(store))) as client:
        await client.call_tool("concierge", {"request": "My name is Ada"})
        again = await client.call_tool("concierge", {"request": "What is my name?"})
    assert (again.is_error, again.content[0].text) == (False, "recalls nothing")
    await store.aclose()


def test_a_team_with_memory_members_remembers_per_session_too(tmp_path: Path) -> None:
    """A composition of memory agents mounted over MCP: its members run under the session's
    identity, so the session's second call recalls the first."""
    from agentfootprint.compose import Sequence

    store = SQLiteStore(tmp_path / "team.db")

    def make_team() -> Sequence:
        return Sequence(("first", remembering_agent(store)), ("second", remembering_agent(store)))

    app = serve_app(make_team, sessions=sqlite_sessions(tmp_path / "s.db"),
                    auth=api_key_auth({ALICE: "alice"}), mcp=True)
    with TestClient(app) as client:
        alice = McpSession(client, ALICE)
        listed = _message(client.post("/mcp/", headers=alice.headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        [alice.tool] = [t["name"] for t in listed["result"]["tools"]]
        alice.ask("My name is Ada")  # (its second member already recalls the first's turn)
        assert alice.ask("Hello") == "recalls Ada"
        other = McpSession(client, ALICE)
        other.tool = alice.tool
        assert other.ask("Hello") == "recalls nothing"  # another session, another conversation
    store.close_sync()
