"""Running a chart: options, the ``FlowRun`` result, start, resume, checkpoint and timeout.

This module owns a run from the outside: ``RunOptions``; ``run_chart`` and ``resume_chart``,
which build the root frame, fire the run-level events and drive the traverser (``engine.py``)
under the timeout; the checkpoint taken at a pause; the ``FlowRun`` every run returns; and
``run_sync`` for synchronous callers. It imports the engine; the engine never imports it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import threading
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._record import record_class
from ..errors import CheckpointError, ConfigurationError, FlowTimeoutError, RunError
from ._commitlog import CommitLog, CommitRecord
from ._describe import check_json_value, summarize
from ._engine import Frame, _Engine, _frozen_state
from ._pause import _Paused
from ._recorders import FlowEvent, ObserverFailure, Recorder
from ._redact import RedactionPolicy, RunSecrets
from ._scope import frozen_mapping
from ._values import MISSING, copy_value

if TYPE_CHECKING:
    from ._chart import Chart
    from ._checkpoint import Checkpoint
    from ._narrative import NarrativeEntry

__all__ = ["FlowRun", "RunOptions", "resume_chart", "run_chart", "run_sync"]

T = TypeVar("T")


class RunOptions:
    """Per-run settings shared by ``run`` and ``resume`` (a plain slotted class: nothing
    compares or replaces them, and a dataclass costs exec'd methods at import)."""

    __slots__ = ("max_depth", "max_loop_iterations", "recorders", "redaction", "timeout")

    def __init__(self, recorders: tuple[Recorder, ...] = (),
                 redaction: RedactionPolicy | None = None, timeout: float | None = None,
                 max_loop_iterations: int = 1000, max_depth: int = 500) -> None:
        self.recorders = recorders
        self.redaction = redaction
        self.timeout = timeout
        self.max_loop_iterations = max_loop_iterations
        self.max_depth = max_depth

    @classmethod
    def make(cls, *, recorders: Iterable[Recorder], redaction: RedactionPolicy | None,
             timeout: float | None, max_loop_iterations: int, max_depth: int) -> RunOptions:
        if max_loop_iterations < 1:
            raise ConfigurationError(f"max_loop_iterations={max_loop_iterations} must be >= 1")
        if max_depth < 1:
            raise ConfigurationError(f"max_depth={max_depth} must be >= 1")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout={timeout} must be a positive number of seconds")
        return cls(tuple(recorders), redaction, timeout, max_loop_iterations, max_depth)



@record_class
class FlowRun:
    """The outcome of one run: its output, final state, and the complete commit log.

    ``state`` is a plain, independent copy of the final state, made on first read: a caller
    that only needs a few values (the agent's result) reads them with ``final`` instead, so
    a run does not deep-copy its whole state (a long history, every usage row) at its end.
    """

    run_id: str
    chart: Chart
    status: Literal["done", "paused", "failed"]
    output: Any
    log: CommitLog
    checkpoint: Checkpoint | None
    error: str | None
    observer_errors: list[ObserverFailure]
    observer_stats: dict[str, dict[str, int]]
    redaction: RedactionPolicy | None
    """The policy the run was recorded under (a recording scrubs the output with it)."""
    secrets: RunSecrets | None
    """What the run masked, for whoever records more of it (the output, a checkpoint)."""
    _state: dict[str, Any] | None
    _final: Mapping[str, Any] | None

    def __init__(self, run_id: str, chart: Chart, status: Literal["done", "paused", "failed"],
                 output: Any, state: dict[str, Any] | None = None,
                 log: CommitLog | None = None, checkpoint: Checkpoint | None = None,
                 error: str | None = None, observer_errors: list[ObserverFailure] | None = None,
                 observer_stats: dict[str, dict[str, int]] | None = None,
                 redaction: RedactionPolicy | None = None, secrets: RunSecrets | None = None,
                 *, final: Mapping[str, Any] | None = None) -> None:
        self.run_id = run_id
        self.chart = chart
        self.status = status
        self.output = output
        self.log = CommitLog() if log is None else log
        self.checkpoint = checkpoint
        self.error = error
        self.observer_errors = [] if observer_errors is None else observer_errors
        self.observer_stats = {} if observer_stats is None else observer_stats
        self.redaction = redaction
        self.secrets = secrets
        # ``final``: the engine's committed (frozen, never mutated again) state, copied on
        # the first read of ``state``; else ``state`` as given
        self._final = final if state is None else None
        self._state = {} if state is None and final is None else state

    @property
    def state(self) -> dict[str, Any]:
        """The final state: plain values, the caller's own to change."""
        state = self._state
        if state is None:  # (``_final`` stays: ``final`` reads the committed values)
            state = self._state = copy_value(self._final)
        return state

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        self._state, self._final = value, None

    def final(self, key: str, default: Any = None) -> Any:
        """The final value of ``key`` without copying the state: read-only (a committed
        value: a list or dict in it refuses mutation); ``copy_value`` it to keep a copy.
        Changing the copy ``state`` hands out does not change it; assigning ``state`` does."""
        final = self._final
        if final is None:
            return self.state.get(key, default)
        return final.get(key, default)

    def __repr__(self) -> str:  # the log can be megabytes: show what identifies the run
        return (f"FlowRun(run_id={self.run_id!r}, status={self.status!r}, "
                f"steps={len(self.log.records)}, output={summarize(self.output)})")

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    @property
    def pause_data(self) -> Any:
        return self.checkpoint.pause_data if self.checkpoint else None

    @property
    def records(self) -> list[CommitRecord]:
        return self.log.records

    def value_at(self, key: str, step: int, *, ns: str = "", default: object = MISSING) -> Any:
        return self.log.value_at(key, step, ns=ns, default=default)

    def state_at(self, step: int, *, ns: str = "") -> dict[str, Any]:
        return self.log.state_at(step, ns=ns)

    def last_writer(self, key: str, before: int | None = None, *, ns: str = "") -> int | None:
        return self.log.last_writer(key, before, ns=ns)

    def narrative(self) -> str:
        """The run in plain English, stage by stage (rebuilt from the log)."""
        from ._narrative import narrative

        return narrative(self)

    def narrative_entries(self) -> list[NarrativeEntry]:
        from ._narrative import render_entries

        return render_entries(self.log, self.chart)


# -- results ----------------------------------------------------------------------------------


def _checkpoint(engine: _Engine, paused: _Paused, root: Frame) -> Checkpoint:
    from ._checkpoint import Checkpoint, ResumeFrame

    frames = []
    for kind, node, rid, inner in reversed(paused.frames):
        if inner is not None:
            frames.append(ResumeFrame(kind=kind, node=node, rid=rid,  # type: ignore[arg-type]
                                      ns=inner.ns, state=copy_value(inner.state),
                                      args=copy_value(dict(inner.args))))
        else:
            frames.append(ResumeFrame(kind=kind, node=node, rid=rid))  # type: ignore[arg-type]
    try:
        check_json_value(paused.data, "pause data")
        check_json_value(root.state, "state")
        for spec in frames:
            check_json_value(spec.state, f"subflow {spec.node!r} state")
    except TypeError as exc:
        raise CheckpointError(f"cannot checkpoint the pause at {paused.node!r}: {exc}") from exc
    return Checkpoint(
        chart=engine.chart.name, fingerprint=engine.chart.fingerprint(), run_id=engine.run_id,
        paused_stage=paused.node, paused_runtime_stage_id=paused.rid,
        pause_data=root.secrets.scrub(copy_value(paused.data)), state=copy_value(root.state),
        args=copy_value(dict(root.args)), frames=frames, counter=engine.counter,
        visits=dict(engine.visits), log=engine.log.to_json(), created_at=time.time(),
    )


def _result(engine: _Engine, status: Literal["done", "paused", "failed"], output: Any,
            root: Frame, checkpoint: Checkpoint | None = None, error: str | None = None
            ) -> FlowRun:
    engine.dispatch.flush()
    return FlowRun(
        run_id=engine.run_id, chart=engine.chart, status=status, output=output,
        final=root.state, log=engine.log, checkpoint=checkpoint,
        error=None if error is None else root.secrets.text(error),
        observer_errors=engine.dispatch.all_failures(),
        observer_stats={d.id: d.stats() for d in engine.dispatch.deferred},
        redaction=root.redaction, secrets=root.secrets,
    )


def _root_event(engine: _Engine, name: str, *, value: Any = None,
                data: Mapping[str, Any] | None = None) -> None:
    hooks = getattr(engine.dispatch, f"h_{name}")
    if hooks:
        event = FlowEvent(name, engine.run_id, "__root__#0", "__root__", engine.chart.name,
                          None, value, data)
        for hook in hooks:
            hook(event)


async def _drive(engine: _Engine, body: Coroutine[Any, Any, Any], root: Frame) -> FlowRun:
    timeout = engine.options.timeout
    if timeout is not None:
        engine.deadline = time.monotonic() + timeout
    try:
        if timeout is None:
            output = await body
        else:
            async with asyncio.timeout(timeout):
                output = await body
    except _Paused as paused:
        cp = _checkpoint(engine, paused, root)
        return _result(engine, "paused", None, root, checkpoint=cp)
    except TimeoutError as exc:
        error = exc if isinstance(exc, FlowTimeoutError) else FlowTimeoutError(
            f"run of chart {engine.chart.name!r} timed out after {timeout}s; "
            "raise timeout= or make the stages faster")
        error.run = _result(engine, "failed", None, root, error=str(error))
        _root_event(engine, "run_failed", data={"error": root.secrets.text(str(error))})
        engine.dispatch.flush()
        if error is exc:
            raise
        raise error from exc
    except RunError as exc:
        exc.run = _result(engine, "failed", None, root, error=str(exc))
        _root_event(engine, "run_failed", data={"error": root.secrets.text(str(exc))})
        engine.dispatch.flush()
        raise
    _root_event(engine, "run_end", value=root.secrets.scrub(output))
    return _result(engine, "done", output, root)


# -- entry points -----------------------------------------------------------------------------


def _root_frame(engine: _Engine, state: Mapping[str, Any] | None, args: Mapping[str, Any] | None,
                env: Mapping[str, Any] | None, redaction: RedactionPolicy | None) -> Frame:
    return Frame(ns="", state=_frozen_state(state), args=frozen_mapping(args),
                 env=MappingProxyType(dict(env or {})), readonly=frozenset(),
                 dispatch=engine.dispatch, redaction=redaction, run_id=engine.run_id, depth=0)


async def run_chart(chart: Chart, *, args: Mapping[str, Any] | None,
                    state: Mapping[str, Any] | None, env: Mapping[str, Any] | None,
                    options: RunOptions, run_id: str | None) -> FlowRun:
    for name, given in (("args", args), ("state", state), ("env", env)):
        if given is not None and not isinstance(given, Mapping):
            raise ConfigurationError(
                f"chart.run({name}={given!r}) must be a dict of named values, e.g. "
                f"{{'message': {given!r}}}")
    engine = _Engine(chart, options, run_id or uuid.uuid4().hex)
    root = _root_frame(engine, state, args, env, options.redaction)
    policy = options.redaction
    _learn(root, policy, root.state, args)
    engine.log.initial[""] = {k: copy_value(root.shown(k, v)) for k, v in root.state.items()}
    for recorder in options.recorders:
        clear = getattr(recorder, "clear", None)
        if callable(clear):
            clear()
    _root_event(engine, "run_start", value=_shown_args(args, policy, root.secrets),
                      data={"initial": copy_value(engine.log.initial)})
    return await _drive(engine, engine.walk(chart.root, root, None), root)


async def resume_chart(chart: Chart, checkpoint: Checkpoint | Mapping[str, Any] | str,
                       answer: object, *, env: Mapping[str, Any] | None,
                       options: RunOptions) -> FlowRun:
    from ._checkpoint import load_checkpoint

    cp = load_checkpoint(checkpoint)
    if cp.fingerprint != chart.fingerprint():
        raise CheckpointError(
            f"checkpoint was written by a different chart (fingerprint {cp.fingerprint}, "
            f"this chart {chart.fingerprint()}); resume it with the chart that paused")
    if cp.paused_stage not in chart.nodes or any(f.node not in chart.nodes for f in cp.frames):
        raise CheckpointError(f"checkpoint names stage {cp.paused_stage!r}, which chart "
                              f"{chart.name!r} does not have")
    engine = _Engine(chart, options, cp.run_id)
    engine.counter = cp.counter
    engine.visits = dict(cp.visits)
    try:
        engine.log = CommitLog.from_json(cp.log)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint log is unreadable ({exc!r}); it was altered") from exc
    root = _root_frame(engine, cp.state, cp.args, env, options.redaction)
    _learn(root, options.redaction, cp.state, cp.args, *(f.state for f in cp.frames if f.state))
    replayed = {ns: engine.log.state_at(len(engine.log) - 1, ns=ns)
                for ns in {"", *(r.ns for r in engine.log.records)}}
    _root_event(engine, "run_start", value=_shown_args(cp.args, options.redaction, root.secrets),
                      data={"resumed": True, "initial": replayed})
    return await _drive(engine, engine.resume_level(cp, 0, root, answer), root)


def _learn(root: Frame, policy: RedactionPolicy | None,
           *sources: Mapping[str, Any] | None) -> None:
    """Before anything is recorded: what the policy masks of the run's input and state."""
    if policy is not None and policy.has_key_rules:
        for source in sources:
            if source:
                root.secrets.learn_state(policy, source)


def _shown_args(args: Mapping[str, Any] | None, policy: RedactionPolicy | None,
                secrets: RunSecrets) -> dict[str, Any]:
    if policy is None:
        return {k: copy_value(v) for k, v in (args or {}).items()}
    shown: dict[str, Any] = secrets.scrub({
        k: (copy_value(policy.redact_value(k, v)) if policy.is_redacted(k) else copy_value(v))
        for k, v in (args or {}).items()})
    return shown


_sync_loops = threading.local()


def _thread_runner() -> asyncio.Runner:
    """This thread's event loop for ``*_sync`` calls, kept open between them.

    SDK clients (httpx pools inside openai/anthropic) bind to the loop of their first call; a
    fresh loop per call would leave the second ``run_sync`` with "Event loop is closed". The
    runner is closed when the interpreter exits.
    """
    runner: asyncio.Runner | None = getattr(_sync_loops, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _sync_loops.runner = runner
        atexit.register(runner.close)
    return runner


def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    Outside an event loop it runs on this thread's loop (one per thread, reused). Inside a
    running loop (a notebook cell, sync code called from async code) that loop cannot be
    re-entered, so the coroutine runs on a worker thread's loop, with the caller's context
    variables, while this thread waits: the calling loop is blocked meanwhile, as by any
    synchronous call. ``await`` the async method where you can.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return _thread_runner().run(awaitable)
    context = contextvars.copy_context()
    worker = _worker_loop()
    if running is worker:  # a *_sync call made inside one: a loop of its own, on a thread
        return _one_off(awaitable, context)
    future = context.run(asyncio.run_coroutine_threadsafe, awaitable, worker)
    return future.result()


_worker: list[asyncio.AbstractEventLoop] = []
_worker_lock = threading.Lock()


def _worker_loop() -> asyncio.AbstractEventLoop:
    """The loop ``*_sync`` calls made inside a running loop share (a daemon thread's, started
    on first use and kept, so SDK clients bound to it keep working between calls)."""
    with _worker_lock:
        if not _worker:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="agentfootprint-sync",
                             daemon=True).start()
            _worker.append(loop)
        return _worker[0]


def _one_off(awaitable: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    outcome: list[Any] = []

    def target() -> None:
        try:
            with asyncio.Runner() as runner:
                outcome.append((True, runner.run(awaitable, context=context)))
        except BaseException as exc:  # handed to the waiting caller, raised there
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="agentfootprint-sync-nested", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result
