"""``serve_app`` in process (httpx over ASGI): authentication, the limits, the error mapping,
the SSE event log's ownership, CORS and the OpenAPI document against what is served.

The agent is ``serve_factories.make_agent`` (the mock provider). The real-process behaviour
(two servers, one store, SIGTERM) is in ``tests/e2e/test_serve_processes.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

pytest.importorskip("starlette")

from agentfootprint.errors import ConfigurationError, SessionStoreError
from agentfootprint.serve import api_key_auth, serve_app, sqlite_sessions
from agentfootprint.serve._app import problem_of
from agentfootprint.serve._openapi import OPERATIONS, openapi_document

TARGET = "serve_factories:make_agent"
ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
KEYS = {ALICE: "alice", BOB: "bob"}

Make = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[Make]:
    """``await make_client(**serve_app options)``: a client of a fresh app (Alice's key set)."""
    opened: list[tuple[httpx.AsyncClient, Any]] = []

    async def make(*, key: str | None = ALICE, client: tuple[str, int] = ("127.0.0.1", 5000),
                   base_url: str = "http://testserver", **options: Any) -> httpx.AsyncClient:
        options.setdefault("auth", api_key_auth(KEYS))
        app = serve_app(TARGET, sessions=sqlite_sessions(tmp_path / f"s{len(opened)}.db"),
                        **options)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=client),
                                 base_url=base_url, headers=headers, timeout=20)
        opened.append((http, app))
        return http

    yield make
    for http, app in opened:
        await http.aclose()
        await app.state.standing.close()


async def _session(client: httpx.AsyncClient) -> str:
    started = await client.post("/sessions")
    assert started.status_code == 201, started.text
    return str(started.json()["id"])


# -- authentication -----------------------------------------------------------------------

