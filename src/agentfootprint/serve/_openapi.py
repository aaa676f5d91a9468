"""The route table of ``serve_app`` and the OpenAPI document generated from it.

``OPERATIONS`` lists every HTTP route: method, path, its body model, its replies by status and
the errors it may answer. ``_app.py`` builds its Starlette routes from this same table (a
route without a handler, or a handler without a row, fails at construction), and
``openapi_document()`` renders it with the Pydantic models' own JSON Schemas, so the document
says exactly what is served. The WebSocket door is described in the document's
``info.description`` (OpenAPI has no WebSocket operations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ._sessions import Reply, Session
from ._wire import (
    ErrorOut,
    HealthOut,
    MessageIn,
    ResumeIn,
    SessionList,
    StartIn,
    TranscriptOut,
)

__all__ = ["ERROR_TEXT", "OPERATIONS", "Operation", "openapi_document"]

ERROR_TEXT: dict[int, str] = {
    401: "Not authenticated: send Authorization: Bearer <API key>.",
    404: "No such session for you (also when it belongs to someone else), or an SSE event id "
         "this process no longer keeps.",
    409: "The session is busy with another turn, or not in the state the call needs "
         "(paused: resume it; not paused: send to it).",
    413: "The request body is over the server's size limit.",
    422: "The body is not JSON of the expected shape; the detail names the field.",
    429: "You have as many runs under way as this server allows per caller.",
    502: "The agent's run failed (its recording, if kept, names the cause).",
    503: "The session store failed; try again.",
    504: "The run took longer than the server's per-request timeout.",
}
"""What each error status means here (every error body is ``ErrorOut``)."""

_RUN_ERRORS = (401, 404, 409, 413, 422, 429, 502, 503, 504)


@dataclass(frozen=True, slots=True)
class Operation:
    """One HTTP route as served and as documented."""

    name: str
    """The handler's name in ``_app.py`` and the document's ``operationId``."""
    method: str
    path: str
    summary: str
    replies: dict[int, type[BaseModel]]
    errors: tuple[int, ...] = ()
    body: type[BaseModel] | None = None
    body_optional: bool = False
    authenticated: bool = True
    streams: bool = False
    """Also answers ``text/event-stream`` (when the request accepts it)."""
    query: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Query parameters: ``(name, JSON Schema)``."""


OPERATIONS: tuple[Operation, ...] = (
    Operation("start_session", "POST", "/sessions", "Start a conversation you own.",
              {201: Session}, (401, 413, 422, 503), body=StartIn, body_optional=True),
    Operation("list_sessions", "GET", "/sessions", "Your sessions, most recent first.",
              {200: SessionList}, (401, 422, 503),
              query=(("limit", {"type": "integer", "minimum": 1, "maximum": 1000,
                                "default": 50}),)),
    Operation("send_message", "POST", "/sessions/{session_id}/messages",
              "Send the next message: the reply (200), a paused run (202), or with "
              "Accept: text/event-stream the run's events as Server-Sent Events (each with an "
              "id; reconnect with Last-Event-ID to receive the events after it).",
              {200: Reply, 202: Reply}, _RUN_ERRORS, body=MessageIn, streams=True),
    Operation("resume_session", "POST", "/sessions/{session_id}/resume",
              "Answer a paused run (a check-in's verdict, a question's reply) and continue it.",
              {200: Reply, 202: Reply}, _RUN_ERRORS, body=ResumeIn),
    Operation("get_transcript", "GET", "/sessions/{session_id}/transcript",
              "The conversation so far, oldest turn first.",
              {200: TranscriptOut}, (401, 404, 503)),
    Operation("healthz", "GET", "/healthz", "The process is up.", {200: HealthOut},
              authenticated=False),
)
"""Every HTTP route (``GET /openapi.json`` serves the document itself)."""

_WEBSOCKET = (
    "WebSocket door: `/sessions/{session_id}/ws` (authenticated like every route). Send "
    "`{\"message\": \"...\"}` and receive the run's events as JSON text frames (as the SSE "
    "stream sends them: the run's `result`, then the turn's Reply as "
    "`{\"type\": \"reply\", ...}`, last); send `{\"resume\": <answer>}` to answer a paused "
    "run and receive its `{\"type\": \"reply\", ...}`. An error is "
    "`{\"type\": \"error\", \"status\": <HTTP status>, \"detail\": \"...\"}` and the "
    "connection stays open.")


def openapi_document(*, title: str = "agentfootprint", version: str = "0") -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``OPERATIONS``."""
    models = sorted({m for op in OPERATIONS for m in (*op.replies.values(), op.body)
                     if m is not None} | {ErrorOut}, key=lambda m: m.__name__)
    refs, defs = models_json_schema(
        [(m, "validation" if m in _BODIES else "serialization") for m in models],
        ref_template="#/components/schemas/{model}")
    ref = {m: refs[(m, "validation" if m in _BODIES else "serialization")] for m in models}
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, ref)
    paths["/openapi.json"] = {"get": {
        "operationId": "openapi", "summary": "This document.", "security": [],
        "responses": {"200": {"description": "The OpenAPI document.",
                              "content": {"application/json": {"schema": {"type": "object"}}}}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": _WEBSOCKET},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {}),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }


_BODIES = frozenset(op.body for op in OPERATIONS if op.body is not None)


def _operation(op: Operation, ref: dict[type[BaseModel], dict[str, Any]]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, model in op.replies.items():
        content: dict[str, Any] = {"application/json": {"schema": ref[model]}}
        if op.streams and status == 200:
            content["text/event-stream"] = {"schema": {"type": "string"}}
        responses[str(status)] = {"description": model.__doc__.split("\n")[0]
                                  if model.__doc__ else model.__name__, "content": content}
    for status in op.errors:
        responses[str(status)] = {"description": ERROR_TEXT[status],
                                  "content": {"application/json": {"schema": ref[ErrorOut]}}}
    found: dict[str, Any] = {"operationId": op.name, "summary": op.summary,
                             "responses": responses}
    if not op.authenticated:
        found["security"] = []
    parameters: list[dict[str, Any]] = []
    if "{session_id}" in op.path:
        parameters.append({"name": "session_id", "in": "path", "required": True,
                           "schema": {"type": "string"}})
    for name, schema in op.query:
        parameters.append({"name": name, "in": "query", "required": False, "schema": schema})
    if op.streams:
        parameters.append({"name": "Last-Event-ID", "in": "header", "required": False,
                           "description": "Resume an SSE stream after this event id (the "
                                          "message body is then not sent again).",
                           "schema": {"type": "string"}})
    if parameters:
        found["parameters"] = parameters
    if op.body is not None:
        found["requestBody"] = {"required": not op.body_optional, "content": {
            "application/json": {"schema": ref[op.body]}}}
    return found
