"""The hardening issue's bad-input battery, run against the HTTP surface of ``serve_app``.

Every route is given malformed session ids, bodies of the wrong type, bodies over the limit,
bad JSON, wrong methods and missing or wrong credentials. Each answer must be the documented
4xx with a JSON ``{"detail": ...}`` of one sentence (no line break, no traceback, never the
value sent), and nothing may be lost: after the whole battery, the idle session still has its
one turn and takes the next as turn 2, and the paused session is still paused and is resumed.

In process (httpx over ASGI; Starlette's TestClient for the WebSocket door): the app decides
all of these; the real server's own parser is fuzzed by ``tests/e2e/test_serve_schemathesis.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient, WebSocketDenialResponse

from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions

TARGET = "serve_factories:make_agent"
ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
LIMIT = 4_096
SENT_SECRET = "value-sent-7d1e"
"""Put in the bodies below: an error detail must never echo what was sent."""


@dataclass
class World:
    client: httpx.AsyncClient
    app: Any
    idle: str
    """Alice's session with one turn done."""
    paused: str
    """Alice's session paused on a check-in."""
    bobs: str
    """Bob's session (Alice must be told 404 for it)."""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    app = serve_app(TARGET, sessions=sqlite_sessions(tmp_path / "s.db"),
                    auth=api_key_auth({ALICE: "alice", BOB: "bob"}), max_body_bytes=LIMIT)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), timeout=20,
                               base_url="http://testserver",
                               headers={"Authorization": f"Bearer {ALICE}"})
    idle = (await client.post("/sessions")).json()["id"]
    assert (await client.post(f"/sessions/{idle}/messages", json={"message": "one"})
            ).json()["turn"] == 1
    paused = (await client.post("/sessions")).json()["id"]
    assert (await client.post(f"/sessions/{paused}/messages", json={"message": "refund"})
            ).status_code == 202
    bobs = (await client.post("/sessions", headers={"Authorization": f"Bearer {BOB}"})
            ).json()["id"]
    try:
        yield World(client, app, idle, paused, bobs)
    finally:
        await client.aclose()
        await app.state.standing.close()


def _one_sentence(answer: httpx.Response, status: int, what: object) -> str:
    assert answer.status_code == status, (what, answer.status_code, answer.text)
    assert answer.headers["content-type"].startswith("application/json"), what
    body = answer.json()
    assert set(body) == {"detail"}, what
    detail = body["detail"]
    assert isinstance(detail, str) and detail and "\n" not in detail, what
    assert len(detail) <= 400 and "Traceback" not in detail, what
    assert SENT_SECRET not in detail and SENT_SECRET not in answer.text, what
    return detail


SESSION_ROUTES = [("POST", "/sessions/{id}/messages", {"message": "hi"}),
                  ("POST", "/sessions/{id}/resume", {"answer": {"check_in": "approved"}}),
                  ("GET", "/sessions/{id}/transcript", None)]
BAD_IDS = ["s" + "0" * 300, "..%2F..%2Fetc%2Fpasswd", "%2e%2e", "s%00x", "s%C3%A9", "a%20b",
           "%FF%FE", "s;drop", "nul%0Aline", "\u0661\u0662", "%F0%9F%92%A5",
           "s" + "x" * 90 + SENT_SECRET]


async def test_every_session_route_given_a_malformed_or_foreign_id_is_404(world: World) -> None:
    """An id that cannot exist, or Bob's, is 404 naming how to get a session (never 403,
    never 500; a long id is shown clipped, so its tail is never echoed)."""
    for method, path, body in SESSION_ROUTES:
        for session in [*BAD_IDS, world.bobs]:
            answer = await world.client.request(method, path.format(id=session), json=body)
            detail = _one_sentence(answer, 404, (method, path, session))
            # an id with a '/' in it (%2F) matches no route: the route 404
            assert "POST /sessions" in detail or "/openapi.json" in detail, detail


BODY_ROUTES = ["/sessions", "/sessions/{idle}/messages", "/sessions/{paused}/resume"]
BAD_BODIES: list[tuple[str, bytes]] = [
    ("bad JSON", b"{not json"), ("truncated", b'{"message": "hi'), ("not UTF-8", b'"\xff\xfe"'),
    ("a list", b"[]"), ("a number", b"7"), ("null", b"null"),
    ("deep nesting", b'{"answer": ' + b"[" * 1_900 + b"]" * 1_900 + b', "x": 1}'),
    ("NaN", b'{"message": NaN}'), ("a huge number", b'{"answer": 1e999999, "x": 1}'),
    ("an unknown field", json.dumps({"message": "hi", "answer": 1, SENT_SECRET: 1}).encode()),
    ("a surrogate", b'{"message": "\\ud800"}'),
]


