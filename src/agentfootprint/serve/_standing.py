"""``standing_agent``: store-and-continue for any host, the code path ``agentfootprint serve`` uses.

    standing = standing_agent(make_agent, sessions=sqlite_sessions("sessions.db"))
    s = await standing.start(principal="alice")
    reply = await standing.send(s.id, "Book a table for two", principal="alice")
    reply = await standing.resume(s.id, check_in_approved(by="alice"), principal="alice")

Each turn builds a fresh agent (``make_agent()``; an ``Agent`` instance is used as it is), claims
the session in its store (so one turn at a time, across every process sharing the store:
a second one raises ``SessionBusy``), continues from the checkpoint the previous turn left
(``run(continue_from=...)``, so turn numbers go on 1, 2, 3 whichever process ran the turn before),
and writes the outcome and the turn's transcript lines as it releases the claim. An agent with
memory keeps the conversation in its memory store instead: its turns run under the identity
``MemoryIdentity(conversation_id=session id, principal=owner)`` and take their number from that
store (``memory/_turn.py``). Each run's id is ``{session}.{turn}.{nonce}``, so the run store names
the session and the turn. A paused run's checkpoint is the session's (status ``paused``) and
``resume`` continues it from any process; ``send`` refuses until then. A composition
(``Sequence(...)``, a pattern) is served the same way through ``_served.ServedComposition``: its
turns run the team on each message, a member's pause is the session's, resumed likewise; its
members with memory remember under the same identity a served agent would.

Ownership: the principal who started a session owns it, for good; a session of someone else
answers every call exactly as a session that does not exist (``SessionNotFound``). Retention: a
session no turn touched for longer than ``retention`` is deleted when next read or listed, or by
``purge()``. A claim lapses ``lease`` after its last renewal (renewed while the turn runs), so a
crashed process never holds a session for good.

What the store keeps respects the agent's redaction as the run store does: the checkpoint is
``RunResult.checkpoint`` (masked as recorded; a paused run's resume state is sealed under
``RedactionPolicy(seal_key=...)``, else plain JSON, as documented there) and transcript lines are
masked by the same policy and the run's learned secrets.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from ..agent._agent import Agent, RunResult
from ..errors import (
    ConfigurationError,
    SessionBusy,
    SessionNotFound,
    SessionStateError,
)
from ..flow._redact import REDACTED
from ..flow._run import run_sync
from ..runs import trace
from ._served import ServedComposition, remembers, served
from ._sessions import (
    Reply,
    Session,
    SessionRecord,
    SessionStore,
    SessionUpdate,
    TranscriptEntry,
    check_principal,
    check_session_id,
    parse_checkpoint,
)

if TYPE_CHECKING:
    from ..memory._identity import MemoryIdentity

__all__ = ["StandingAgent", "standing_agent"]

DEFAULT_LEASE: Final = timedelta(seconds=60)
"""How long a turn's claim holds without renewal (renewed every third of it while it runs)."""

_log = logging.getLogger("agentfootprint.serve")

MAX_LIST: Final = 1000
"""The most sessions one ``sessions()`` call returns."""

AgentSource = Agent | Any | Callable[[], Any]
"""An ``Agent``, a composition (``Sequence(...)``, a pattern), or a function building either."""
Role = Literal["user", "assistant"]


def standing_agent(make_agent: AgentSource, *, sessions: SessionStore | None = None,
                   retention: timedelta | None = None, lease: timedelta = DEFAULT_LEASE,
                   clock: Callable[[], float] = time.time) -> StandingAgent:
    """An agent that keeps conversations in ``sessions`` (default: ``sqlite_sessions()``, the
    file ``.agentfootprint/sessions.db`` beside the run store's ``runs.db``).

    ``make_agent`` is called for every turn (a zero-argument function returning an ``Agent``
    or a composition, or an awaitable of one); an ``Agent`` or a composition is used as it is
    (a composition's turns: see ``_served.py``). ``retention`` deletes sessions
    untouched for longer (None: kept until deleted). ``clock`` gives unix seconds.
    """
    return StandingAgent(make_agent, sessions=sessions, retention=retention, lease=lease,
                         clock=clock)


