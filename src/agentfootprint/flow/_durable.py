"""The durability seam: every nondeterministic or effectful step of a run goes through here.

A run's stages are deterministic given what their effectful steps return: the model's answer,
a tool's result, what a store claimed, read or wrote, a clock or an id. Those steps are called
through :func:`durable_step`, which runs them directly unless the run is executed by a
durable engine (``agentfootprint.distributed``: DBOS). The engine puts a :class:`StepRunner`
in :data:`step_runner` for the run; the runner records each step's result, so that a process
that recovers a killed run replays the run from its start and every finished step answers
from its record instead of running again. A step killed mid-execution has no record and runs
again (at least once): tools get a stable ``ctx.idempotency_key`` for that.

Contract for a hook: the step's function must be the whole effect (so a replay skips all of it)
and its result must be picklable. Without a runner a hook costs one context-variable read.
This module sits in ``flow`` because every layer above (tools, memory, agent) has steps to
route through it; it imports nothing.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

__all__ = ["StepRunner", "durable_step", "durable_timed", "step_runner"]

T = TypeVar("T")


class StepRunner(Protocol):
    """Runs one effectful step of a run durably: at least once, its result kept, a replay
    answered from the kept result. ``kind`` names the step (``llm``, ``tool:refund``,
    ``turn-claim``, ``memory-write``, ``run-begin``) in the engine's own records."""

    async def step(self, kind: str, fn: Callable[[], Awaitable[T]]) -> T: ...


step_runner: contextvars.ContextVar[StepRunner | None] = contextvars.ContextVar(
    "agentfootprint_step_runner", default=None)
"""The runner of the run the current task belongs to; ``None`` (the default): run directly."""


async def durable_step(kind: str, fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()``, through the run's step runner when it has one."""
    runner = step_runner.get()
    if runner is None:
        return await fn()
    return await runner.step(kind, fn)


async def _timed(fn: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    started = time.perf_counter()
    value = await fn()
    return value, time.perf_counter() - started


async def durable_timed(kind: str, fn: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """``(await fn(), seconds it took)``: the clock is read inside the step, so a replay
    records the latency the first execution measured, not the replay's."""
    runner = step_runner.get()
    if runner is None:  # ``_timed``, inlined: one coroutine less per model call
        started = time.perf_counter()
        value = await fn()
        return value, time.perf_counter() - started
    return await runner.step(kind, lambda: _timed(fn))
