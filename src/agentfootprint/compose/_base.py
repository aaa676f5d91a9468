"""What every composition shares: runners as mounted subflows, one recording for the whole.

A runner (``Runner``) is anything with a ``chart`` that takes ``{"message": ...}`` as its input
and leaves its answer in ``final_content`` — an ``Agent``, an ``LLMCall`` or another composition. A
composition mounts each runner's chart as a subflow, so the whole pipeline runs as one chart
and leaves one commit log: backtracking an answer crosses from the pipeline into the agent
that produced it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeGuard

from ..agent._agent import Agent, RunResult, raise_framework_cause
from ..agent._loop import live_emit
from ..agent._stream import RunStream, stream_pace, tap_stream
from ..errors import ConfigurationError, RunError, StageError
from ..events._dispatcher import EventBridge, EventDispatcher
from ..events._logging import run_loggers
from ..flow import Chart, FlowEvent, FlowRun, Scope
from ..flow._recorders import Recorder
from ..flow._run import run_sync
from ..flow._scope import ReadView
from ..flow._values import copy_value
from ..runs import trace
from ..tools._context import bound_deps
from ._members import (
    MemberRun,
    end_member_claims,
    member_run,
    resumed_members,
    start_members,
    with_member,
)

if TYPE_CHECKING:
    from ..memory._identity import MemoryIdentity

__all__ = ["Composition", "Input", "Runner", "map_runner", "mount_options"]


class Runner(Protocol):
    """An agent, an LLM call or a composition: a chart that turns a message into an answer.

    What every composition and pattern accepts as a step. ``Agent``, ``LLMCall`` and every
    ``Composition`` are runners; so is any object whose ``chart`` reads ``message`` and writes
    ``final_content``.
    """

    @property
    def chart(self) -> Chart:
        """The runner's flowchart, mounted as a subflow by the composition."""
        ...


@dataclass(frozen=True, slots=True)
class Input:
    """What a routing predicate sees."""

    message: str
    """The message arriving at this point: the previous step's answer."""
    original: str
    """The message the whole pipeline was run with (the user's request)."""


def mount_options(runner: Runner, *, collect: str | None = None,
                  key: str | None = None) -> dict[str, Any]:
    """Input/output mapping for a mounted runner: the message in, its answer out.

    The answer becomes the pipeline's ``current`` message and its ``final_content``; with
    ``collect``, it is also stored under ``outputs[key]`` (parallel branches). A nested
    composition also receives the pipeline's ``original`` message (agents take only theirs).
    """
    nested = isinstance(runner, Composition)

    def take_message(parent: ReadView) -> Mapping[str, Any]:
        if nested:
            return {trace.MESSAGE: parent[trace.CURRENT], trace.ORIGINAL: parent[trace.ORIGINAL]}
        return {trace.MESSAGE: parent[trace.CURRENT]}

    def give_answer(inner: ReadView) -> Mapping[str, Any]:
        answer = inner.get(trace.FINAL_CONTENT, "")
        out: dict[str, Any] = {"current": answer, "final_content": answer}
        if collect is not None and key is not None:
            out = {collect: {key: answer}}
        return out

    return with_member(runner, {"input": take_message, "output": give_answer})


def is_runner(value: object) -> TypeGuard[Runner]:
    """Whether ``value`` is meant as a runner (it has a ``chart``), not as a function."""
    return getattr(value, "chart", None) is not None


def check_runner(runner: object, where: str) -> Chart:
    """The chart of ``runner``, or a ConfigurationError naming ``where`` it was passed."""
    chart = getattr(runner, "chart", None)
    if not isinstance(chart, Chart):
        raise ConfigurationError(
            f"{where}: {runner!r} is not a runner; pass an Agent, an LLMCall or a composition")
    return chart


def start(scope: Scope) -> None:
    """The pipeline's input becomes the current message (and the answer, if nothing runs).

    It is kept under ``current``: ``message`` is the read-only input of a nested pipeline.
    ``original`` is the outermost pipeline's message, handed down to nested compositions.
    The outermost pipeline also records the identity it was run under (``run(identity=...)``,
    when it has memory members), so an explanation re-runs it under that one; a run without
    one records nothing more than it did.
    """
    if "original" not in scope.args:  # nested: it arrived as a (read-only) input
        scope[trace.ORIGINAL] = scope.args[trace.MESSAGE]
        given = scope.args.get(trace.IDENTITY)  # MemberRun.args(): the record, or None
        if given is not None:
            scope[trace.IDENTITY] = given
    scope[trace.CURRENT] = scope.args[trace.MESSAGE]
    scope[trace.FINAL_CONTENT] = scope.args[trace.MESSAGE]


