"""Observers of a run: recorders, the event they receive, and deferred delivery.

A recorder is any object with some ``on_<event>`` methods (and optionally an ``id``). Scope
events fire live inside a stage (``read``, ``write``, ``delete``, ``emit``, ``stage_start``,
``stage_end``, ``commit``); flow events fire after it (``stage_executed``, ``next``, ``decision``,
``selected``, ``fork``, ``subflow_entry``, ``subflow_exit``, ``loop``, ``break``, ``error``,
``pause``, ``resume``, ``run_start``, ``run_end``, ``run_failed``). A recorder that raises never
breaks the run: the failure is kept in ``run.observer_errors``.

``deferred(recorder)`` queues events and delivers them off the hot path (on the event loop's
next turn, and always before ``run()`` returns, fails or pauses).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import Any, Literal, Protocol

from .._record import Shown, Value, assign, record_class

__all__ = [
    "EVENT_NAMES",
    "Deferred",
    "FlowEvent",
    "ObserverFailure",
    "Recorder",
    "deferred",
]

SCOPE_EVENTS = ("read", "write", "delete", "emit", "stage_start", "stage_end", "commit")
FLOW_EVENTS = (
    "stage_executed", "next", "decision", "selected", "fork", "subflow_entry", "subflow_exit",
    "loop", "break", "error", "pause", "resume", "run_start", "run_end", "run_failed",
)
EVENT_NAMES = SCOPE_EVENTS + FLOW_EVENTS


class Recorder(Protocol):
    """Anything with ``on_<event>(event)`` methods; every hook is optional.

    A recorder whose ``on_emit`` ignores most emits may also have ``wants_emit(name) -> bool``:
    asked at each emit, before the event is built; ``False`` skips its ``on_emit`` for that
    emit (an inline recorder's only; a ``deferred`` one hears every emit).
    """


# The three are dataclasses whose methods are written once (``_record.py``): generating them
# per class is paid by every cold start.


@record_class
class FlowEvent(Shown):
    """One thing that happened in a run. Values are redacted before the event is built."""

    name: str
    """The event name, e.g. ``"read"`` or ``"decision"``."""
    run_id: str
    runtime_stage_id: str
    stage_id: str
    stage: str
    key: str | None = None
    """State key for read/write/delete; event name for emit."""
    value: Any = None
    """The value read or written, the emit payload, or the committed record."""
    data: Mapping[str, Any] | None = None
    """Event-specific detail: chosen branch and evidence, target stage, error text …"""

    def __init__(self, name: str, run_id: str, runtime_stage_id: str, stage_id: str, stage: str,
                 key: str | None = None, value: Any = None,
                 data: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.run_id = run_id
        self.runtime_stage_id = runtime_stage_id
        self.stage_id = stage_id
        self.stage = stage
        self.key = key
        self.value = value
        self.data = data


@record_class
class ObserverFailure(Value):
    """A recorder hook that raised; the run went on."""

    observer: str
    hook: str
    error: str

    def __init__(self, observer: str, hook: str, error: str) -> None:
        assign(self, observer=observer, hook=hook, error=error)


@record_class
class Deferred(Shown):
    """Queues a recorder's events and delivers them later, in order.

    ``overflow="drop_oldest"`` keeps the newest ``max_queue`` events (drops counted);
    ``overflow="block"`` delivers the backlog inline before queueing more, losing nothing.
    """

    recorder: Recorder
    max_queue: int = 10_000
    overflow: Literal["drop_oldest", "block"] = "drop_oldest"
    queued: int = 0
    delivered: int = 0
    dropped: int = 0
    flushes: int = 0
    inline_flushes: int = 0
    failures: list[ObserverFailure] = field(default_factory=list)
    _queue: deque[tuple[str, FlowEvent]] = field(default_factory=deque, repr=False)
    _pending: bool = field(default=False, repr=False)

    def __init__(self, recorder: Recorder, max_queue: int = 10_000,
                 overflow: Literal["drop_oldest", "block"] = "drop_oldest", queued: int = 0,
                 delivered: int = 0, dropped: int = 0, flushes: int = 0,
                 inline_flushes: int = 0, failures: list[ObserverFailure] | None = None,
                 _queue: deque[tuple[str, FlowEvent]] | None = None,
                 _pending: bool = False) -> None:
        self.recorder = recorder
        self.max_queue = max_queue
        self.overflow = overflow
        self.queued = queued
        self.delivered = delivered
        self.dropped = dropped
        self.flushes = flushes
        self.inline_flushes = inline_flushes
        self.failures = [] if failures is None else failures
        self._queue = deque() if _queue is None else _queue
        self._pending = _pending

    @property
    def id(self) -> str:
        return recorder_id(self.recorder)

    def hook_names(self) -> list[str]:
        return [n for n in EVENT_NAMES if callable(getattr(self.recorder, f"on_{n}", None))]

    def enqueue(self, name: str, event: FlowEvent) -> None:
        queue = self._queue
        if len(queue) >= self.max_queue:
            if self.overflow == "block":
                self.inline_flushes += 1
                self.flush()
            else:
                queue.popleft()
                self.dropped += 1
        queue.append((name, event))
        self.queued += 1
        if not self._pending:
            self._pending = True
            with contextlib.suppress(RuntimeError):  # no loop: the terminal flush delivers
                asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Deliver everything queued now (also called by the engine at run end and pause)."""
        self._pending = False
        queue = self._queue
        if not queue:
            return
        self.flushes += 1
        recorder = self.recorder
        while queue:
            name, event = queue.popleft()
            try:
                getattr(recorder, f"on_{name}")(event)
            except Exception as exc:
                self.failures.append(ObserverFailure(self.id, name, f"{type(exc).__name__}: {exc}"))
            self.delivered += 1

    def stats(self) -> dict[str, int]:
        return {
            "queued": self.queued, "delivered": self.delivered, "dropped": self.dropped,
            "flushes": self.flushes, "inline_flushes": self.inline_flushes,
            "depth": len(self._queue), "failures": len(self.failures),
        }


def deferred(
    recorder: Recorder, *, max_queue: int = 10_000,
    overflow: Literal["drop_oldest", "block"] = "drop_oldest",
) -> Deferred:
    """Wrap ``recorder`` so its events are delivered off the hot path."""
    from ..errors import ConfigurationError

    if max_queue < 1:
        raise ConfigurationError(f"deferred(max_queue={max_queue}) must be at least 1")
    if overflow not in ("drop_oldest", "block"):
        raise ConfigurationError(
            f"deferred(overflow={overflow!r}) must be 'drop_oldest' or 'block'")
    return Deferred(recorder, max_queue=max_queue, overflow=overflow)


def recorder_id(recorder: Recorder) -> str:
    return str(getattr(recorder, "id", None) or type(recorder).__name__)


Hooks = tuple[Callable[[FlowEvent], None], ...]


class Dispatcher:
    """The hooks of one run's recorders, one list per event, with failure isolation."""

    __slots__ = (*(f"h_{n}" for n in EVENT_NAMES), "_emit_owners", "deferred", "emit_gates",
                 "failures", "recorders")

    h_read: Hooks
    h_write: Hooks
    h_delete: Hooks
    h_emit: Hooks
    h_stage_start: Hooks
    h_stage_end: Hooks
    h_commit: Hooks
    h_stage_executed: Hooks
    h_next: Hooks
    h_decision: Hooks
    h_selected: Hooks
    h_fork: Hooks
    h_subflow_entry: Hooks
    h_subflow_exit: Hooks
    h_loop: Hooks
    h_break: Hooks
    h_error: Hooks
    h_pause: Hooks
    h_resume: Hooks
    h_run_start: Hooks
    h_run_end: Hooks
    h_run_failed: Hooks
    emit_gates: tuple[Callable[[str], bool] | None, ...] | None
    """For each ``h_emit`` hook, its recorder's ``wants_emit(name)`` (``None``: it hears every
    emit); ``None`` when no recorder has one. An emit no gate lets through builds no event."""

    def __init__(self, recorders: Iterable[Any]) -> None:
        self.failures: list[ObserverFailure] = []
        self.deferred: list[Deferred] = []
        self.recorders: list[Any] = []
        hooks: dict[str, list[Callable[[FlowEvent], None]]] = {n: [] for n in EVENT_NAMES}
        gates: list[Callable[[str], bool] | None] = []
        owners: list[str] = []
        seen: dict[str, int] = {}
        for recorder in recorders:
            rid = recorder_id(recorder)
            if rid in seen:  # attaching the same id again replaces the earlier one
                self.recorders[seen[rid]] = recorder
            else:
                seen[rid] = len(self.recorders)
                self.recorders.append(recorder)
        for recorder in self.recorders:
            if isinstance(recorder, Deferred):
                self.deferred.append(recorder)
                for name in recorder.hook_names():
                    hooks[name].append(self._guard(recorder.id, name, _enqueuer(recorder, name)))
                    if name == "emit":  # queued now, delivered (and filtered) later
                        gates.append(None)
                        owners.append(recorder.id)
                continue
            for name in EVENT_NAMES:
                method = getattr(recorder, f"on_{name}", None)
                if callable(method):
                    hooks[name].append(self._guard(recorder_id(recorder), name, method))
                    if name == "emit":
                        gate = getattr(recorder, "wants_emit", None)
                        gates.append(gate if callable(gate) else None)
                        owners.append(recorder_id(recorder))
        for name, found in hooks.items():
            setattr(self, f"h_{name}", tuple(found))
        self.emit_gates = tuple(gates) if any(g is not None for g in gates) else None
        self._emit_owners = tuple(owners)

    def gate_failed(self, index: int, exc: Exception) -> None:
        """The ``wants_emit`` of emit hook ``index`` raised: kept like a hook's failure (the
        emit is then delivered, and its ``on_emit`` decides)."""
        self.failures.append(ObserverFailure(self._emit_owners[index], "wants_emit",
                                             f"{type(exc).__name__}: {exc}"))

    def _guard(
        self, observer: str, hook: str, method: Callable[[FlowEvent], None]
    ) -> Callable[[FlowEvent], None]:
        failures = self.failures

        def call(event: FlowEvent) -> None:
            try:
                method(event)
            except Exception as exc:
                failures.append(ObserverFailure(observer, hook, f"{type(exc).__name__}: {exc}"))

        return call

    def flush(self) -> None:
        """Terminal flush of every deferred recorder."""
        for item in self.deferred:
            item.flush()

    def all_failures(self) -> list[ObserverFailure]:
        out = list(self.failures)
        for item in self.deferred:
            out.extend(item.failures)
        return out


def _enqueuer(target: Deferred, name: str) -> Callable[[FlowEvent], None]:
    def enqueue(event: FlowEvent) -> None:
        target.enqueue(name, event)

    return enqueue
