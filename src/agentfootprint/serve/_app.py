"""``serve_app``: a standing agent behind HTTP, SSE and a WebSocket, as a Starlette app.

    app = serve_app("myapp.agents:make_agent", sessions=sqlite_sessions("sessions.db"))
    uvicorn.run(app, host="127.0.0.1", port=8000)       # or: agentfootprint serve ...

Every route goes through one ``StandingAgent`` (``standing_agent(make_agent, sessions=...)``),
the same code path a host calling it directly takes: the server only authenticates, limits,
translates JSON and maps errors to statuses. The routes are the rows of
``_openapi.OPERATIONS``, which also generates ``GET /openapi.json``.

Errors: each is ``{"detail": "<one sentence>"}`` — 401 not authenticated, 404 no such session
for this principal (a foreign session too: never 403), 409 busy or in the wrong state, 413 body
too large, 422 bad JSON or fields, 429 too many runs at once, 502 the run failed, 503 the
session store failed, 504 the run took longer than ``request_timeout``. A detail never holds a
traceback, a store's error text or a credential; unexpected errors are logged, answered 500.

Streamed turns (SSE, WebSocket) send the run's events (``run_stream``'s, its ``result`` among
them), then the turn's ``Reply`` as ``{"type": "reply", ...}`` (what the JSON route answers), or
an ``{"type": "error", "status", "detail"}`` event. They run in a task of their own and are
logged (``_eventlog.py``):
a reader that goes away does not cancel the run, and SSE readers reconnect with
``Last-Event-ID``. Shutting down (uvicorn's lifespan) waits for runs under way to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ..errors import (
    ConfigurationError,
    RunError,
    SessionBusy,
    SessionNotFound,
    SessionStateError,
    SessionStoreError,
)
from ..flow._display import clip
from ._auth import Authenticate, authenticate, resolve_auth
from ._eventlog import EventLogs, RunLog
from ._limits import HTTPProblem, RunSlots, read_body
from ._openapi import OPERATIONS, Operation, openapi_document
from ._wire import ErrorOut, HealthOut, MessageIn, ResumeIn, SessionList, StartIn, TranscriptOut

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.websockets import WebSocket

    from ._standing import StandingAgent

__all__ = ["serve_app"]

log = logging.getLogger("agentfootprint.serve")

Handler = Callable[["Request", str], Awaitable["Response"]]


def serve_app(target: Any, *, sessions: Any = None, auth: Authenticate | None = None,
              allow_unauthenticated: bool = False, cors_origins: Sequence[str] = (),
              max_body_bytes: int = 1_000_000, request_timeout: float = 300.0,
              max_concurrent_per_principal: int = 4, mcp: bool = False) -> Starlette:
    """The ASGI app serving ``target``: ``"module:make_agent"`` (a factory called per turn),
    a factory, an ``Agent``, a composition (``Sequence(...)``, a pattern: see
    ``_served.py``), or a ``StandingAgent`` (then ``sessions`` is its own).

    The target is built once here and checked (then dropped: a factory still runs per turn),
    so a factory that cannot be imported, raises, or returns neither an ``Agent`` nor a
    composition raises ``ConfigurationError`` now instead of failing every request.

    ``sessions`` is a session store (``sqlite_sessions(path)``, ``redis_sessions(url)``,
    ``postgres_sessions(url)``, or the CLI's spelling: ``"sqlite:PATH"``, ``"redis://..."``,
    ``"postgresql://..."``; default: the standing agent's). ``auth(request) -> principal``
    decides who calls (default ``api_key_auth()``: keys from ``$AGENTFOOTPRINT_API_KEYS``);
    with none configured the app is refused unless ``allow_unauthenticated=True`` (loopback
    callers only, all the principal ``local``). ``cors_origins`` lists the browser origins
    allowed (none by default). ``mcp=True`` also mounts the agent as an MCP server at ``/mcp``
    (streamable HTTP), behind the same ``auth``.
    """
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.middleware import Middleware
        from starlette.routing import Mount, Route, WebSocketRoute
    except ImportError as exc:
        raise ConfigurationError(
            "serve_app needs Starlette: pip install 'agentfootprint[server]'") from exc

    standing = _standing_for(target, sessions)
    standing.check(target if isinstance(target, str) else None)  # a bad factory fails here
    checked = resolve_auth(auth, allow_unauthenticated=allow_unauthenticated)
    _check_limits(max_body_bytes, request_timeout, max_concurrent_per_principal, cors_origins)
    server = _Server(standing, checked, max_body_bytes=max_body_bytes,
                     request_timeout=float(request_timeout),
                     slots=RunSlots(max_concurrent_per_principal))
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for op in OPERATIONS:  # one route per path, so a 405's Allow names every method
        by_path.setdefault(op.path, {})[op.method] = server.endpoint(op)
    routes: list[Any] = [Route(path, _by_method(handlers), methods=list(handlers))
                         for path, handlers in by_path.items()]
    routes.append(Route("/openapi.json", server.openapi, methods=["GET"]))
    routes.append(WebSocketRoute("/sessions/{session_id}/ws", server.websocket))
    mcp_web = None
    if mcp:
        from ._mcp import mcp_app

        # host: not a bind; a loopback one would turn on the SDK's Host allow-list, which
        # ``auth`` replaces here (local mode checks the Host itself)
        mcp_web = mcp_app(_one_agent(target, standing)).streamable_http_app(
            streamable_http_path="/", host="0.0.0.0")  # noqa: S104
        routes.append(Mount("/mcp", app=_Guarded(mcp_web, checked)))
    middleware = []
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        middleware.append(Middleware(
            CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Accept", "Last-Event-ID"]))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if mcp_web is not None:
                await stack.enter_async_context(mcp_web.router.lifespan_context(mcp_web))
            yield
            await server.drain()

    async def not_routed(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        answer = _error(status, "no such route or method: see GET /openapi.json for what this "
                                "server serves" if status in (404, 405) else "the request failed")
        if isinstance(exc, HTTPException) and exc.headers:  # 405's Allow
            answer.headers.update(exc.headers)
        return answer

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={HTTPException: not_routed})
    app.state.standing = standing
    return app


def _by_method(handlers: dict[str, Callable[[Request], Awaitable[Response]]]
               ) -> Callable[[Request], Awaitable[Response]]:
    if len(handlers) == 1:
        return next(iter(handlers.values()))

    async def endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return endpoint


def _check_limits(max_body_bytes: object, request_timeout: object,
                  max_concurrent: object, cors_origins: object) -> None:
    if type(max_body_bytes) is not int or max_body_bytes < 1:
        raise ConfigurationError(f"max_body_bytes={max_body_bytes!r} must be an int >= 1")
    if (not isinstance(request_timeout, int | float) or isinstance(request_timeout, bool)
            or not 0 < request_timeout < float("inf")):
        raise ConfigurationError(
            f"request_timeout={request_timeout!r} must be a positive number of seconds")
    if type(max_concurrent) is not int or max_concurrent < 1:
        raise ConfigurationError(
            f"max_concurrent_per_principal={max_concurrent!r} must be an int >= 1")
    if isinstance(cors_origins, str) or not all(isinstance(o, str) for o in cors_origins):  # type: ignore[attr-defined]
        raise ConfigurationError(
            f"cors_origins={cors_origins!r} must be a list of origins, "
            "e.g. ['https://app.example.com']")


def _standing_for(target: Any, sessions: Any) -> StandingAgent:
    from ._standing import StandingAgent, standing_agent

    if isinstance(target, StandingAgent):
        if sessions is not None:
            raise ConfigurationError(
                "a StandingAgent brings its own sessions; pass sessions= to standing_agent(...)")
        return target
    make = _factory(target)
    if isinstance(sessions, str):
        from ._cli import sessions_from

        sessions = sessions_from(sessions)
    if sessions is None:
        return standing_agent(make)
    return standing_agent(make, sessions=sessions)


def _factory(target: Any) -> Callable[[], Any]:
    if isinstance(target, str):
        from .._refs import load_callable

        found: Callable[[], Any] = load_callable(target)
        return found
    if callable(getattr(target, "run", None)):
        return lambda: target
    if callable(target):
        return target  # type: ignore[no-any-return]
    raise ConfigurationError(
        f"serve_app cannot serve {type(target).__name__}: pass 'module:make_agent', a function "
        "that builds an Agent or a composition, an Agent, a composition, or a StandingAgent")


def _one_agent(target: Any, standing: StandingAgent) -> Any:
    """What the MCP mount serves: the agent or composition (built once by the factory; a
    composition with the turn API, so a member's pause is reported as one)."""
    from ._served import served

    made = _factory(standing._make if target is standing else target)()
    if inspect.isawaitable(made):
        raise ConfigurationError(
            "mcp=True needs a make_agent that returns an Agent, not an awaitable")
    return served(made, "make_agent()")


class _Guarded:
    """An ASGI app (the MCP mount) behind the server's ``auth``: 401 without a principal; the
    principal rides in the scope, so a memory target's calls are that principal's."""

    def __init__(self, app: Any, auth: Authenticate) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import HTTPConnection

        if scope["type"] == "websocket":  # streamable HTTP has none
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http":
            try:
                principal = await authenticate(self.auth, HTTPConnection(scope))
            except Exception as exc:
                await _error(*problem_of(exc, timeout=0))(scope, receive, send)
                return
            if principal is None:
                await _error(401, _UNAUTHENTICATED)(scope, receive, send)
                return
            from ._mcp import PRINCIPAL_SCOPE_KEY

            scope = {**scope, PRINCIPAL_SCOPE_KEY: principal}  # whose memory a call uses
        await self.app(scope, receive, send)


_UNAUTHENTICATED = ("not authenticated: send the header Authorization: Bearer <your API key>")


def _error(status: int, detail: str) -> Response:
    from starlette.responses import Response

    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return Response(ErrorOut(detail=detail).model_dump_json(), status_code=status,
                    media_type="application/json", headers=headers)


def problem_of(exc: BaseException, *, timeout: float) -> tuple[int, str]:
    """The status and one-sentence detail an error is answered with."""
    if isinstance(exc, HTTPProblem):
        return exc.status, exc.detail
    if isinstance(exc, SessionNotFound | SessionBusy | SessionStateError):
        # our own sentences: the standing agent's name its store, which may name a server
        plain = clip(str(exc.session_id), 80)
        shown = repr(plain)
        if isinstance(exc, SessionNotFound):
            return 404, (f"no session {shown} is yours on this server; start one with "
                         "POST /sessions and use the id it returns")
        if isinstance(exc, SessionBusy):
            return 409, (f"session {shown} is busy with another turn; send again when it "
                         "has finished")
        if exc.status == "paused":
            return 409, (f"session {shown} is paused waiting for an answer; continue it with "
                         f"POST /sessions/{plain}/resume before sending another message")
        return 409, (f"session {shown} is not paused, so there is nothing to resume; send it "
                     f"a message with POST /sessions/{plain}/messages")
    if isinstance(exc, TimeoutError):
        return 504, (f"the run took longer than this server's limit of {timeout:g} s and was "
                     "stopped; send a simpler message or ask the operator to raise it")
    if isinstance(exc, SessionStoreError):
        log.error("session store failed: %s", exc, exc_info=exc)
        return 503, "the session store failed; try again shortly"
    if isinstance(exc, ConfigurationError):
        return 422, clip(str(exc), 400)
    if isinstance(exc, RunError):
        run_id = getattr(getattr(exc, "run", None), "run_id", None)
        log.warning("run failed: %s", exc, exc_info=exc)
        where = f" run {run_id}'s recording" if isinstance(run_id, str) else " the server log"
        return 502, f"the agent's run failed ({type(exc).__name__}); see{where} for the cause"
    log.error("unexpected error while serving", exc_info=exc)
    return 500, "the server failed unexpectedly; its log has the details"


def _body_problem(exc: ValidationError, model: type[BaseModel]) -> HTTPProblem:
    """A one-sentence 422 naming the first wrong field (never echoing the value sent)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the body"
    message = str(first.get("msg", "is invalid")).rstrip(".")
    fields = ", ".join(model.model_fields) or "no fields"
    return HTTPProblem(422, f"the request body is not what {model.__name__} expects ({where}: "
                            f"{message}); send a JSON object with {fields}")


class _Server:
    """The routes' shared state: the standing agent, the auth hook, limits, logs and tasks."""

    def __init__(self, standing: StandingAgent, auth: Authenticate, *, max_body_bytes: int,
                 request_timeout: float, slots: RunSlots) -> None:
        self.standing = standing
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.request_timeout = request_timeout
        self.hard_timeout = request_timeout + 5
        """The run is given ``request_timeout`` (its own timeout, recorded as such); this
        bound, a little later, also stops a stage that never yields or a store that hangs."""
        self.slots = slots
        self.logs = EventLogs()
        self.tasks: set[asyncio.Task[None]] = set()
        self._openapi: bytes | None = None

    # -- plumbing ---------------------------------------------------------------------------

    def endpoint(self, op: Operation) -> Callable[[Request], Awaitable[Response]]:
        """The route of ``op``: its handler, behind auth and the error mapping."""
        handler: Handler | None = getattr(self, op.name, None)
        if handler is None:
            raise ConfigurationError(f"operation {op.name!r} has no handler")  # pragma: no cover

        async def endpoint(request: Request) -> Response:
            try:
                principal = ""
                if op.authenticated:
                    found = await authenticate(self.auth, request)
                    if found is None:
                        raise HTTPProblem(401, _UNAUTHENTICATED)
                    principal = found
                return await handler(request, principal)
            except Exception as exc:
                return _error(*problem_of(exc, timeout=self.request_timeout))

        endpoint.__name__ = op.name
        return endpoint

    async def body(self, request: Request, model: type[Any], *, optional: bool = False) -> Any:
        raw = await read_body(request, self.max_body_bytes)
        if optional and not raw.strip():
            raw = b"{}"
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            raise _body_problem(exc, model) from None

    async def drain(self) -> None:
        """Wait for the streamed runs under way (graceful shutdown), then close the store."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=self.request_timeout + 5)
        await self.standing.close()

    async def run(self, principal: str, turn: Callable[[], Awaitable[Any]]) -> Response:
        """A JSON turn: one slot, the timeout, and the reply as 200 (done) or 202 (paused)."""
        from starlette.responses import Response

        with self.slots.slot(principal):
            async with asyncio.timeout(self.hard_timeout):
                reply = await turn()
        return Response(reply.model_dump_json(), media_type="application/json",
                        status_code=202 if reply.status == "paused" else 200)

    # -- routes -----------------------------------------------------------------------------

    async def start_session(self, request: Request, principal: str) -> Response:
        from starlette.responses import Response

        await self.body(request, StartIn, optional=True)
        session = await self.standing.start(principal=principal)
        return Response(session.model_dump_json(), status_code=201,
                        media_type="application/json")

    async def list_sessions(self, request: Request, principal: str) -> Response:
        from starlette.responses import Response

        text = request.query_params.get("limit", "50")
        if not re.fullmatch(r"[0-9]{1,4}", text) or not 1 <= int(text) <= 1000:
            raise HTTPProblem(422, "limit must be a whole number from 1 to 1000")
        found = await self.standing.sessions(principal=principal, limit=int(text))
        return Response(SessionList(sessions=list(found)).model_dump_json(),
                        media_type="application/json")

    async def send_message(self, request: Request, principal: str) -> Response:
        session_id = request.path_params["session_id"]
        streamed = "text/event-stream" in request.headers.get("accept", "")
        last_id = request.headers.get("last-event-id")
        if streamed and last_id:
            found = self.logs.find(last_id, session_id=session_id, principal=principal)
            if found is None:
                raise HTTPProblem(404, "this server process keeps no events after that "
                                       "Last-Event-ID for this session; read the transcript")
            return _sse(*found)
        body: MessageIn = await self.body(request, MessageIn)
        if streamed:
            run_log = await self.stream_turn(session_id, body.message, principal)
            return _sse(run_log, 0)
        return await self.run(principal, lambda: self.standing.send(
            session_id, body.message, principal=principal, timeout=self.request_timeout))

    async def resume_session(self, request: Request, principal: str) -> Response:
        body: ResumeIn = await self.body(request, ResumeIn)
        return await self.run(principal, lambda: self.standing.resume(
            request.path_params["session_id"], _signed(body.answer, principal),
            principal=principal,
            timeout=self.request_timeout))

    async def get_transcript(self, request: Request, principal: str) -> Response:
        from starlette.responses import Response

        session_id = request.path_params["session_id"]
        entries = await self.standing.transcript(session_id, principal=principal)
        return Response(TranscriptOut(session_id=session_id, entries=list(entries))
                        .model_dump_json(), media_type="application/json")

    async def healthz(self, request: Request, principal: str) -> Response:
        from starlette.responses import Response

        return Response(HealthOut().model_dump_json(), media_type="application/json")

    async def openapi(self, request: Request) -> Response:
        from starlette.responses import Response

        if self._openapi is None:
            from importlib.metadata import PackageNotFoundError, version

            try:
                found = version("agentfootprint")
            except PackageNotFoundError:
                found = "unknown"
            self._openapi = json.dumps(openapi_document(version=found)).encode()
        return Response(self._openapi, media_type="application/json")

    # -- streamed turns ---------------------------------------------------------------------

    async def stream_turn(self, session_id: str, message: str, principal: str) -> RunLog:
        """Start a streamed turn in a task of its own; its log once the turn has begun (the
        errors before that — no such session, busy, too many runs — are raised here)."""
        self.slots.take(principal)
        run_log = self.logs.open(session_id, principal)
        begun: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._drive(run_log, message, begun))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        await begun
        return run_log

    async def _drive(self, run_log: RunLog, message: str, begun: asyncio.Future[None]) -> None:
        try:
            async with asyncio.timeout(self.hard_timeout):
                async with self.standing.send_stream(
                        run_log.session_id, message, principal=run_log.principal,
                        timeout=self.request_timeout) as events:
                    if not begun.done():
                        begun.set_result(None)
                    async for event in events:
                        run_log.append(event.type, event.model_dump_json())
                    run_log.append("reply", _reply_frame(events.reply))
        except Exception as exc:
            if not begun.done():
                begun.set_exception(exc)
            else:
                status, detail = problem_of(exc, timeout=self.request_timeout)
                run_log.append("error", json.dumps(
                    {"type": "error", "status": status, "detail": detail}))
        finally:
            run_log.close()
            self.slots.give_back(run_log.principal)

    async def websocket(self, websocket: WebSocket) -> None:
        """``/sessions/{id}/ws``: messages in, the run's events out (see the OpenAPI text)."""
        from starlette.websockets import WebSocketDisconnect

        try:
            principal = await authenticate(self.auth, websocket)
            if principal is None:
                raise HTTPProblem(401, _UNAUTHENTICATED)
            session_id = websocket.path_params["session_id"]
            await self.standing.get(session_id, principal=principal)
        except Exception as exc:
            await _deny(websocket, *problem_of(exc, timeout=self.request_timeout))
            return
        await websocket.accept()
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            try:
                text = message.get("text")
                if text is None:
                    try:
                        text = (message.get("bytes") or b"").decode()
                    except UnicodeDecodeError:
                        raise HTTPProblem(422, "send JSON text frames (UTF-8)") from None
                await self._ws_turn(websocket, session_id, principal, text)
            except (WebSocketDisconnect, OSError):  # the reader left; its run goes on
                return
            except Exception as exc:
                status, detail = problem_of(exc, timeout=self.request_timeout)
                try:
                    await websocket.send_text(json.dumps(
                        {"type": "error", "status": status, "detail": detail}))
                except (WebSocketDisconnect, OSError, RuntimeError):
                    return

    async def _ws_turn(self, websocket: WebSocket, session_id: str, principal: str,
                       text: str) -> None:
        if len(text.encode()) > self.max_body_bytes:
            raise HTTPProblem(413, f"the message is larger than this server's limit of "
                                   f"{self.max_body_bytes:,} bytes; send a shorter one")
        try:
            sent = json.loads(text)
        except ValueError:
            sent = None
        if isinstance(sent, dict) and set(sent) == {"resume"}:
            with self.slots.slot(principal):
                async with asyncio.timeout(self.hard_timeout):
                    reply = await self.standing.resume(session_id,
                                                       _signed(sent["resume"], principal),
                                                       principal=principal,
                                                       timeout=self.request_timeout)
            await websocket.send_text(_reply_frame(reply))
            return
        try:
            body = MessageIn.model_validate(sent)
        except ValidationError as exc:
            raise HTTPProblem(422, "send a JSON object {\"message\": \"...\"} or "
                                   "{\"resume\": <answer>}"
                                   f" ({_body_problem(exc, MessageIn).detail})") from None
        run_log = await self.stream_turn(session_id, body.message, principal)
        async for _, _, data in run_log.follow(0):
            await websocket.send_text(data)


async def _deny(websocket: WebSocket, status: int, detail: str) -> None:
    """Refuse a WebSocket before accepting it: the HTTP status when the server can send one."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(_error(status, detail))
    else:
        await websocket.close(code=4000 + status, reason=detail[:120])


def _signed(answer: Any, principal: str) -> Any:
    """A check-in verdict signed by the caller: its ``by`` is the authenticated principal
    (whatever the body said), so the kept receipt names who really answered."""
    if isinstance(answer, dict) and "check_in" in answer:
        return {**answer, "by": principal}
    return answer


def _reply_frame(reply: Any) -> str:
    """A turn's ``Reply`` as the last event of its stream: ``{"type": "reply", ...}``."""
    return json.dumps({"type": "reply", **reply.model_dump(mode="json")})


def _sse(run_log: RunLog, after: int) -> Response:
    """The log's events after ``after`` as Server-Sent Events, following the run to its end."""
    from starlette.responses import StreamingResponse

    async def frames() -> AsyncIterator[str]:
        async for event_id, name, data in run_log.follow(after):
            yield f"id: {event_id}\nevent: {name}\ndata: {data}\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

