"""Sessions: what a standing agent keeps between turns, and the store port that keeps it.

A session is one conversation of one principal with one agent. Its row holds the owner (written
once, when the session is made: no call of any store changes it), the turn count, the status
(``idle`` or ``paused``; ``running`` is a live claim, not a stored status), the checkpoint the next
turn continues from (``RunResult.checkpoint`` as JSON text: a finished turn's conversation, or a
paused run's engine checkpoint), and a claim: which turn holds the session and until when.

A claim is what makes one conversation one writer across processes: ``claim`` succeeds only
when nobody holds the session or the holder's lease has run out (a crashed holder's claim
expires), as one atomic step in the store (a conditional UPDATE, a Lua script, a row lock);
``release`` writes the turn's outcome only while the releaser still holds the claim. The
transcript (user and assistant lines per turn) is appended in the same step as the outcome.

Times are unix seconds (floats) given by the caller, so one clock decides lease and retention.
This module is the port and the pure rules every store shares; it does no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..errors import ConfigurationError, SessionNotFound, SessionStoreError
from ..runs._lifecycle import RUN_ID_PATTERN

__all__ = ["MAX_PRINCIPAL_CHARS", "MAX_SESSION_ID_CHARS", "NamedStore", "Reply", "Session",
           "SessionRecord", "SessionStore", "SessionUpdate", "TranscriptEntry",
           "check_principal", "check_session_id", "parse_checkpoint", "taken"]

MAX_SESSION_ID_CHARS: Final = 64
"""A session id is a run id (``runs/_lifecycle.RUN_ID_PATTERN``) of at most this many
characters, so ``{session}.{turn}.{nonce}``, the id of each of its runs, is a run id too."""

MAX_PRINCIPAL_CHARS: Final = 256
"""The longest principal any store accepts (the memory identity's limit)."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

Status = Literal["idle", "running", "paused"]
StoredStatus = Literal["idle", "paused"]


def check_session_id(session_id: object) -> str:
    """``session_id`` when it can name a session; else ``SessionNotFound`` (an id that cannot
    exist names no session), raised before any store is touched."""
    if (isinstance(session_id, str) and len(session_id) <= MAX_SESSION_ID_CHARS
            and RUN_ID_PATTERN.fullmatch(session_id)):
        return session_id
    shown = repr(session_id) if len(repr(session_id)) <= 80 else repr(session_id)[:77] + "..."
    raise SessionNotFound(
        f"no session {shown}: a session id is 1-{MAX_SESSION_ID_CHARS} letters, digits, '_', "
        "'.', ':' or '-' starting with a letter or digit; use the id start() returned",
        session_id=session_id if isinstance(session_id, str) else repr(session_id))


def check_principal(principal: object) -> str:
    """``principal`` when it can own a session: a non-empty str the stores can hold."""
    if (not isinstance(principal, str) or not principal.strip()
            or len(principal) > MAX_PRINCIPAL_CHARS or _UNSTORABLE.search(principal)):
        kind = type(principal).__name__
        raise ConfigurationError(
            f"principal= must be a non-empty str of at most {MAX_PRINCIPAL_CHARS} characters "
            f"without NUL (got a {kind}); pass who is calling, e.g. principal='alice'")
    return principal


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


class Session(BaseModel):
    """One conversation of one principal with a standing agent, as its store keeps it."""

    model_config = ConfigDict(frozen=True)

    id: str
    owner: str
    """The principal who started it; no call changes it."""
    agent: str
    """The agent's name."""
    created_at: datetime
    updated_at: datetime
    """When a turn last finished (or the session was made); retention counts from here."""
    turns: int
    """The number of the latest turn begun (a paused turn included); 0 before the first."""
    status: Status
    """``running`` while a turn holds the session, ``paused`` while a run waits for
    ``resume``, else ``idle``."""
    pause: dict[str, Any] | None = None
    """For a paused session: what the run waits for (as in ``Reply.pause``)."""


class Reply(BaseModel):
    """The outcome of one ``send`` or ``resume``."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    run_id: str
    turn: int
    status: Literal["done", "paused"]
    answer: str | None
    """The final answer; None while paused."""
    output: Any = None
    """The answer as the agent's ``output_type``; None without one, or while paused."""
    pause: dict[str, Any] | None = None
    """For a paused run: ``kind`` (``check_in``, ``ask``, ``pause``), ``tool``, and
    ``question`` (ask), ``evidence`` (check-in) or ``data`` (pause)."""
    usage: dict[str, Any] = {}
    """This run's LLM calls, tokens and cost (``RunResult.usage`` summed; for a resumed run,
    its calls before the pause too)."""


class TranscriptEntry(BaseModel):
    """One line of a session's transcript: what was said in a turn, as recorded (redacted
    kinds read ``[REDACTED]``, as in the run's recording)."""

    model_config = ConfigDict(frozen=True)

    turn: int
    role: Literal["user", "assistant"]
    content: str
    run_id: str


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session's row as a store holds it (what ``Session`` is built from)."""

    id: str
    owner: str
    agent: str
    created_at: float
    updated_at: float
    turns: int = 0
    status: StoredStatus = "idle"
    checkpoint: str | None = None
    """``RunResult.checkpoint`` of the latest turn as JSON text; None before the first."""
    holder: str | None = None
    """The claim's holder (a token per turn), None when free."""
    lease_until: float = 0.0
    """When the holder's claim lapses unless renewed."""

    def held(self, now: float) -> bool:
        """Whether a turn holds the session at ``now``."""
        return self.holder is not None and self.lease_until >= now

    def session(self, now: float, pause: dict[str, Any] | None = None) -> Session:
        return Session(id=self.id, owner=self.owner, agent=self.agent,
                       created_at=_when(self.created_at), updated_at=_when(self.updated_at),
                       turns=self.turns, status="running" if self.held(now) else self.status,
                       pause=pause if self.status == "paused" else None)


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """A turn's outcome, written by ``release`` while the claim is still held."""

    turns: int
    status: StoredStatus
    checkpoint: str
    updated_at: float
    entries: Sequence[TranscriptEntry] = field(default_factory=tuple)


def check_record(record: SessionRecord, store: str) -> SessionRecord:
    """``record`` when its fields are what a store wrote; else an error naming the session
    and the store (a row someone altered is never replaced with a fresh session)."""
    if (record.status not in ("idle", "paused") or record.turns < 0
            or (record.status == "paused" and record.checkpoint is None)):
        raise SessionStoreError(
            f"session {record.id!r} in {store} is unreadable (status {record.status!r}, turns "
            f"{record.turns!r}); it was altered — the row is left as it is", store=store)
    return record


def taken(session_id: str, store: str) -> SessionStoreError:
    """The error for creating a session under an id the store already holds."""
    return SessionStoreError(
        f"session {session_id!r} already exists in {store}; a session id names one session "
        "for good — make the new one with its own id", store=store)


def parse_checkpoint(record: SessionRecord, store: str) -> dict[str, Any] | None:
    """The session's checkpoint as a dict (None before the first turn); unreadable text is an
    error naming the session and the store."""
    if record.checkpoint is None:
        return None
    try:
        value = json.loads(record.checkpoint)
    except ValueError as exc:
        raise SessionStoreError(
            f"the checkpoint of session {record.id!r} in {store} is unreadable ({exc}); it was "
            "altered — the row is left as it is", store=store) from exc
    if not isinstance(value, dict):
        raise SessionStoreError(
            f"the checkpoint of session {record.id!r} in {store} is not a JSON object; it was "
            "altered — the row is left as it is", store=store)
    return value


def parse_entry(session_id: str, body: str, store: str) -> TranscriptEntry:
    """A stored transcript line; unreadable, an error naming the session and the store."""
    try:
        return TranscriptEntry.model_validate_json(body)
    except ValueError as exc:
        raise SessionStoreError(
            f"a transcript line of session {session_id!r} in {store} is unreadable; it was "
            "altered — the row is left as it is", store=store) from exc


class NamedStore:
    """What the built-in stores share: their name (for errors, never a password) as repr."""

    _name: str

    def __repr__(self) -> str:
        return f"<{self._name}>"

    @property
    def name(self) -> str:
        return self._name


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live: SQLite (``sqlite_sessions``), Redis, PostgreSQL, or your own.

    Every method is one atomic step in the store, safe for many processes at once. A store
    never changes a session's owner, raises its own errors as ``SessionStoreError`` naming
    itself, and never answers a row it cannot read with a fresh one.
    """

    @property
    def name(self) -> str:
        """The store as errors name it (never a password)."""
        ...

    async def create(self, record: SessionRecord) -> None:
        """Add a new session; an id already present is refused (``SessionStoreError``)."""
        ...

    async def get(self, session_id: str) -> SessionRecord | None:
        """The session's row, or None."""
        ...

    async def claim(self, session_id: str, holder: str, *, now: float, until: float) -> bool:
        """Take the session for ``holder`` until ``until`` when it is free or its claim lapsed
        before ``now``; False when someone else holds it or it does not exist."""
        ...

    async def renew(self, session_id: str, holder: str, *, until: float) -> bool:
        """Extend ``holder``'s claim; False when ``holder`` no longer holds it."""
        ...

    async def release(self, session_id: str, holder: str,
                      update: SessionUpdate | None = None) -> bool:
        """Free the session, first writing ``update`` (and appending its transcript lines)
        when given; all or nothing, and only while ``holder`` holds it (else False)."""
        ...

    async def transcript(self, session_id: str) -> list[TranscriptEntry]:
        """The session's transcript lines in the order they were written."""
        ...

    async def list(self, owner: str, *, limit: int) -> list[SessionRecord]:
        """``owner``'s sessions, most recently updated first (ties: id descending)."""
        ...

    async def delete(self, session_id: str) -> None:
        """Remove the session and its transcript (nothing when absent)."""
        ...

    async def purge(self, *, before: float, now: float) -> int:
        """Delete every session last updated before ``before`` that no live claim holds at
        ``now``; how many were deleted."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections (those it opened)."""
        ...