async def test_requests_without_a_known_key_are_401_and_no_key_is_ever_echoed(
        make_client: Make) -> None:
    """No header, another scheme, a wrong key: 401 with WWW-Authenticate; the body never holds
    the key that was sent; healthz and the document need no key."""
    client = await make_client(key=None)
    for headers in ({}, {"Authorization": f"Basic {ALICE}"},
                    {"Authorization": "Bearer wrong-key-0123456789"},
                    {"Authorization": "Bearer "}):
        answer = await client.get("/sessions", headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        assert "wrong-key" not in answer.text and ALICE not in answer.text
        assert answer.json()["detail"].startswith("not authenticated")
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/openapi.json")).status_code == 200
    assert (await client.get("/sessions", headers={"Authorization": f"Bearer {ALICE}"})
            ).status_code == 200


def test_a_server_without_keys_refuses_to_be_built(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """No AGENTFOOTPRINT_API_KEYS and no auth=: ConfigurationError naming the three fixes;
    with the variable set, the app is built; a malformed table names the entry, not the key."""
    monkeypatch.delenv("AGENTFOOTPRINT_API_KEYS", raising=False)
    with pytest.raises(ConfigurationError, match=r"AGENTFOOTPRINT_API_KEYS.*insecure-local"):
        serve_app(TARGET, sessions=sqlite_sessions(tmp_path / "s.db"))
    with pytest.raises(ConfigurationError, match="not both"):
        serve_app(TARGET, auth=api_key_auth(KEYS), allow_unauthenticated=True)
    monkeypatch.setenv("AGENTFOOTPRINT_API_KEYS", "short=alice")
    with pytest.raises(ConfigurationError, match="API key #1") as bad:
        api_key_auth()
    assert "short" not in str(bad.value)
    monkeypatch.setenv("AGENTFOOTPRINT_API_KEYS", f"{ALICE}=alice, {BOB}=bob")
    assert api_key_auth()._keys == ((ALICE.encode(), "alice"), (BOB.encode(), "bob"))


async def test_local_development_lets_loopback_in_as_local_and_no_one_else(
        make_client: Make) -> None:
    """allow_unauthenticated=True: a loopback caller is the principal 'local' without any
    header; a caller from another address, or naming another host (a DNS-rebound page), 401."""
    for host in ("http://127.0.0.1:8000", "http://localhost", "http://[::1]:8000"):
        local = await make_client(key=None, auth=None, allow_unauthenticated=True,
                                  base_url=host)
        started = await local.post("/sessions")
        assert started.status_code == 201 and started.json()["owner"] == "local"
    remote = await make_client(key=None, auth=None, allow_unauthenticated=True,
                               client=("10.1.2.3", 5000), base_url="http://127.0.0.1")
    assert (await remote.post("/sessions")).status_code == 401
    rebound = await make_client(key=None, auth=None, allow_unauthenticated=True,
                                base_url="http://attacker.example:8000")
    assert (await rebound.post("/sessions")).status_code == 401


async def test_a_custom_auth_hook_decides_the_principal_and_a_broken_one_is_a_500(
        make_client: Make) -> None:
    """An async hook's principal owns the session; a hook returning a non-string is the
    server's mistake: 500 with no traceback in the body."""
    async def by_header(request: Any) -> str | None:
        return request.headers.get("x-user")

    client = await make_client(key=None, auth=by_header)
    started = await client.post("/sessions", headers={"x-user": "carol"})
    assert started.json()["owner"] == "carol"
    assert (await client.post("/sessions")).status_code == 401
    broken = await make_client(key=None, auth=lambda request: 42)
    answer = await broken.post("/sessions")
    assert answer.status_code == 500
    assert "Traceback" not in answer.text and "42" not in answer.text


# -- bad input and limits -----------------------------------------------------------------

async def test_bad_bodies_are_422_in_one_sentence_never_500(make_client: Make) -> None:
    """Bad JSON, a missing or extra field, a wrong type, an empty message, a list: 422 naming
    the field; the value sent is not echoed."""
    client = await make_client()
    session = await _session(client)
    route = f"/sessions/{session}/messages"
    for body in (b"{not json", b'{"mesage": "hi"}', b'{"message": "hi", "secret": "s3cr3t"}',
                 b'{"message": 7}', b'{"message": ""}', b"[]", b"", b'"\xff"'):
        answer = await client.post(route, content=body)
        assert answer.status_code == 422, (body, answer.text)
        detail = answer.json()["detail"]
        assert detail.startswith("the request body is not what MessageIn expects")
        assert "s3cr3t" not in detail and "\n" not in detail
    assert (await client.post(f"/sessions/{session}/resume", content=b"{}")).status_code == 422
    assert (await client.get("/sessions", params={"limit": "0"})).status_code == 422
    for limit in ("x", "²", "9" * 5000, "-1", "1001"):
        assert (await client.get("/sessions", params={"limit": limit})).status_code == 422
    odd_length = await client.post(f"/sessions/{session}/messages", json={"message": "hi"},
                                   headers={"Content-Length": "²".encode()})
    assert odd_length.status_code in (200, 422)
    assert (await client.post("/sessions", content=b'{"x": 1}')).status_code == 422
    wrong_method = await client.delete("/sessions")
    assert wrong_method.status_code == 405
    assert set(wrong_method.headers["allow"].split(", ")) >= {"GET", "POST"}
    unknown = await client.get("/nowhere")
    assert unknown.status_code == 404 and "openapi.json" in unknown.json()["detail"]


async def test_a_body_over_the_limit_is_413_declared_or_chunked(make_client: Make) -> None:
    """Content-Length over the limit is refused before reading; a chunked body is counted."""
    client = await make_client(max_body_bytes=100)
    session = await _session(client)
    big = json.dumps({"message": "x" * 200}).encode()
    answer = await client.post(f"/sessions/{session}/messages", content=big)
    assert answer.status_code == 413 and "100 bytes" in answer.json()["detail"]

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b" " * 30
        yield b'{"message": "hi"}'

    chunked = await client.post(f"/sessions/{session}/messages", content=chunks())
    assert chunked.status_code == 413
    fine = await client.post(f"/sessions/{session}/messages", json={"message": "hi"})
    assert fine.status_code == 200 and fine.json()["turn"] == 1


async def test_a_principal_over_its_concurrent_runs_is_429_until_one_ends(
        make_client: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one run allowed, Alice's second turn (another session) is 429 while her slow turn
    runs; Bob is not limited by her; once her run ends she may send again."""
    monkeypatch.setenv("SERVE_TEST_SLOW", "0.5")
    client = await make_client(max_concurrent_per_principal=1)
    first, second = await _session(client), await _session(client)
    slow = asyncio.create_task(client.post(f"/sessions/{first}/messages",
                                           json={"message": "slow please"}))
    await asyncio.sleep(0.15)
    refused = await client.post(f"/sessions/{second}/messages", json={"message": "hi"})
    assert refused.status_code == 429 and "limit" in refused.json()["detail"]
    bob = await client.post("/sessions", headers={"Authorization": f"Bearer {BOB}"})
    assert bob.status_code == 201
    answered = await client.post(f"/sessions/{bob.json()['id']}/messages",
                                 json={"message": "hi"}, headers={"Authorization": f"Bearer {BOB}"})
    assert answered.status_code == 200
    assert (await slow).status_code == 200
    assert (await client.post(f"/sessions/{second}/messages", json={"message": "hi"})
            ).status_code == 200


async def test_a_run_over_the_timeout_is_504_and_frees_the_session(
        make_client: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow tool outlasts request_timeout: 504 naming the limit; the session's claim is
    released, so its next message runs (as turn 1 again: the timed-out turn kept nothing)."""
    monkeypatch.setenv("SERVE_TEST_SLOW", "2")
    client = await make_client(request_timeout=0.3)
    session = await _session(client)
    answer = await client.post(f"/sessions/{session}/messages", json={"message": "slow"})
    assert answer.status_code == 504 and "0.3 s" in answer.json()["detail"]
    monkeypatch.setenv("SERVE_TEST_SLOW", "0")
    after = await client.post(f"/sessions/{session}/messages", json={"message": "hi"})
    assert after.status_code == 200 and after.json()["turn"] == 1


def test_store_and_run_failures_never_put_their_text_in_the_reply() -> None:
    """A session store's error text (which may hold a URL with a password) and a run's are
    kept out of the detail; each maps to its status."""
    store = SessionStoreError("postgresql://u:hunter2@db/x refused", store="postgres")
    status, detail = problem_of(store, timeout=1)
    assert status == 503 and "hunter2" not in detail
    from agentfootprint.errors import ProviderError

    status, detail = problem_of(ProviderError("key sk-live-123 rejected", provider="openai"),
                                timeout=1)
    assert status == 502 and "sk-live" not in detail
    status, detail = problem_of(RuntimeError("boom /etc/passwd"), timeout=1)
    assert status == 500 and "passwd" not in detail


# -- SSE log ownership, CORS ----------------------------------------------------------------

async def test_last_event_id_replays_only_for_its_owner_and_session(make_client: Make) -> None:
    """Alice's event id replays her stream; Bob sending it (to her session or his own), Alice
    sending it to another session, or a malformed id: 404, nothing replayed or run."""
    client = await make_client()
    session, other = await _session(client), await _session(client)
    stream = {"Accept": "text/event-stream"}
    first = await client.post(f"/sessions/{session}/messages", json={"message": "hi"},
                              headers=stream)
    ids = [line[4:] for line in first.text.splitlines() if line.startswith("id: ")]
    assert len(ids) >= 3
    replay = await client.post(f"/sessions/{session}/messages", headers={
        **stream, "Last-Event-ID": ids[0]})
    assert [line[4:] for line in replay.text.splitlines() if line.startswith("id: ")] == ids[1:]
    bob = {"Authorization": f"Bearer {BOB}"}
    bobs = (await client.post("/sessions", headers=bob)).json()["id"]
    for where, headers in ((session, bob), (bobs, bob), (other, {}),
                           (session, {"Last-Event-ID": "not-an-id"})):
        answer = await client.post(f"/sessions/{where}/messages", headers={
            **stream, "Last-Event-ID": ids[0], **headers})
        assert answer.status_code == 404, (where, headers)
    transcript = (await client.get(f"/sessions/{session}/transcript")).json()["entries"]
    assert [e["turn"] for e in transcript] == [1, 1]


async def test_cors_is_off_by_default_and_allows_only_the_origins_given(
        make_client: Make) -> None:
    """No CORS headers unless cors_origins is set; then the listed origin's preflight passes
    (Authorization allowed) and another origin gets no allow header."""
    preflight = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    closed = await make_client()
    answer = await closed.get("/healthz", headers={"Origin": "https://app.example.com"})
    assert "access-control-allow-origin" not in answer.headers
    opened = await make_client(cors_origins=["https://app.example.com"])
    allowed = await opened.options("/sessions", headers=preflight)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    other = await opened.get("/healthz", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


# -- the OpenAPI document -------------------------------------------------------------------

async def test_the_openapi_document_lists_exactly_the_served_routes_and_their_replies(
        make_client: Make) -> None:
    """Every HTTP route served is in the document and every documented one is served; replies
    of each route (201, 200, 202, 404, 409, 422) validate against their documented schema."""
    from starlette.routing import Route

    client = await make_client()
    document = (await client.get("/openapi.json")).json()
    assert document == json.loads(json.dumps(openapi_document(
        version=document["info"]["version"])))
    app = client._transport.app  # type: ignore[attr-defined]
    served = {(method, route.path) for route in app.routes if isinstance(route, Route)
              for method in route.methods or () if method != "HEAD"}
    documented = {(method.upper(), path) for path, item in document["paths"].items()
                  for method in item}
    assert served == documented

    def check(path: str, method: str, answer: httpx.Response) -> None:
        operation = document["paths"][path][method]
        declared = operation["responses"][str(answer.status_code)]
        schema = {**declared["content"]["application/json"]["schema"],
                  "components": document["components"]}
        jsonschema.validate(answer.json(), schema)

    started = await client.post("/sessions")
    session = started.json()["id"]
    check("/sessions", "post", started)
    check("/sessions", "get", await client.get("/sessions"))
    messages = "/sessions/{session_id}/messages"
    check(messages, "post", await client.post(f"/sessions/{session}/messages",
                                              json={"message": "hi"}))
    paused = await client.post(f"/sessions/{session}/messages", json={"message": "refund"})
    assert paused.status_code == 202
    check(messages, "post", paused)
    check(messages, "post", await client.post(f"/sessions/{session}/messages",
                                              json={"message": "hi"}))
    check(messages, "post", await client.post(f"/sessions/{session}/messages", json={}))
    check("/sessions/{session_id}/resume", "post", await client.post(
        f"/sessions/{session}/resume", json={"answer": {"check_in": "approved", "by": "a"}}))
    check("/sessions/{session_id}/transcript", "get",
          await client.get(f"/sessions/{session}/transcript"))
    check("/sessions/{session_id}/transcript", "get",
          await client.get("/sessions/nope/transcript"))
    check("/healthz", "get", await client.get("/healthz"))
    assert {op.name for op in OPERATIONS} <= {
        operation["operationId"] for item in document["paths"].values()
        for operation in item.values()}


async def test_a_check_in_verdict_is_signed_by_the_authenticated_caller(
        make_client: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever ``by`` the body claims, the verdict the agent receives names the principal
    whose key was sent (a caller cannot approve in someone else's name)."""
    from agentfootprint.agent._agent import Agent

    received: list[object] = []
    original = Agent.resume

    async def spy(self: Agent, checkpoint: Any, answer: object = None, **options: Any) -> Any:
        received.append(answer)
        return await original(self, checkpoint, answer, **options)

    monkeypatch.setattr(Agent, "resume", spy)
    client = await make_client()
    session = await _session(client)
    assert (await client.post(f"/sessions/{session}/messages", json={"message": "refund"})
            ).status_code == 202
    done = await client.post(f"/sessions/{session}/resume",
                             json={"answer": {"check_in": "approved", "by": "mallory"}})
    assert done.status_code == 200
    assert received == [{"check_in": "approved", "by": "alice"}]