def map_runner(runner: Runner, fn: Callable[[Agent], Agent]) -> Runner:
    """``runner`` with ``fn`` applied to every agent in it (a composition: recursively).

    A runner that cannot be rebuilt (an ``LLMCall``, which has no context to leave out, or a
    hand-made chart) is kept as it is.
    """
    mapper = getattr(runner, "_map_agents", None)
    if not callable(mapper):
        return runner
    mapped: Runner = mapper(fn)
    return mapped


def source_ids(ids: object, where: str) -> frozenset[str]:
    """The source ids of a ``without(...)`` call; a bare string is refused, not split."""
    if isinstance(ids, str) or not isinstance(ids, Iterable) or not all(
            isinstance(i, str) for i in ids):
        raise ConfigurationError(
            f"{where}.without({ids!r}) takes a collection of source ids, e.g. "
            "without({'bad-fact'})")
    return frozenset(ids)


class Composition:
    """Base of Sequence, Parallel, Conditional, Loop and the patterns.

    Every composition can be rebuilt with its agents changed: ``without(ids)`` leaves the
    named context sources out of every member that has them (what an explanation re-runs to
    prove a cause), ``_map_agents(fn)`` applies ``fn`` to every member agent, recursively.
    """

    chart: Chart
    runners: list[Runner]

    def _remake(self, runners: list[Runner]) -> Self:
        """The same composition over ``runners`` (in the order of ``self.runners``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be rebuilt")

    def _map_agents(self, fn: Callable[[Agent], Agent]) -> Self:
        """A copy with ``fn(agent) -> agent`` applied to every member agent, recursively
        through nested compositions (and patterns); other runners are kept."""
        return self._remake([map_runner(runner, fn) for runner in self.runners])

    def without(self, ids: Iterable[str]) -> Self:
        """A copy whose member agents are rebuilt without the sources named in ``ids``.

        Injection ids, tool names and ``memory:<memory id>#<entry id>`` entries, as
        ``suspects_of`` names them; each is left out of every member that has it, and a
        member that has none of them is rebuilt unchanged.
        """
        removed = source_ids(ids, type(self).__name__)
        return self._map_agents(lambda agent: agent.without(removed))

    def dispatchers(self) -> list[EventDispatcher]:
        """Every agent's event dispatcher in the tree, once each."""
        found: dict[int, EventDispatcher] = {}
        for runner in self.runners:
            nested: Iterable[EventDispatcher]
            if isinstance(runner, Composition):
                nested = runner.dispatchers()
            else:
                events = getattr(runner, "events", None)
                nested = [events] if isinstance(events, EventDispatcher) else []
            for dispatcher in nested:
                found.setdefault(id(dispatcher), dispatcher)
        return list(found.values())

    def observers(self) -> list[Any]:
        """The observers (``Tracing(observe=...)``) of the agents in the tree, once each: a
        member's observer sees the whole composition's run, as one trace."""
        found: dict[int, Any] = {}
        for runner in self.runners:
            nested = (runner.observers() if isinstance(runner, Composition)
                      else [getattr(runner, "observe", None)])
            for observer in nested:
                if observer is not None:
                    found.setdefault(id(observer), observer)
        return list(found.values())

    async def run(self, message: str, *, run_id: str | None = None,
                  timeout: float | None = None, deps: Any = None,
                  identity: MemoryIdentity | None = None) -> RunResult:
        """Run the whole pipeline once; the result's recording spans every runner in it.
        ``deps`` reach every member agent's tools as ``ctx.deps`` (never recorded).

        ``identity`` is whose conversation the member agents with memory read and write (a
        member's own ``Agent(identity=...)`` otherwise). Each member run resolves and claims
        its own turn over the stores it writes to; the result's ``turn`` is the highest a
        member took (see ``compose/_members.py``). The recording keeps ``identity`` (in the
        run's own state, beside ``original``), so an explanation re-runs the members under it.
        A member that pauses (a check-in) pauses the whole: the result is ``paused`` and
        ``resume`` continues it.
        """
        if not isinstance(message, str):
            raise ConfigurationError(f"run() takes the message as a str, got {message!r}")
        members = start_members(self, identity)
        args: dict[str, Any] = {trace.MESSAGE: message}
        if members is not None:
            args.update(members.args())
        return await self._drive(members, lambda recorders: self.chart.run(
            args, recorders=recorders, timeout=timeout, run_id=run_id), deps)

    async def resume(self, checkpoint: Mapping[str, Any], answer: object = None, *,
                     timeout: float | None = None, deps: Any = None) -> RunResult:
        """Continue a run paused in a member (``result.checkpoint`` of a paused result) with
        the person's ``answer``, e.g. ``check_in_approved(by=...)``, here or in another
        process; the members after the paused one then run as ``run`` would have run them."""
        flow = _paused_flow(checkpoint, answer)
        members = resumed_members(flow)
        return await self._drive(members, lambda recorders: self.chart.resume(
            flow, answer, recorders=recorders, timeout=timeout), deps)

    def resume_sync(self, checkpoint: Mapping[str, Any], answer: object = None,
                    **options: Any) -> RunResult:
        return run_sync(self.resume(checkpoint, answer, **options))

    async def _drive(self, members: MemberRun | None,
                     start: Callable[[list[Recorder]], Awaitable[FlowRun]],
                     deps: Any) -> RunResult:
        """Walk the chart (``start(recorders)``) with every member's listeners live."""
        bridges: list[Recorder] = [EventBridge(d, id=f"agent-events-{i}")
                              for i, d in enumerate(self.dispatchers())]
        bridges.extend(run_loggers(self.chart.name))  # [] unless agentfootprint.* logs INFO
        name = self.chart.description or self.chart.name
        bridges.extend(o.recorder(name) for o in self.observers())  # members' observe=otel()
        bridges, live, pace = tap_stream(bridges, _unheard)  # a run_stream's: to its reader
        token = live_emit.set(live if pace is not None else None)
        pacing = stream_pace.set(pace)
        membership = member_run.set(members)
        try:
            with bound_deps(deps):
                flow = await start(bridges)
        except RunError as exc:
            if members is not None:  # a failed run gives back its members' turn claims
                await _end_claims_noting(self, exc)
            if isinstance(exc, StageError):
                raise_framework_cause(exc)
            raise
        finally:
            live_emit.reset(token)
            stream_pace.reset(pacing)
            member_run.reset(membership)
        turn = await end_member_claims(self, flow) if members is not None else 1
        return self._finished(RunResult(content=str(flow.state.get(trace.FINAL_CONTENT, "")),
                         run_id=flow.run_id, turn=turn,
                         recording=flow, status="paused" if flow.paused else "done",
                         pause=copy_value(flow.pause_data) if flow.paused else None,
                         source=self))

    def _finished(self, result: RunResult) -> RunResult:
        """The result of a run or a resume, as this kind of composition reports it."""
        return result

    def run_sync(self, message: str, **options: Any) -> RunResult:
        return run_sync(self.run(message, **options))

    def run_stream(self, message: str, *, max_buffered: int = 256,
                   **options: Any) -> RunStream:
        """``run(message, **options)`` as an ordered stream of typed events, every member's
        included (see ``agent/_stream.py``): ``async with pipeline.run_stream(...) as run:``."""
        return RunStream(self, lambda: self.run(message, **options), message=message,
                         max_buffered=max_buffered)


