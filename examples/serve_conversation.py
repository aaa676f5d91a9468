"""An agent behind a wire (USAGE.md §10), offline: the app `agentfootprint serve` runs,
driven here in-process with httpx instead of over a socket.

Run: python examples/serve_conversation.py

The same app is served for real with
``AGENTFOOTPRINT_API_KEYS="key-of-alice=alice" agentfootprint serve serve_conversation:make_agent``
(from this folder; ``--sessions redis://...`` or ``postgresql://...`` for several processes).
Each turn builds a fresh agent (``make_agent``) and continues the session's conversation from
the session store, so any server process sharing that store can take the next turn. A run
that stops for a person's check-in answers 202 with what it wants to do; ``/resume`` continues
it. Another principal asking for the session is told it does not exist (404, never 403).
"""

import asyncio
import tempfile
from pathlib import Path

import httpx

from agentfootprint import Agent, tool
from agentfootprint.providers import mock
from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions


@tool(check_in=lambda args: True)
async def issue_refund(order_id: str) -> str:
    """Issue a refund for an order (a person approves it first)."""
    return f"refund issued for {order_id}"


def _respond(request):  # the scripted model: refund when asked, else echo the turn
    last = request.messages[-1]
    if last["role"] == "tool":
        return f"Done: {last['content']}."
    said = [m["content"] for m in request.messages if m["role"] == "user"]
    if "refund" in said[-1]:
        return {"tool_calls": [{"name": "issue_refund", "args": {"order_id": "A-1001"}}]}
    return f"noted {said[-1]!r} ({len(said)} messages from you so far)"


def make_agent() -> Agent:
    """A fresh agent per turn, as the server builds it."""
    return Agent(provider=mock(respond=_respond), name="support", tools=[issue_refund])


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = serve_app(make_agent, sessions=sqlite_sessions(Path(tmp) / "sessions.db"),
                        auth=api_key_auth({"key-of-alice": "alice", "key-of-bob-1": "bob"}))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
            alice = {"Authorization": "Bearer key-of-alice"}
            session = (await web.post("/sessions", json={}, headers=alice)).json()
            url = f"/sessions/{session['id']}"
            for text in ("My order A-1001 arrived broken.", "It is the blue one."):
                reply = (await web.post(f"{url}/messages", json={"message": text},
                                        headers=alice)).json()
                print(f"turn {reply['turn']}: {reply['answer']}")

            paused = await web.post(f"{url}/messages", json={"message": "Please refund it."},
                                    headers=alice)
            print(f"{paused.status_code} paused: {paused.json()['pause']['kind']} before "
                  f"{paused.json()['pause']['tool']}")
            done = await web.post(f"{url}/resume", json={"answer": {"check_in": "approved"}},
                                  headers=alice)
            print(f"{done.status_code} resumed: {done.json()['answer']}")

            lines = (await web.get(f"{url}/transcript", headers=alice)).json()["entries"]
            print(f"transcript: {len(lines)} lines, turns {sorted({e['turn'] for e in lines})}")
            foreign = await web.get(f"{url}/transcript",
                                    headers={"Authorization": "Bearer key-of-bob-1"})
            print(f"bob asks for alice's session: {foreign.status_code} {foreign.json()['detail']}")


if __name__ == "__main__":
    asyncio.run(main())