async def test_bad_json_and_wrong_types_are_422_on_every_body_route(world: World) -> None:
    """Each body route refuses each bad body with 422 naming what it expects."""
    for template in BODY_ROUTES:
        path = template.format(idle=world.idle, paused=world.paused)
        for what, raw in BAD_BODIES:
            answer = await world.client.post(path, content=raw,
                                              headers={"Content-Type": "application/json"})
            detail = _one_sentence(answer, 422, (path, what))
            assert "expects" in detail, detail
    wrong_types = [{"message": 7}, {"message": None}, {"message": ["hi"]},
                   {"message": {"text": SENT_SECRET}}, {"message": ""}, {"text": "hi"},
                   {"message": True}]
    for body in wrong_types:
        answer = await world.client.post(f"/sessions/{world.idle}/messages", json=body)
        _one_sentence(answer, 422, body)
    for body in ({}, {"verdict": "approved"}, {"answer": "ok", "by": SENT_SECRET}):
        answer = await world.client.post(f"/sessions/{world.paused}/resume", json=body)
        _one_sentence(answer, 422, body)
    for limit in ("0", "1001", "-1", "x", "1.5", "", "9" * 400, "\u0661", SENT_SECRET):
        answer = await world.client.get("/sessions", params={"limit": limit})
        _one_sentence(answer, 422, limit)


