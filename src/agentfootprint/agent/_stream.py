"""``run_stream``: one run as an ordered stream of typed events, for SSE and WebSockets.

    async with agent.run_stream("Refund A-1001?", deps=deps) as run:
        async for event in run:              # TextDelta, ToolCalled, ToolReturned,
            await send(event.sse())          # InjectionFired ..., RunFinished last
    run.result                               # the RunResult, once the stream has ended

The run is ``runner.run(message, **options)`` itself (same options, same recording, same run
store) in a task of its own. It is built on the event machinery ``agent.on(...)`` uses: the
run gets one more ``EventBridge``, over an ``EventDispatcher`` of the stream's own whose
listener turns the catalogue events it streams into typed events
(``events/_stream_events.py``) and puts them in a bounded buffer the iterator reads in order.

The contract:

* order: events arrive in the order the run emitted them; ``RunFinished`` is the last one.
* bounded: with ``max_buffered`` events unread the run waits for the reader at its next await
  point (before each model call, after each token); the stage between two such points (a tool
  batch) may add its few events beyond the bound.
* failure: an exception of the run is raised by the iterator after the events before it.
* leaving early: leaving the ``async with`` before the end (a ``break``, an error, a client
  that went away) cancels the run and waits for it: no task outlives the block, the run's turn
  claim is ended as on any failure, and a run store records the run up to there as failed.
* tokens and ``stream=``: ``Agent(stream=True)`` makes ``run()`` ask the provider for a token
  stream, so ``agent.on("stream.token")`` listeners hear the tokens; ``run_stream`` always asks
  for one, whatever ``stream=`` says, and delivers the tokens as ``TextDelta`` events. Either
  way the provider's streaming rules apply: a failure after the first token is not retried.
* nesting: an agent used as a tool inside the run is not streamed (its call and result are:
  ``ToolCalled``/``ToolReturned``); its own recording is linked from the run's.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, RunError
from ..events._dispatcher import AgentEvent, EventBridge, EventDispatcher

if TYPE_CHECKING:
    from ..events._stream_events import StreamEvent
    from ..flow import Chart, FlowEvent, FlowRun
    from ..flow._commitlog import CommitRecord
    from ..flow._recorders import Recorder
    from ._agent import RunResult

__all__ = ["RunStream", "StreamTap", "stream_pace", "tap_stream"]

DEFAULT_MAX_BUFFERED = 256
"""Unread events a stream holds before the run waits for its reader."""

_next_tap: contextvars.ContextVar[StreamTap | None] = contextvars.ContextVar(
    "run_stream_tap", default=None)
"""The tap of the run a ``run_stream`` task is about to start (taken by that run)."""

stream_pace: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = (
    contextvars.ContextVar("run_stream_pace", default=None))
"""Set for the run of a ``run_stream``: the model call streams tokens whatever ``stream=``
says, and awaits this before each call and after each token (the reader's pace)."""


def tap_stream(recorders: list[Recorder], live: Callable[[FlowEvent], None]
               ) -> tuple[list[Recorder], Callable[[FlowEvent], None],
                          Callable[[], Awaitable[None]] | None]:
    """For a run a ``run_stream`` started: its recorders and live path with the stream's tap
    added, and the tap's pace (else everything as given and no pace).

    The tap is taken, so a run started inside this one (an agent used as a tool) is not
    streamed too.
    """
    tap = _next_tap.get()
    if tap is None:
        return recorders, live, None
    _next_tap.set(None)
    tapped = tap.on_emit

    def both(event: FlowEvent) -> None:  # tokens travel only this way (they are not recorded)
        live(event)
        tapped(event)

    return [*recorders, tap], both, tap.pace


class _Buffer:
    """Events in order: never blocks a (synchronous) producer; ``room()`` waits for the reader."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self.items: deque[object] = deque()
        self.readable = asyncio.Event()
        self.writable = asyncio.Event()

    def put(self, item: object) -> None:
        self.items.append(item)
        self.readable.set()

    async def get(self) -> object:
        while not self.items:
            self.readable.clear()
            await self.readable.wait()
        item = self.items.popleft()
        if len(self.items) < self.max_items:
            self.writable.set()
        return item

    async def room(self) -> None:
        while len(self.items) >= self.max_items:
            self.writable.clear()
            await self.writable.wait()


class _Failed:
    """The run's error, handed through the buffer to the consumer (a plain class: cold start)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class StreamTap:
    """The recorder a streamed run gets: its catalogue events into the buffer, in order.

    Events go through an ``EventBridge`` over a dispatcher of the stream's own (one listener
    per streamed name). The tap also keeps the run's commits, so a run cancelled mid-way can
    still be recorded and its turn claim ended (a cancelled run returns no ``FlowRun``).
    """

    id = "run-stream"

    def __init__(self, max_buffered: int) -> None:
        from ..events._stream_events import STREAMED

        self.buffer = _Buffer(max_buffered)
        events = EventDispatcher()
        for name in STREAMED:
            events.on(name, self._deliver)
        self.events = events
        self.on_emit = EventBridge(events, id=self.id).on_emit
        self.run_id: str | None = None
        self.initial: dict[str, Any] | None = None
        self.records: list[CommitRecord] = []

    def _deliver(self, event: AgentEvent) -> None:
        from ..events._stream_events import stream_event

        streamed = stream_event(event.type, event.payload, run_id=event.run_id,
                                step=event.runtime_stage_id)
        if streamed is not None:
            self.buffer.put(streamed)

    async def pace(self) -> None:
        await self.buffer.room()

    def on_run_start(self, event: FlowEvent) -> None:
        self.run_id = event.run_id
        initial = (event.data or {}).get("initial")
        self.initial = dict(initial) if isinstance(initial, Mapping) else {}

    def on_commit(self, event: FlowEvent) -> None:
        from ..flow._commitlog import CommitRecord

        if isinstance(event.value, CommitRecord):
            self.records.append(event.value)

    def partial_run(self, chart: Chart, runner: object, error: str) -> FlowRun | None:
        """The run as recorded up to its cancel, as a failed ``FlowRun`` (None before it began)."""
        if self.run_id is None or self.initial is None:
            return None
        from ..flow import FlowRun
        from ..flow._commitlog import CommitLog

        log = CommitLog(records=[replace(r) for r in self.records],
                        initial={ns: dict(v) for ns, v in self.initial.items()})
        return FlowRun(run_id=self.run_id, chart=chart, status="failed", output=None,
                       state=log.state_at(len(log) - 1), log=log, error=error,
                       redaction=getattr(runner, "redaction", None))


class RunStream:
    """One streamed run: ``async with`` starts it, ``async for`` reads its events.

    Made by ``agent.run_stream(message, **options)``: ``start()`` is the run (``runner.run``
    with those options); see the module docstring for the contract. Entered once; iterated
    inside the ``async with``.
    """

    def __init__(self, runner: object, start: Callable[[], Awaitable[RunResult]], *,
                 message: str, max_buffered: int = DEFAULT_MAX_BUFFERED) -> None:
        if type(max_buffered) is not int or max_buffered < 1:
            raise ConfigurationError(f"max_buffered={max_buffered!r} must be an int >= 1")
        self._runner = runner
        self._start = start
        self._message = message
        self._tap = StreamTap(max_buffered)
        self._task: asyncio.Task[None] | None = None
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._ended = False

    def __repr__(self) -> str:
        state = ("not started" if self._task is None else "ended" if self._ended
                 else "running")
        return f"<RunStream {self._message[:40]!r} {state}>"

    @property
    def run_id(self) -> str | None:
        """The run's id, once it has started."""
        return self._tap.run_id

    @property
    def result(self) -> RunResult:
        """The ``RunResult``, once the run has finished; a failed run raises its error here."""
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise ConfigurationError(
                "the run has not finished: read the events to the end (async for event in "
                "run) before run.result")
        return self._result

    async def __aenter__(self) -> RunStream:
        if self._task is not None:
            raise ConfigurationError(
                "a run_stream is entered once; call run_stream(...) again for another run")
        self._task = asyncio.get_running_loop().create_task(self._drive())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        task = self._task
        if task is None or task.done():
            return
        task.cancel()
        interrupted = False
        while not task.done():  # the run ends before the block does, even if we are cancelled
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                interrupted = True
        self._ended = True
        if interrupted:
            raise asyncio.CancelledError

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._task is None:
            raise ConfigurationError(
                "iterate a run_stream inside `async with agent.run_stream(...) as run:`, "
                "which starts the run and stops it when the block is left")
        if self._ended and not self._tap.buffer.items:
            raise StopAsyncIteration
        item = await self._tap.buffer.get()
        if isinstance(item, _Failed):
            self._ended = True
            raise item.error
        from ..events._stream_events import RunFinished

        if isinstance(item, RunFinished):
            self._ended = True
        return item  # type: ignore[return-value]

    async def _drive(self) -> None:
        """The run, in its own task: its events are put in the buffer, then its end."""
        from ..events._stream_events import RunFinished

        _next_tap.set(self._tap)
        buffer = self._tap.buffer
        try:
            result = await self._start()
        except Exception as exc:
            self._error = exc
            buffer.put(_Failed(exc))
            return
        except asyncio.CancelledError as exc:
            # settled here, in the run's own task: a reader's task that is being cancelled
            # (a client gone, under anyio) could not await the stores itself
            buffer.put(_Failed(exc))
            await self._settle_cancelled()
            raise
        except BaseException as exc:  # nobody may read on, but never leave a reader hanging
            buffer.put(_Failed(exc))
            raise
        self._result = result
        output = getattr(result, "output", None)
        buffer.put(RunFinished(
            run_id=result.run_id, turn=result.turn, status=result.status,
            content=result.content, output=output, iterations=result.iterations,
            input_tokens=result.input_tokens, output_tokens=result.output_tokens,
            stopped_early=result.stopped_early, pause=result.pause))

    async def _settle_cancelled(self) -> None:
        """A cancelled run ends like a failed one: its turn claim ended, its record kept."""
        runner = self._runner
        chart = getattr(runner, "chart", None)
        if chart is None:
            return
        run = self._tap.partial_run(chart, runner, "CancelledError: the reader of run_stream "
                                    "left before the run ended")
        if run is None:
            return
        error = RunError(f"run {run.run_id} was cancelled: its stream's reader left", run=run)
        self._error = error
        spec = getattr(runner, "spec", None)
        if spec is not None and getattr(spec, "memories", None):
            from ._memory_mount import end_turn_claim

            try:
                await end_turn_claim(spec, run)
            except Exception as exc:
                error.add_note(f"its turn claim could not be ended: {exc!r}")
        record = getattr(runner, "_record_failure", None)
        if callable(record):
            await record(error)