async def _end_claims_noting(composition: Composition, error: RunError) -> None:
    """End a failed run's member turn claims, as an agent's own failed run ends its claim
    (a member that wrote settles, one that did not gives its turn back); a store that fails
    here never hides the run's error."""
    if not isinstance(error.run, FlowRun):
        return
    try:
        await end_member_claims(composition, error.run)
    except Exception as exc:
        error.add_note(f"its members' turn claims could not be ended: {exc!r}")


def _paused_flow(checkpoint: object, answer: object) -> Mapping[str, Any]:
    """The flow checkpoint of a paused composition's checkpoint, refused when it is none."""
    if isinstance(checkpoint, RunResult):
        raise ConfigurationError("resume() takes result.checkpoint, not the RunResult")
    if (not isinstance(checkpoint, Mapping) or checkpoint.get("status") != "paused"
            or not isinstance(checkpoint.get("flow"), Mapping)):
        raise ConfigurationError(
            "resume() takes the checkpoint of a paused RunResult (status 'paused', a dict); "
            "json.loads a saved one first")
    pause = checkpoint.get("pause")
    if isinstance(pause, Mapping) and pause.get("kind") == "check_in" and not (
            isinstance(answer, Mapping) and answer.get("check_in") in ("approved", "declined")):
        raise ConfigurationError(
            f"this run paused for consent to call {pause.get('tool_name')!r}; answer with "
            f"check_in_approved(by=...) or check_in_declined(by=..., note=...), not {answer!r}")
    flow: Mapping[str, Any] = checkpoint["flow"]
    return flow


def _unheard(event: FlowEvent) -> None:
    """A composition's own live path: its members' tokens reach only a run_stream."""
