"""Subscriptions to agent events: ``agent.on("stream.token", fn)``.

A listener subscribes to one name, a domain (``"stream.*"``) or everything (``"*"``). For one
event, exact subscribers hear it first, then the domain's, then the catch-alls. Listeners are
isolated: one that raises is recorded in ``errors`` and the others still hear the event.
Async listeners are scheduled, never awaited by the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, Final

from pydantic import BaseModel

from .._record import Shown, record_class
from ..flow import FlowEvent

logger = logging.getLogger("agentfootprint.events")

__all__ = ["PREFIX", "AgentEvent", "EventBridge", "EventDispatcher"]

PREFIX: Final = "agentfootprint."
"""Every event name's namespace. Defined here, not in ``_catalogue`` (which re-exports it),
so a run that emits events never loads the catalogue's payload models (cold start)."""


@record_class
class AgentEvent(Shown):
    """One event: its name, JSON payload, and where in which run it happened.

    (A dataclass with its methods written once, ``_record.py``: cold start.)"""

    type: str
    payload: Mapping[str, Any]
    run_id: str
    runtime_stage_id: str
    stage: str
    timestamp: float = field(default_factory=time.time)

    def __init__(self, type: str, payload: Mapping[str, Any], run_id: str,
                 runtime_stage_id: str, stage: str, timestamp: float | None = None) -> None:
        self.type = type
        self.payload = payload
        self.run_id = run_id
        self.runtime_stage_id = runtime_stage_id
        self.stage = stage
        self.timestamp = time.time() if timestamp is None else timestamp

    def model(self) -> BaseModel:
        """The payload as its catalogue model (validated)."""
        from ._catalogue import payload_model

        return payload_model(self.type).model_validate(self.payload)


Listener = Callable[[AgentEvent], Any]


class _Wanted(dict[str, bool]):
    """Whether an emit of each name has a listener now: asked once per name, then answered by
    the dict itself (its ``__getitem__`` is the run's emit gate: no Python call per emit).
    Emptied whenever a listener comes or goes."""

    __slots__ = ("_dispatcher",)

    def __init__(self, dispatcher: EventDispatcher) -> None:
        super().__init__()
        self._dispatcher = dispatcher

    def __missing__(self, name: str) -> bool:
        dispatcher = self._dispatcher
        wanted = (bool(dispatcher._listeners) and name.startswith(PREFIX)
                  and dispatcher.wants(name))
        if len(self) >= _WANTED_NAMES:  # emits of ever new names: start over
            self.clear()
        self[name] = wanted
        return wanted


_WANTED_NAMES: Final = 1024


class EventDispatcher:
    """Holds listeners for the lifetime of an agent; runs deliver to it."""

    def __init__(self) -> None:
        self._listeners: dict[str, list[Listener]] = {}
        self.errors: list[tuple[str, str]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wanted = _Wanted(self)

    def on(self, pattern: str, listener: Listener) -> Callable[[], None]:
        """Subscribe; returns a function that unsubscribes."""
        from ._catalogue import EVENTS, full_name, payload_model

        key = full_name(pattern)
        if key.endswith(".*") and not any(name.startswith(key[:-1]) for name in EVENTS):
            from ..errors import ConfigurationError

            raise ConfigurationError(
                f"{pattern!r} names no agentfootprint event domain; see "
                "agentfootprint.events.EVENTS for the names")
        if key != "*" and not key.endswith(".*") and key not in EVENTS:
            payload_model(pattern)  # raises with the list of names
        self._listeners.setdefault(key, []).append(listener)
        self._wanted.clear()

        def off() -> None:
            found = self._listeners.get(key, [])
            if listener in found:
                found.remove(listener)
                self._wanted.clear()

        return off

    def wants(self, name: str) -> bool:
        listeners = self._listeners
        if not listeners:
            return False
        return bool(listeners.get(name) or listeners.get(_domain(name)) or listeners.get("*"))

    def dispatch(self, event: AgentEvent) -> None:
        listeners = self._listeners
        for key in (event.type, _domain(event.type), "*"):
            for listener in tuple(listeners.get(key, ())):
                try:
                    result = listener(event)
                    if inspect.isawaitable(result):
                        task = asyncio.ensure_future(result)
                        self._tasks.add(task)
                        task.add_done_callback(self._settled)
                except Exception as exc:
                    self.errors.append((event.type, f"{type(exc).__name__}: {exc}"))
                    logger.warning("a listener of %r raised; the run goes on without it",
                                   event.type, exc_info=exc)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.errors.append(("async listener", repr(task.exception())))
            logger.warning("an async listener raised; the run went on without it",
                           exc_info=task.exception())

    async def drain(self) -> None:
        """Wait for async listeners still running."""
        if self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)


def _domain(name: str) -> str:
    return name.rsplit(".", 1)[0] + ".*"


class EventBridge:
    """A flow recorder that turns a run's ``agentfootprint.*`` emits into agent events."""

    def __init__(self, dispatcher: EventDispatcher, *, id: str = "agent-events") -> None:
        self.id = id
        self.dispatcher = dispatcher
        self.wants_emit: Callable[[str], bool] = dispatcher._wanted.__getitem__
        """Whether ``on_emit`` would deliver an emit named ``name`` now: the engine asks
        first, so a run nobody listens to builds no event per emit."""

    def on_emit(self, event: FlowEvent) -> None:
        name = event.key or ""
        if name.startswith(PREFIX) and self.dispatcher.wants(name):
            self.dispatcher.dispatch(AgentEvent(name, event.value or {}, event.run_id,
                                                event.runtime_stage_id, event.stage))