class StandingAgent:
    """Conversations of one agent kept in a session store; see the module docstring."""

    def __init__(self, make_agent: AgentSource, *, sessions: SessionStore | None = None,
                 retention: timedelta | None = None, lease: timedelta = DEFAULT_LEASE,
                 clock: Callable[[], float] = time.time) -> None:
        from ..compose._base import Composition

        if isinstance(make_agent, Composition):
            make_agent = ServedComposition(make_agent)
        if not isinstance(make_agent, Agent | ServedComposition) and not callable(make_agent):
            raise ConfigurationError(
                f"standing_agent(make_agent={make_agent!r}) needs an Agent or a function that "
                "returns one (or a composition), e.g. standing_agent(lambda: Agent(...))")
        if retention is not None and (not isinstance(retention, timedelta)
                                      or retention <= timedelta(0)):
            raise ConfigurationError(
                f"retention={retention!r} must be a positive timedelta (e.g. "
                "timedelta(days=30)) or None to keep sessions until deleted")
        if not isinstance(lease, timedelta) or lease <= timedelta(0):
            raise ConfigurationError(
                f"lease={lease!r} must be a positive timedelta, e.g. timedelta(seconds=60)")
        if sessions is None:
            from ._sessions_sqlite import sqlite_sessions

            sessions = sqlite_sessions()
        elif not isinstance(sessions, SessionStore):
            raise ConfigurationError(
                f"sessions={sessions!r} is not a session store; pass sqlite_sessions(path), "
                "redis_sessions(url) or postgres_sessions(url)")
        self._make = make_agent
        self.store: SessionStore = sessions
        self.retention = retention
        self.lease = lease.total_seconds()
        self._clock = clock
        self._agent_name: str | None = None

    def __repr__(self) -> str:
        return f"<StandingAgent {self._agent_name or '?'!r} sessions={self.store.name}>"

    # -- the agent ---------------------------------------------------------------------------

    async def _agent(self) -> Agent | ServedComposition:
        if isinstance(self._make, Agent | ServedComposition):
            agent = self._make
        else:
            made = self._make()
            agent = served(await made if inspect.isawaitable(made) else made, "make_agent()")
        self._agent_name = agent.name
        return agent

    def check(self, where: str | None = None) -> str:
        """Build the target once, as a turn would, and check it can be served (a server calls
        this at startup, so a bad factory fails there, not on every request); its name. The
        built instance is dropped: the factory is still called afresh for every turn.
        ``where`` names the target in the error (default: the factory's name)."""
        from ._served import check_target

        if isinstance(self._make, Agent | ServedComposition):
            self._agent_name = self._make.name
            return self._agent_name
        label = where or f"{getattr(self._make, '__qualname__', repr(self._make))}()"
        self._agent_name = check_target(self._make, label)
        return self._agent_name

    # -- reading sessions --------------------------------------------------------------------

    def _not_found(self, session_id: str) -> SessionNotFound:
        return SessionNotFound(
            f"no session {session_id!r} in {self.store.name}; start one with "
            "start(principal=...) and use the id it returns", session_id=session_id)

    def _expired(self, record: SessionRecord, now: float) -> bool:
        return (self.retention is not None and not record.held(now)
                and record.updated_at < now - self.retention.total_seconds())

    async def _owned(self, session_id: object, principal: object) -> SessionRecord:
        """The session's row when ``principal`` owns it (else as if it did not exist)."""
        checked = check_session_id(session_id)
        who = check_principal(principal)
        record = await self.store.get(checked)
        if record is not None and self._expired(record, self._clock()):
            await self.purge()
            record = await self.store.get(checked)
        if record is None or record.owner != who:
            raise self._not_found(checked)
        return record

    def _session(self, record: SessionRecord) -> Session:
        pause = None
        if record.status == "paused":
            checkpoint = parse_checkpoint(record, self.store.name) or {}
            pause = pause_view(checkpoint.get("pause"))
        return record.session(self._clock(), pause)

    async def start(self, *, principal: str) -> Session:
        """A new, empty session owned by ``principal``."""
        who = check_principal(principal)
        name = self._agent_name or (await self._agent()).name
        now = self._clock()
        record = SessionRecord(id=f"s{uuid.uuid4().hex}", owner=who, agent=name,
                               created_at=now, updated_at=now)
        await self.store.create(record)
        return self._session(record)

    async def get(self, session_id: str, *, principal: str) -> Session:
        """The session, when ``principal`` owns it."""
        return self._session(await self._owned(session_id, principal))

    async def transcript(self, session_id: str, *, principal: str) -> list[TranscriptEntry]:
        """What was said in the session, turn by turn, as recorded."""
        record = await self._owned(session_id, principal)
        return await self.store.transcript(record.id)

    async def sessions(self, *, principal: str, limit: int = 50) -> list[Session]:
        """``principal``'s sessions, most recently updated first."""
        who = check_principal(principal)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise ConfigurationError(f"limit={limit!r} must be an int from 1 to {MAX_LIST}")
        if self.retention is not None:
            await self.purge()
        return [self._session(r) for r in await self.store.list(who, limit=limit)]

    async def delete(self, session_id: str, *, principal: str) -> None:
        """Delete the session and its transcript (refused while a turn holds it)."""
        record = await self._owned(session_id, principal)
        claim = await _Claim.take(self, record.id)
        try:
            await self.store.delete(record.id)
        finally:
            claim.stop()

    async def purge(self) -> int:
        """Delete the sessions untouched for longer than ``retention``; how many (0 without
        a retention)."""
        if self.retention is None:
            return 0
        now = self._clock()
        return await self.store.purge(before=now - self.retention.total_seconds(), now=now)

    async def close(self) -> None:
        """Close the session store."""
        await self.store.aclose()

    # -- turns -------------------------------------------------------------------------------

    async def _begin(self, session_id: str, principal: str, *, paused: bool
                     ) -> tuple[_Claim, SessionRecord, dict[str, Any] | None]:
        """Claim the session for a turn; its row (read under the claim) and checkpoint."""
        record = await self._owned(session_id, principal)
        claim = await _Claim.take(self, record.id)
        try:
            fresh = await self.store.get(record.id)
            if fresh is None:
                raise self._not_found(record.id)
            if paused and fresh.status != "paused":
                raise SessionStateError(
                    f"session {record.id!r} is not paused, so there is nothing to resume; "
                    "send() it a message instead", session_id=record.id, status=fresh.status)
            if not paused and fresh.status == "paused":
                raise SessionStateError(
                    f"session {record.id!r} is paused waiting for an answer; continue it with "
                    f"resume({record.id!r}, answer) before sending another message",
                    session_id=record.id, status=fresh.status)
            return claim, fresh, parse_checkpoint(fresh, self.store.name)
        except BaseException as exc:
            await claim.end(None, exc)
            raise

    def _options(self, agent: Agent | ServedComposition, record: SessionRecord,
                 checkpoint: dict[str, Any] | None, deps: Any,
                 timeout: float | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "run_id": f"{record.id}.{record.turns + 1}.{uuid.uuid4().hex[:8]}",
            "deps": deps, "timeout": timeout}
        if remembers(agent):  # the memory store holds the conversation and its turns
            options["identity"] = session_identity(record)
        if isinstance(agent, ServedComposition):  # no conversation of its own: the message
            options["turn"] = record.turns + 1
        elif checkpoint is not None and "identity" not in options:
            if record.turns and not checkpoint.get("history"):
                raise ConfigurationError(
                    f"session {record.id!r} cannot be continued: the checkpoint of its turn "
                    f"{record.turns} holds no conversation (the agent's redaction masks "
                    "'history' whole); redact by kind (RedactionPolicy(kinds=...)) or give the "
                    "agent a memory (define_memory(...)) to keep its conversations")
            options["continue_from"] = checkpoint
        return options

    async def send(self, session_id: str, message: str, *, principal: str, deps: Any = None,
                   timeout: float | None = None) -> Reply:
        """Run the session's next turn with ``message``; its reply (``paused`` when a tool
        asked a person: answer it with ``resume``)."""
        claim, record, checkpoint = await self._begin(session_id, principal, paused=False)
        try:
            agent = await self._agent()
            result = await agent.run(message, **self._options(agent, record, checkpoint,
                                                              deps, timeout))
        except BaseException as exc:
            await claim.end(None, exc)
            raise
        return await self._settle(claim, record, result, message)

    def send_stream(self, session_id: str, message: str, *, principal: str, deps: Any = None,
                    timeout: float | None = None, max_buffered: int = 256) -> SessionStream:
        """``send`` as the run's event stream (``agent.run_stream``'s events, ``RunFinished``
        last); the session is updated when the run finishes, before the stream ends:
        ``async with standing.send_stream(...) as events: async for event in events``."""
        return SessionStream(self, session_id, message, principal=principal, deps=deps,
                             timeout=timeout, max_buffered=max_buffered)

    async def resume(self, session_id: str, answer: object = None, *, principal: str,
                     deps: Any = None, timeout: float | None = None) -> Reply:
        """Continue the session's paused run with the person's ``answer`` (a check-in verdict,
        a reply), in this process or any other sharing the store."""
        claim, record, checkpoint = await self._begin(session_id, principal, paused=True)
        try:
            agent = await self._agent()
            if isinstance(agent, ServedComposition) and agent.remembers:
                result = await agent.resume(checkpoint or {}, answer, deps=deps,
                                            timeout=timeout, identity=session_identity(record))
            else:
                result = await agent.resume(checkpoint or {}, answer, deps=deps,
                                            timeout=timeout)
        except BaseException as exc:
            await claim.end(None, exc)
            raise
        return await self._settle(claim, record, result, None)

    async def _settle(self, claim: _Claim, record: SessionRecord, result: RunResult,
                      message: str | None) -> Reply:
        """Write the turn's outcome and transcript lines as the claim is released."""
        turn = max(result.turn, record.turns + (message is not None))
        try:
            lines: list[tuple[Role, str]] = []
            if message is not None:
                lines.append(("user", message))
            if not result.paused:
                lines.append(("assistant", result.content))
            entries = [TranscriptEntry(turn=turn, role=role, content=text, run_id=result.run_id)
                       for role, text in recorded_lines(result, lines)]
            update = SessionUpdate(turns=turn, status="paused" if result.paused else "idle",
                                   checkpoint=json.dumps(result.checkpoint),
                                   updated_at=self._clock(), entries=entries)
        except BaseException as exc:
            await claim.end(None, exc)
            raise
        await claim.end(update)
        return reply_of(record.id, result, turn)

    # -- sync twins --------------------------------------------------------------------------

    def start_sync(self, *, principal: str) -> Session:
        return run_sync(self.start(principal=principal))

    def get_sync(self, session_id: str, *, principal: str) -> Session:
        return run_sync(self.get(session_id, principal=principal))

    def send_sync(self, session_id: str, message: str, **options: Any) -> Reply:
        return run_sync(self.send(session_id, message, **options))

    def resume_sync(self, session_id: str, answer: object = None, **options: Any) -> Reply:
        return run_sync(self.resume(session_id, answer, **options))

    def transcript_sync(self, session_id: str, *, principal: str) -> list[TranscriptEntry]:
        return run_sync(self.transcript(session_id, principal=principal))

    def sessions_sync(self, *, principal: str, limit: int = 50) -> list[Session]:
        return run_sync(self.sessions(principal=principal, limit=limit))

    def purge_sync(self) -> int:
        return run_sync(self.purge())

    def close_sync(self) -> None:
        run_sync(self.close())


