"""What crosses the wire of ``serve_app``: the request bodies and replies, as Pydantic models.

The routes validate bodies with these models and build replies from them (with the standing
agent's own ``Session``, ``Reply`` and ``TranscriptEntry``), and the OpenAPI
document (``_openapi.py``) is generated from the very same classes, so the document cannot
drift from what is served. Bodies forbid unknown fields; replies allow none either.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._sessions import Session, TranscriptEntry

__all__ = [
    "ErrorOut",
    "HealthOut",
    "MessageIn",
    "ResumeIn",
    "SessionList",
    "StartIn",
    "TranscriptOut",
]

MAX_MESSAGE_CHARS = 100_000
"""The longest message a request may carry (the body limit also applies)."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StartIn(_Wire):
    """``POST /sessions``: an empty object starts a conversation owned by the caller."""


class MessageIn(_Wire):
    """``POST /sessions/{id}/messages``: the next message of the conversation."""

    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS,
                         description="What the person says, in full.")


class ResumeIn(_Wire):
    """``POST /sessions/{id}/resume``: the person's answer to a paused run."""

    answer: Any = Field(description=(
        "The answer the pause asked for: for a check-in "
        "{\"check_in\": \"approved\"} (or \"declined\", with a note; its \"by\" is always "
        "set to the authenticated caller); for a question, the reply."))


class SessionList(_Wire):
    """``GET /sessions``: the caller's sessions, most recent first."""

    sessions: list[Session]


class TranscriptOut(_Wire):
    """``GET /sessions/{id}/transcript``: the conversation so far, oldest line first."""

    session_id: str
    entries: list[TranscriptEntry]


class HealthOut(_Wire):
    """``GET /healthz``: the process is up and serving."""

    status: Literal["ok"] = "ok"


class ErrorOut(_Wire):
    """Every error reply: one sentence naming what was wrong and the fix."""

    detail: str