async def test_a_body_over_the_limit_is_413_on_every_body_route(world: World) -> None:
    """Declared or streamed, a body over ``max_body_bytes`` is 413 on every body route."""
    big = json.dumps({"message": SENT_SECRET + "x" * LIMIT}).encode()

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(LIMIT // 512 + 2):
            yield b" " * 512

    for template in BODY_ROUTES:
        path = template.format(idle=world.idle, paused=world.paused)
        _one_sentence(await world.client.post(path, content=big), 413, path)
        _one_sentence(await world.client.post(path, content=chunked()), 413, (path, "chunked"))


async def test_wrong_methods_are_405_naming_the_allowed_ones(world: World) -> None:
    """Every path given a method it does not serve: 405, Allow lists what it does serve."""
    served = {"/sessions": {"GET", "POST"}, f"/sessions/{world.idle}/messages": {"POST"},
              f"/sessions/{world.idle}/resume": {"POST"},
              f"/sessions/{world.idle}/transcript": {"GET"}, "/healthz": {"GET"},
              "/openapi.json": {"GET"}}
    for path, methods in served.items():
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if method in methods:
                continue
            answer = await world.client.request(method, path, content=b'{"message": "hi"}')
            _one_sentence(answer, 405, (method, path))
            assert set(answer.headers["allow"].replace(" ", "").split(",")) >= methods


async def test_every_route_without_or_with_a_wrong_key_is_401_before_reading_the_body(
        world: World) -> None:
    """No credentials, another scheme, a wrong or empty key, a key with a NUL or non-ASCII:
    401 with WWW-Authenticate on every authenticated route, even with a bad or huge body."""
    routes = [("POST", "/sessions"), ("GET", "/sessions"),
              *((m, p.format(id=world.idle)) for m, p, _ in SESSION_ROUTES)]
    credentials: list[dict[str, Any]] = [
        {}, {"Authorization": f"Basic {ALICE}"}, {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {SENT_SECRET}"}, {"Authorization": f"Bearer {ALICE}x"},
        {"Authorization": f"bearer  {ALICE[:-1]}"},
        {"Authorization": "Bearer \u00e9\u00e9\u00e9".encode("latin-1")},
        {"Authorization": f"Bearer {ALICE}\u00e9".encode()},
    ]
    for method, path in routes:
        for headers in credentials:
            for body in (b"{not json", b"x" * (LIMIT + 10)):
                answer = await world.client.request(
                    method, path, content=body, headers={"Authorization": "", **headers})
                detail = _one_sentence(answer, 401, (method, path, headers))
                assert detail.startswith("not authenticated")
                assert answer.headers["www-authenticate"] == "Bearer"


async def test_stream_headers_gone_wrong_are_4xx_not_a_stream(world: World) -> None:
    """With Accept: text/event-stream, a bad body is a JSON 422 and an unknown or foreign
    Last-Event-ID a JSON 404 (nothing is run)."""
    stream = {"Accept": "text/event-stream"}
    _one_sentence(await world.client.post(f"/sessions/{world.idle}/messages",
                                          content=b"{", headers=stream), 422, "bad body")
    for last in ("0", "x" * 500, f"{world.bobs}:1", SENT_SECRET, "-1", "1:1:1"):
        answer = await world.client.post(f"/sessions/{world.idle}/messages",
                                          headers={**stream, "Last-Event-ID": last})
        _one_sentence(answer, 404, last)


async def test_nothing_is_lost_after_the_battery(world: World) -> None:
    """The whole battery, then: the idle session has its one turn and takes turn 2; the
    paused one is still paused (a message is 409) and its resume completes turn 1."""
    for test in (test_every_session_route_given_a_malformed_or_foreign_id_is_404,
                 test_bad_json_and_wrong_types_are_422_on_every_body_route,
                 test_a_body_over_the_limit_is_413_on_every_body_route,
                 test_wrong_methods_are_405_naming_the_allowed_ones,
                 test_stream_headers_gone_wrong_are_4xx_not_a_stream):
        await test(world)
    client = world.client
    before = (await client.get(f"/sessions/{world.idle}/transcript")).json()["entries"]
    assert [(e["turn"], e["content"]) for e in before] == [(1, "one"),
                                                           (1, "turn 1: you said 'one'")]
    after = await client.post(f"/sessions/{world.idle}/messages", json={"message": "two"})
    assert after.status_code == 200 and after.json()["turn"] == 2
    assert after.json()["answer"] == "turn 2: you said 'two'"
    _one_sentence(await client.post(f"/sessions/{world.paused}/messages",
                                    json={"message": "hi"}), 409, "paused")
    resumed = await client.post(f"/sessions/{world.paused}/resume",
                                json={"answer": {"check_in": "approved"}})
    assert resumed.status_code == 200 and resumed.json()["turn"] == 1
    assert resumed.json()["answer"] == "Done: refund issued for A-9."
    bob = {"Authorization": f"Bearer {BOB}"}
    assert (await client.get(f"/sessions/{world.bobs}/transcript", headers=bob)
            ).json()["entries"] == []
    listed = (await client.get("/sessions")).json()["sessions"]
    assert {s["id"] for s in listed} == {world.idle, world.paused}


@pytest.fixture
def sync_client(tmp_path: Path) -> Iterator[TestClient]:
    app = serve_app(TARGET, sessions=sqlite_sessions(tmp_path / "ws.db"),
                    auth=api_key_auth({ALICE: "alice", BOB: "bob"}), max_body_bytes=LIMIT)
    with TestClient(app) as client:
        yield client


def test_the_websocket_door_refuses_malformed_ids_and_keys_and_keeps_its_session(
        sync_client: TestClient) -> None:
    """The WebSocket is refused before accepting for every malformed id (404) and every bad
    credential (401); its session then still holds a two-turn conversation over the door."""
    auth = {"Authorization": f"Bearer {ALICE}"}
    session = sync_client.post("/sessions", headers=auth).json()["id"]
    for where, headers, status in (
            *((bad, auth, 404) for bad in BAD_IDS if "%2F" not in bad),
            (session, {}, 401), (session, {"Authorization": f"Bearer {SENT_SECRET}"}, 401),
            (session, {"Authorization": f"Bearer {BOB}"}, 404)):
        with pytest.raises(WebSocketDenialResponse) as denied, \
                sync_client.websocket_connect(f"/sessions/{where}/ws", headers=headers):
            pass
        assert denied.value.status_code == status, (where, headers)
        assert SENT_SECRET not in denied.value.text
    with sync_client.websocket_connect(f"/sessions/{session}/ws", headers=auth) as ws:
        for text in ("[", json.dumps({"message": None}), json.dumps({"resume": 1, "x": 2}),
                     json.dumps({"message": SENT_SECRET * 400})):
            ws.send_text(text)
            frame = json.loads(ws.receive_text())
            assert frame["type"] == "error" and frame["status"] in (409, 413, 422), frame
            assert SENT_SECRET not in frame["detail"] and "\n" not in frame["detail"]
        turns = []
        for message in ("one", "two"):
            ws.send_text(json.dumps({"message": message}))
            while (frame := json.loads(ws.receive_text()))["type"] != "reply":
                pass
            turns.append((frame["turn"], frame["answer"]))
    assert turns == [(1, "turn 1: you said 'one'"), (2, "turn 2: you said 'two'")]