class _Claim:
    """One turn's hold on a session: taken atomically in the store, renewed while it runs."""

    def __init__(self, standing: StandingAgent, session_id: str, holder: str) -> None:
        self.standing = standing
        self.session_id = session_id
        self.holder = holder
        self.renew_error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def take(cls, standing: StandingAgent, session_id: str) -> _Claim:
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        now = standing._clock()
        store = standing.store
        if not await store.claim(session_id, holder, now=now, until=now + standing.lease):
            if await store.get(session_id) is None:
                raise standing._not_found(session_id)
            raise SessionBusy(
                f"session {session_id!r} is busy: another turn of it is under way (in this "
                "process or another sharing the store); send again when it has finished",
                session_id=session_id)
        claim = cls(standing, session_id, holder)
        claim._task = asyncio.get_running_loop().create_task(claim._renew())
        return claim

    async def _renew(self) -> None:
        standing = self.standing
        every = standing.lease / 3
        while True:
            await asyncio.sleep(every)
            try:
                until = standing._clock() + standing.lease
                if not await standing.store.renew(self.session_id, self.holder, until=until):
                    return
            except Exception as exc:  # logged now, and said again if the claim is lost
                self.renew_error = exc
                _log.warning("renewing the claim on session %r in %s failed: %r; retrying in "
                             "%g s (the claim lapses %g s after its last renewal)",
                             self.session_id, standing.store.name, exc, every, standing.lease)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def end(self, update: SessionUpdate | None, error: BaseException | None = None
                  ) -> None:
        """Release the claim, writing ``update``. With ``error`` (the turn failed) the session
        is left as it was and a failed release is noted on ``error`` instead of hiding it."""
        self.stop()
        store = self.standing.store
        try:
            held = await store.release(self.session_id, self.holder, update)
        except Exception as exc:
            if error is None:
                raise
            error.add_note(f"{store.name} could not release session {self.session_id!r}: "
                           f"{exc!r}; its claim lapses after the lease")
            return
        if held or error is not None:
            return
        lost = SessionBusy(
            f"session {self.session_id!r} was taken over while this turn ran: its claim lapsed "
            f"(lease {self.standing.lease:g} s without renewal), so this turn's outcome was not "
            "stored; give the store a longer lease or keep it reachable",
            session_id=self.session_id)
        if self.renew_error is not None:
            lost.add_note(f"renewing the claim failed: {self.renew_error!r}")
        raise lost


