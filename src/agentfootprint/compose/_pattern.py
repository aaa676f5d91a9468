"""What the named patterns share: the ``Pattern`` result type and small building blocks.

A pattern is a composition like ``Sequence`` or ``Loop``: one chart in which every runner it
uses is mounted as a subflow, so it nests in any other composition and one recording spans
it all. Its bookkeeping (votes, rounds, hops, scores) is ordinary state written by ordinary
stages, and every choice it makes is a decider or selector with its evidence on the record.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Self, cast

from ..agent._agent import RunResult
from ..errors import ConfigurationError
from ..flow import Chart, Scope
from ..flow._describe import summarize
from ..flow._scope import ReadView
from ..runs import trace
from ._base import Composition, Runner, start
from ._members import with_member

__all__ = ["MAX_PASSES", "Pattern"]

MAX_PASSES = 500
"""The largest loop budget a pattern accepts (the engine refuses 1000 back edges)."""


class Pattern(Composition):
    """A named pattern (``kind``) over runners; runs, nests and records like any composition.

    ``run()`` returns a ``RunResult`` whose ``stopped_early`` names the budget that ended the
    pattern before it finished on its own terms (``"max_rounds"``, ``"max_hops"``), else None.
    """

    def __init__(self, *, kind: str, chart: Chart, runners: list[Runner],
                 remake: Callable[[list[Runner]], Pattern] | None = None) -> None:
        self.kind = kind
        self.chart = chart
        self.runners = list(runners)
        self._remake_with = remake

    def _remake(self, runners: list[Runner]) -> Self:
        """The pattern built again, with the same options, over ``runners``."""
        if self._remake_with is None:
            raise ConfigurationError(
                f"{self!r} was built without a way to rebuild it; build it with one of the "
                "pattern functions (reflection, debate, ...) to re-run it without a source")
        return cast(Self, self._remake_with(list(runners)))

    def _finished(self, result: RunResult) -> RunResult:
        """The result of a run or a resume, naming the budget that stopped the pattern."""
        stopped = result.recording.state.get(trace.STOPPED_EARLY)
        result.stopped_early = str(stopped) if stopped else None
        return result

    def __repr__(self) -> str:
        return f"<{self.kind} {self.chart.description or self.chart.name!r}>"


# -- configuration checks ---------------------------------------------------------------------


def check_budget(value: object, *, where: str, name: str, minimum: int = 1,
                 maximum: int = MAX_PASSES) -> int:
    """An int within ``[minimum, maximum]``, else a ConfigurationError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{where}({name}={value!r}) must be an int from {minimum} to {maximum}; "
            f"pass {name}=<number> to bound the pattern")
    return value


def check_callable(value: object, *, where: str, name: str, what: str) -> None:
    """``value`` must be callable (sync or async); the error says what it is for."""
    if not callable(value):
        raise ConfigurationError(f"{where}({name}={value!r}) must be a function {what}")


def check_ids(ids: list[str], *, where: str, reserved: frozenset[str]) -> None:
    """Branch ids become stage ids: non-empty, distinct, no ``/`` or ``#``, not reserved."""
    for branch_id in ids:
        if not isinstance(branch_id, str) or not branch_id or "/" in branch_id \
                or "#" in branch_id:
            raise ConfigurationError(
                f"{where}: id {branch_id!r} must be a non-empty str without '/' or '#'")
        if branch_id in reserved:
            raise ConfigurationError(
                f"{where}: id {branch_id!r} is reserved ({', '.join(sorted(reserved))}); "
                "rename it")
    if len(set(ids)) != len(ids):
        raise ConfigurationError(f"{where}: ids {ids!r} must be distinct")


# -- run-time helpers --------------------------------------------------------------------------


async def call_user(fn: Callable[..., Any], *args: object) -> Any:
    """Call a user callback that may be sync or async."""
    out = fn(*args)
    if inspect.isawaitable(out):
        out = await out
    return out


def begin(scope: Scope) -> None:
    """The pattern's input becomes the current message, the answer so far, and the task."""
    start(scope)
    scope[trace.TASK] = scope.args[trace.MESSAGE]


def skip(scope: Scope) -> None:
    """A branch that only routes (a loop's back edge, a finish line)."""


def wire(message: Callable[[ReadView], str],
         answer: Callable[[str], Mapping[str, Any]], runner: object = None) -> dict[str, Any]:
    """Mount options: ``message(parent_state)`` in, ``answer(final_content)`` written back
    (``runner``, when it is an agent with memory, also gets its identity and turn)."""

    def take(parent: ReadView) -> Mapping[str, Any]:
        return {trace.MESSAGE: message(parent)}

    def give(inner: ReadView) -> Mapping[str, Any]:
        return answer(str(inner.get(trace.FINAL_CONTENT, "")))

    return with_member(runner, {"input": take, "output": give})


def as_answer(text: str) -> dict[str, Any]:
    """What a runner that answers for the whole pattern writes back."""
    return {trace.CURRENT: text, trace.FINAL_CONTENT: text}


def take_answer(key: str) -> Callable[[Scope], None]:
    """A stage that hands back the answer stored under ``key`` (reads exactly that key).

    Reading one key, not the whole pool of candidates, keeps the causal slice precise: the
    answer links to the one branch that produced it, and the choice links through the decider.
    """

    def take(scope: Scope) -> None:
        text = str(scope[key])
        scope[trace.CURRENT] = text
        scope[trace.FINAL_CONTENT] = text

    return take


def rule(index: int, branch: str, label: str, matched: bool,
         **inputs: object) -> dict[str, Any]:
    """One function-rule of a decision's evidence, in the shape the narrative renders."""
    return {"type": "function", "rule": index, "branch": branch, "label": label,
            "matched": matched,
            "inputs": [{"key": key, "value": summarize(value)} for key, value in inputs.items()]}
