"""Run-store I/O off the event loop: one writer thread per store, in the order it was asked.

A run store's methods are blocking (SQLite, psycopg). An agent awaits them through the store's
writer instead (:func:`writer_for`), so hundreds of concurrent runs never stall the loop while
a row is written. The contract, which the agent's journal relies on:

* **Same semantics as a direct call.** ``await writer.call(store.save, result)`` returns what
  the call returns and raises what it raises, in the task that asked; nothing is done until the
  caller has awaited it, so a run is visible from its start and each tool call's entry is stored
  before the call runs, exactly as when the store was called inline.
* **Order.** One thread runs the jobs first in, first out, so a run's writes land in the order
  they were asked (and reads see every earlier write).
* **Back-pressure.** At most ``capacity`` jobs wait; a caller that finds the queue full awaits
  room (never blocking the loop, never growing memory without bound).
* **Nothing lost.** A job once queued is done even if its caller is cancelled (the cancelled
  caller waits for it to land, then sees its cancellation); ``close_writer`` (called by the
  shipped stores' ``close()``) and interpreter exit wait for the queue to drain. A failure no
  caller is left to receive is logged, never dropped silently.

The thread is a daemon that ends after a few idle seconds and starts again on the next job, so
a store left unclosed costs no thread for long.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from ..errors import ConfigurationError

__all__ = ["DEFAULT_CAPACITY", "StoreWriter", "close_writer", "flush_writers", "writer_for"]

T = TypeVar("T")

DEFAULT_CAPACITY: Final = 1024
"""Jobs that may wait for a store's writer before callers await room."""

_IDLE_SECONDS: Final = 5.0
"""How long an idle writer thread waits for work before it ends (it restarts on demand)."""

_log = logging.getLogger("agentfootprint.runs")


@dataclass(slots=True, eq=False)
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    what: str


@dataclass(slots=True, eq=False)
class _Waiter:
    """A caller awaiting room in a full queue."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


@dataclass(slots=True, weakref_slot=True, eq=False)
class StoreWriter:
    """The writer thread of one run store (see the module docstring for the contract)."""

    name: str
    capacity: int = DEFAULT_CAPACITY
    _queue: deque[_Job] = field(default_factory=deque)
    _waiters: deque[_Waiter] = field(default_factory=deque)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None
    _busy: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.capacity, int) or self.capacity < 1:
            raise ConfigurationError(
                f"the run writer of {self.name} needs capacity >= 1, got {self.capacity!r}; "
                "pass a positive whole number of jobs")

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` run on the writer thread, after every job asked before it."""
        loop = asyncio.get_running_loop()
        what = getattr(fn, "__qualname__", repr(fn))
        while True:
            with self._cond:
                if len(self._queue) < self.capacity:
                    future: asyncio.Future[T] = loop.create_future()
                    self._queue.append(_Job(fn, args, kwargs, loop, future, what))
                    self._start_locked()
                    self._cond.notify_all()
                    break
                room = _Waiter(loop, loop.create_future())
                self._waiters.append(room)
            await self._await_room(room)
        return await _landed(future)

    async def _await_room(self, room: _Waiter) -> None:
        try:
            await room.future
        except asyncio.CancelledError:
            with self._cond:
                if room in self._waiters:
                    self._waiters.remove(room)
                else:  # it was handed the room as it was cancelled: hand it on
                    self._wake_one_locked()
            raise

    def pending(self) -> int:
        """Jobs queued or under way."""
        with self._cond:
            return len(self._queue) + (1 if self._busy else 0)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every job asked so far has landed; False when ``timeout`` ran out.
        Never call it from the writer's own thread (a job cannot wait for itself)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"the run writer of {self.name} cannot flush from its own thread")
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    # -- the thread --------------------------------------------------------------------------

    def _start_locked(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._work, name=f"run-writer {self.name}",
                                        daemon=True)
        _live.add(self)
        self._thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait_for(lambda: bool(self._queue), _IDLE_SECONDS)
                if not self._queue:
                    if self._thread is me:
                        self._thread = None
                    self._cond.notify_all()
                    return
                job = self._queue.popleft()
                self._busy = True
                self._wake_one_locked()
            try:
                _deliver(job, job.fn(*job.args, **job.kwargs), None)
            except BaseException as exc:  # handed to the caller, never dropped
                _deliver(job, None, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _wake_one_locked(self) -> None:
        while self._waiters:
            room = self._waiters.popleft()
            if _post(room.loop, _resolve, room.future):
                return


async def _landed(future: asyncio.Future[T]) -> T:
    """The job's outcome; cancelled meanwhile, wait for the job to land, then be cancelled."""
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
            except BaseException:  # reported below; the cancel goes on
                break
        if not future.cancelled() and future.exception() is not None:
            _log.error("a run-store write finished after its run was cancelled, and failed",
                       exc_info=future.exception())
        raise


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _settle(job: _Job, result: object, error: BaseException | None) -> None:
    future = job.future
    if future.done():  # its caller went away: the outcome has nobody else to reach
        if error is not None:
            _log.error("run-store job %s failed after its caller went away", job.what,
                       exc_info=error)
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, (KeyboardInterrupt, SystemExit)):
        future.set_exception(RuntimeError(f"the run-store job {job.what} was interrupted"))
    else:
        future.set_exception(error)


def _deliver(job: _Job, result: object, error: BaseException | None) -> None:
    if not _post(job.loop, _settle, job, result, error) and error is not None:
        _log.error("run-store job %s failed after its event loop closed", job.what,
                   exc_info=error)


def _post(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> bool:
    """``fn(*args)`` on ``loop``'s thread; False when the loop is closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


# -- one writer per store ----------------------------------------------------------------------

_writers: weakref.WeakKeyDictionary[object, StoreWriter] = weakref.WeakKeyDictionary()
_by_id: dict[int, StoreWriter] = {}  # stores that cannot be weakly referenced or hashed
_live: weakref.WeakSet[StoreWriter] = weakref.WeakSet()
_registry_lock = threading.Lock()


def _label(store: object) -> str:
    name = getattr(store, "name", None)
    if isinstance(name, str):
        return name
    path = getattr(store, "path", None)
    return repr(str(path)) if path is not None else type(store).__name__


def writer_for(store: object) -> StoreWriter:
    """The writer of ``store`` (made on first use; one per store object).

    A wrapper that records to another store (say, one stamping each attempt's placement)
    names it as ``wrapped_store``: it shares that store's writer, so one connection never
    serves two writer threads at once (on PostgreSQL their transactions would interleave).
    """
    while (inner := getattr(store, "wrapped_store", None)) is not None:
        store = inner
    with _registry_lock:
        try:
            found = _writers.get(store)
        except TypeError:
            found = _by_id.get(id(store))
        if found is not None:
            return found
        writer = StoreWriter(_label(store))
        try:
            _writers[store] = writer
        except TypeError:
            _by_id[id(store)] = writer
        return writer


def close_writer(store: object) -> None:
    """Wait until every write asked of ``store`` has landed (stores call it in ``close()``)."""
    with _registry_lock:
        try:
            writer = _writers.pop(store, None)
        except TypeError:
            writer = _by_id.pop(id(store), None)
    if writer is not None and threading.current_thread() is not writer._thread:
        writer.flush()


def flush_writers(timeout: float | None = None) -> bool:
    """Wait for every store's writer to drain (run at interpreter exit); False on timeout."""
    drained = True
    for writer in list(_live):
        if threading.current_thread() is not writer._thread:
            drained = writer.flush(timeout) and drained
    return drained


atexit.register(flush_writers)