class SessionStream:
    """One streamed turn: ``async with`` claims the session and starts the run, ``async for``
    reads its events; the session is updated when the run finishes (see ``send_stream``)."""

    def __init__(self, standing: StandingAgent, session_id: str, message: str, *,
                 principal: str, deps: Any, timeout: float | None, max_buffered: int) -> None:
        self._standing = standing
        self._args = (session_id, message, principal)
        self._options: dict[str, Any] = {"deps": deps, "timeout": timeout}
        self._max_buffered = max_buffered
        self._claim: _Claim | None = None
        self._record: SessionRecord | None = None
        self._stream: Any = None
        self._reply: Reply | None = None

    @property
    def reply(self) -> Reply:
        """The turn's ``Reply``, once the run has finished and the session was updated."""
        if self._reply is None:
            raise ConfigurationError(
                "the turn has not finished: read the events to the end before .reply")
        return self._reply

    @property
    def run_id(self) -> str | None:
        return None if self._stream is None else self._stream.run_id

    async def __aenter__(self) -> SessionStream:
        if self._claim is not None:
            raise ConfigurationError("a send_stream is entered once; call it again for a turn")
        session_id, message, principal = self._args
        standing = self._standing
        claim, record, checkpoint = await standing._begin(session_id, principal, paused=False)
        self._claim, self._record = claim, record
        try:
            agent = await standing._agent()
            options = standing._options(agent, record, checkpoint, **self._options)
            self._stream = agent.run_stream(message, max_buffered=self._max_buffered, **options)
            await self._stream.__aenter__()
        except BaseException as exc:
            await claim.end(None, exc)
            raise
        return self

    def __aiter__(self) -> SessionStream:
        return self

    async def __anext__(self) -> Any:
        if self._stream is None:
            raise ConfigurationError(
                "iterate a send_stream inside `async with standing.send_stream(...) as events:`")
        try:
            return await self._stream.__anext__()
        except StopAsyncIteration:
            await self._finish()
            raise

    def _result(self) -> RunResult | None:
        try:
            result: RunResult = self._stream.result
        except Exception:  # not finished, or failed: the turn leaves no outcome
            return None
        return result

    async def _finish(self) -> None:
        result = self._result()
        if self._reply is None and result is not None:
            assert self._claim is not None and self._record is not None
            self._reply = await self._standing._settle(self._claim, self._record, result,
                                                       self._args[1])

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        claim = self._claim
        if claim is None or self._stream is None:
            return
        try:
            await self._stream.__aexit__(kind, error, tb)
        finally:
            if self._reply is None:
                if self._result() is not None:  # the run ended; the reader left after its end
                    await self._finish()
                else:
                    await claim.end(None, error)


