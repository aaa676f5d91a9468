"""What a session's turn runs: an ``Agent``, or a composition given the agent's turn API.

The standing agent drives every target through the same four calls an ``Agent`` has —
``name``, ``run(message, **options)``, ``run_stream(message, **options)`` and
``resume(checkpoint, answer)`` — so a ``Sequence``, ``Parallel``, ``Conditional``, ``Loop`` or a
pattern (``reflection``, ``debate``, ...) is served like an agent. ``ServedComposition`` is that
seam for compositions. What a composition's turn means follows ``Composition.run``:

- the team runs once on the turn's message (a composition has no conversation of its own:
  no ``continue_from``, and an explanation re-runs it with the message alone), so each turn's
  members see that turn's message; the session numbers the turns, keeps the transcript and
  names the session in each run id (``{session}.{turn}.{nonce}``);
- a member that pauses (a check-in, an ask) pauses the whole run: the result says ``paused``
  with the member's pause, its checkpoint is the engine checkpoint of the composition's chart,
  and ``resume`` continues the composition from there, in any process;
- each run (paused, resumed, finished or failed) is saved in the run store its member agents
  record to (``Tracing(run_store=...)``).

Members with memory (``Agent(memory=...)``) remember the session, as a served ``Agent`` does:
each turn runs under ``MemoryIdentity(conversation_id=session id, principal=owner)`` (the
standing agent passes it as ``run(..., identity=...)``), so a served agent and a served team
on one session share one conversation; each member run resolves and claims its own turn in
that store (``compose/_members.py``), so no member overwrites another's turn, and a member's
recall reaches back over every earlier turn of the session. A paused turn's checkpoint carries
that identity, so ``resume`` restores it in any process; the session's identity is passed
again and a checkpoint carrying another is refused.

What cannot hold is refused when the target is checked (``check_target``, at server start),
in one sentence: a member with a redaction policy (a composition's recording does not apply
it, so the session store would keep what it masks), members recording to different run stores.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..agent._agent import Agent, RunResult
from ..agent._stream import RunStream
from ..compose._base import Composition
from ..errors import ConfigurationError, RunError
from ..flow import FlowRun

if TYPE_CHECKING:
    from ..memory._identity import MemoryIdentity
    from ..runs._store import RunStorePort

__all__ = ["ServedComposition", "check_target", "remembers", "served"]


def served(made: object, where: str) -> Agent | ServedComposition:
    """What a turn runs, from what ``where`` (the factory, or the target) gave."""
    if isinstance(made, Agent | ServedComposition):
        return made
    if isinstance(made, Composition):
        return ServedComposition(made)
    raise ConfigurationError(
        f"{where} gave {type(made).__name__}, not an Agent or a composition; return the "
        "Agent(...) or the Sequence(...)/pattern a turn should run")


def remembers(target: Agent | ServedComposition) -> bool:
    """Whether the target keeps its conversations in a memory store (an agent's memory, or
    a composition member's): its turns then run under the session's identity."""
    if isinstance(target, ServedComposition):
        return target.remembers
    return isinstance(target, Agent) and bool(target.spec.memories)


def check_target(make: Callable[[], Any], where: str) -> str:
    """Build the target once, as a turn would, and check it can be served; its name.

    The instance is dropped: a factory is called afresh for every turn. An async factory is
    awaited on a thread of its own (this runs at startup, maybe inside a running loop). A
    factory that raises, cannot be awaited, or gives something that is not servable is a
    ``ConfigurationError`` naming ``where`` and the fix.
    """
    try:
        made = make()
        if inspect.isawaitable(made):
            made = _await_aside(made)
    except Exception as exc:
        raise ConfigurationError(
            f"{where} failed to build what to serve ({type(exc).__name__}: {exc}); fix it, "
            "or check the environment it reads") from None
    return served(made, where).name


def _await_aside(awaitable: Any) -> Any:
    """Await ``awaitable`` to its end on a thread with its own event loop."""
    import concurrent.futures

    async def wait() -> Any:
        return await awaitable

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="serve-check") as pool:
        return pool.submit(asyncio.run, wait()).result()


def members(runner: object) -> Iterator[Any]:
    """Every runner inside ``runner`` that is not itself a composition, depth first."""
    if isinstance(runner, Composition):
        for inner in runner.runners:
            yield from members(inner)
    else:
        yield runner


class ServedComposition:
    """A composition with the turn API the standing agent drives (see the module docstring)."""

    def __init__(self, composition: Composition) -> None:
        self.composition = composition
        self.chart = composition.chart
        self.name = composition.chart.description or composition.chart.name
        stores: dict[int, Any] = {}
        self.remembers = False
        """Whether a member has memory (its turns then run under the session's identity)."""
        for member in members(composition):
            label = repr(getattr(member, "name", type(member).__name__))
            if getattr(getattr(member, "spec", None), "memories", None):
                self.remembers = True
            if getattr(member, "redaction", None) is not None:
                raise ConfigurationError(
                    f"composition {self.name!r} cannot be served: its member {label} has a "
                    "redaction policy, which a composition's recording does not apply, so "
                    "the session store would keep what it masks; serve that agent alone")
            store = getattr(member, "run_store", None)
            if store is not None:
                stores.setdefault(id(store), store)
        if len(stores) > 1:
            raise ConfigurationError(
                f"composition {self.name!r} cannot be served: its members record to "
                f"{len(stores)} different run stores and its runs are recorded in one; give "
                "every member the same Tracing(run_store=...)")
        self.run_store: RunStorePort | None = next(iter(stores.values()), None)

    def __repr__(self) -> str:
        return f"<ServedComposition {self.name!r}>"

    async def run(self, message: str, *, run_id: str | None = None,
                  timeout: float | None = None, deps: Any = None, turn: int = 1,
                  identity: MemoryIdentity | None = None) -> RunResult:
        """One turn: the composition run on ``message``; ``turn`` is the session's number,
        ``identity`` the session's conversation its memory members read and write."""
        try:
            result = await self.composition.run(message, run_id=run_id, timeout=timeout,
                                                deps=deps, identity=identity)
        except RunError as exc:
            await self._record_failure(exc)
            raise
        return await self._settled(result, turn)

    def run_stream(self, message: str, *, max_buffered: int = 256,
                   **options: Any) -> RunStream:
        """``run`` as the stream of every member's events (``Composition.run_stream``'s)."""
        return RunStream(self, lambda: self.run(message, **options), message=message,
                         max_buffered=max_buffered)

    async def resume(self, checkpoint: Mapping[str, Any], answer: object = None, *,
                     timeout: float | None = None, deps: Any = None,
                     identity: MemoryIdentity | None = None) -> RunResult:
        """Continue the paused run ``checkpoint`` holds (``RunResult.checkpoint`` of a paused
        turn) with the person's ``answer``. The members' identity comes from the checkpoint;
        ``identity`` (the session's) is checked against it, so a turn never resumes into
        another conversation."""
        if (not isinstance(checkpoint, Mapping) or checkpoint.get("status") != "paused"
                or not isinstance(checkpoint.get("flow"), Mapping)):
            raise ConfigurationError(
                f"resume() of composition {self.name!r} takes the checkpoint of a paused "
                "turn (status 'paused'); a finished turn is followed by a new message")
        pause = checkpoint.get("pause")
        if isinstance(pause, Mapping) and pause.get("kind") == "check_in" and not (
                isinstance(answer, Mapping)
                and answer.get("check_in") in ("approved", "declined")):
            raise ConfigurationError(
                f"this run paused for consent to call {pause.get('tool_name')!r}; answer with "
                f"check_in_approved(by=...) or check_in_declined(by=..., note=...), not "
                f"{answer!r}")
        if identity is not None and self.remembers:
            self._check_identity(checkpoint, identity)
        try:
            result = await self.composition.resume(checkpoint, answer, timeout=timeout,
                                                   deps=deps)
        except RunError as exc:
            await self._record_failure(exc)
            raise
        turn = checkpoint.get("turn")
        return await self._settled(result, turn if isinstance(turn, int) else 1)

    def _check_identity(self, checkpoint: Mapping[str, Any],
                        identity: MemoryIdentity) -> None:
        """Refuse a checkpoint whose members ran under another identity than ``identity``."""
        from ..memory._stages import identity_from_record
        from ..runs import trace

        args = checkpoint["flow"].get("args")
        carried = identity_from_record(args.get(trace.IDENTITY)) if isinstance(
            args, Mapping) else None
        if carried != identity:
            raise ConfigurationError(
                f"resume() of composition {self.name!r}: the checkpoint's members ran under "
                f"{'no identity' if carried is None else 'another identity'}, not the "
                "session's, so its memory would go to another conversation; resume the "
                "checkpoint of this session's own paused turn")

    async def _settled(self, result: RunResult, turn: int) -> RunResult:
        """The result with the session's turn, saved in the run store."""
        result.turn = turn
        if self.run_store is not None:
            from ..runs._writer import writer_for

            store = self.run_store
            try:
                await writer_for(store).call(store.save, result)
            except Exception as exc:
                exc.add_note(f"run {result.run_id} finished, but {store!r} could not record it")
                raise
        return result

    async def _record_failure(self, error: RunError) -> None:
        """A failed run is kept in the run store too (what it recorded up to the failure)."""
        store = self.run_store
        if store is None or not isinstance(error.run, FlowRun):
            return
        from ..runs._writer import writer_for

        try:
            await writer_for(store).call(store.save, error.run)
        except Exception as exc:  # never hide the run's own error behind the store's
            error.add_note(f"{store!r} could not record this failed run: {exc!r}")
