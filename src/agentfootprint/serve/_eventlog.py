"""The events of streamed runs, kept so an SSE reader can reconnect with ``Last-Event-ID``.

A streamed turn runs in a task of its own and appends each event here; SSE responses follow
the log, so a reader that drops its connection loses nothing: the run goes on (it is not
cancelled with the connection), and a reconnect carrying the last ``id:`` it saw is answered
with the events after it, then the rest as they come.

Scope, stated plainly: the log is in the memory of one server process, bounded (at most
``max_runs`` runs, the oldest finished ones dropped first, and ``max_events`` events per run,
the oldest dropped first). A reconnect must reach the process that ran the turn (sticky
routing); elsewhere, or once dropped, the id is answered 404 and the session's transcript is
the record. Event ids are ``<stream>.<n>``: ``stream`` an unguessable key of the run's log,
``n`` counting from 1, so a reader can only replay a log it was given an id of and owns.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

__all__ = ["EventLogs", "RunLog"]

_ID = re.compile(r"([0-9a-f]{32})\.([0-9]{1,9})")


@dataclass(slots=True)
class RunLog:
    """One streamed run's events in order: ``(n, event name, JSON data)``."""

    key: str
    session_id: str
    principal: str
    max_events: int
    events: deque[tuple[int, str, str]] = field(default_factory=deque)
    count: int = 0
    done: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, name: str, data: str) -> None:
        """Add the next event (and wake the readers)."""
        self.count += 1
        self.events.append((self.count, name, data))
        if len(self.events) > self.max_events:
            self.events.popleft()
        self._wake()

    def close(self) -> None:
        """The run has ended: readers stop after the last event."""
        self.done = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def kept_after(self, after: int) -> bool:
        """Whether every event after ``after`` is still kept."""
        return not self.events or self.events[0][0] <= after + 1

    def event_id(self, n: int) -> str:
        return f"{self.key}.{n}"

    async def follow(self, after: int = 0) -> AsyncIterator[tuple[str, str, str]]:
        """``(id, name, data)`` of every event after ``after``, then each new one, until the
        run ends."""
        seen = after
        while True:
            changed = self._changed
            for n, name, data in list(self.events):
                if n > seen:
                    seen = n
                    yield self.event_id(n), name, data
            if self.done and seen >= self.count:
                return
            if seen >= self.count:
                await changed.wait()


class EventLogs:
    """The logs of this process's streamed runs, bounded (see the module docstring)."""

    def __init__(self, *, max_runs: int = 256, max_events: int = 4_096) -> None:
        self.max_runs = max_runs
        self.max_events = max_events
        self._logs: OrderedDict[str, RunLog] = OrderedDict()

    def open(self, session_id: str, principal: str) -> RunLog:
        """A new log for a run of ``session_id`` by ``principal``."""
        log = RunLog(key=secrets.token_hex(16), session_id=session_id, principal=principal,
                     max_events=self.max_events)
        self._logs[log.key] = log
        while len(self._logs) > self.max_runs:
            oldest = next((k for k, v in self._logs.items() if v.done), None)
            if oldest is None:
                break
            del self._logs[oldest]
        return log

    def find(self, event_id: str, *, session_id: str, principal: str) -> tuple[RunLog, int] | None:
        """The log ``event_id`` belongs to and its position, when it is kept here and belongs
        to this session and principal (else ``None``)."""
        matched = _ID.fullmatch(event_id.strip())
        if matched is None:
            return None
        log = self._logs.get(matched.group(1))
        if log is None or log.session_id != session_id or log.principal != principal:
            return None
        after = int(matched.group(2))
        if after > log.count or not log.kept_after(after):
            return None
        return log, after