def session_identity(record: SessionRecord) -> MemoryIdentity:
    """The identity a session's turns remember under, for an agent or a team with memory:
    the session is the conversation, its owner the principal."""
    from ..memory._identity import MemoryIdentity

    return MemoryIdentity(conversation_id=record.id, principal=record.owner)


def recorded_lines(result: RunResult, lines: list[tuple[Role, str]]) -> list[tuple[Role, str]]:
    """``lines`` (role, text) as the run's record shows them: masked by its redaction policy
    (the conversation's kinds) and its learned secrets, like ``RunResult.checkpoint``."""
    run = result.recording
    messages: Any = [{"role": role, "content": text} for role, text in lines]
    policy = run.redaction
    if policy is not None and policy.is_redacted(trace.HISTORY):
        shown = policy.redact_value(trace.HISTORY, messages)
        messages = shown if isinstance(shown, list) else [
            {"role": role, "content": REDACTED} for role, _ in lines]
    if run.secrets is not None:
        messages = run.secrets.scrub(messages)
    return [(role, str(m["content"])) for (role, _), m in zip(lines, messages, strict=True)]


def pause_view(pause: Any) -> dict[str, Any] | None:
    """A paused run's ``pause`` as a caller reads it: ``kind``, ``tool``, and ``evidence``
    (check-in), ``question`` (ask) or ``data``."""
    if not isinstance(pause, dict):
        return None
    kind, data = pause.get("kind"), pause.get("data")
    view: dict[str, Any] = {"kind": kind, "tool": pause.get("tool_name"),
                            "tool_call_id": pause.get("tool_call_id")}
    if kind == "check_in":
        view["evidence"] = data
    elif kind == "ask" and isinstance(data, dict):
        view["question"] = data.get("question")
        view["data"] = data
    else:
        view["data"] = data
    return view


def reply_of(session_id: str, result: RunResult, turn: int) -> Reply:
    """The ``Reply`` of a turn's ``RunResult``."""
    usage = result.usage
    paused = result.paused
    return Reply(
        session_id=session_id, run_id=result.run_id, turn=turn, status=result.status,
        answer=None if paused else result.content, output=None if paused else result.output,
        pause=pause_view(result.pause) if paused else None,
        usage={"llm_calls": len(usage.calls), "input_tokens": usage.input_tokens,
               "output_tokens": usage.output_tokens, "total_tokens": usage.total_tokens,
               "cache_read_tokens": usage.cache_read_tokens,
               "cache_write_tokens": usage.cache_write_tokens, "cost_usd": usage.cost_usd})
