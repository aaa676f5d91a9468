"""``Parallel``: runners side by side on the same message, their answers merged into one."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Self

from ..errors import ConfigurationError
from ..flow import Scope, flow_chart
from ..runs import trace
from ._base import Composition, Runner, check_runner, mount_options, start

__all__ = ["Parallel"]

Merge = Callable[[dict[str, str]], str | Awaitable[str]]


def _join(answers: dict[str, str]) -> str:
    return "\n\n".join(f"{key}: {value}" for key, value in answers.items())


class Parallel(Composition):
    """``Parallel(("legal", a), ("ethics", b), merge=fn)``; ``fn({"legal": ..., ...}) -> str``.

    Without ``merge`` the answers are joined as ``id: answer`` paragraphs, in branch order.
    A branch that fails fails the whole (fail-fast), so a merge never sees a missing answer.
    """

    def __init__(self, *branches: tuple[str, Runner], merge: Merge | None = None,
                 name: str = "Parallel") -> None:
        if len(branches) < 2:
            raise ConfigurationError("Parallel needs at least two (id, runner) branches")
        ids = [b[0] for b in branches if isinstance(b, tuple) and len(b) == 2]
        if len(ids) != len(branches) or len(set(ids)) != len(ids):
            raise ConfigurationError(
                "Parallel branches must be (id, runner) pairs with distinct ids")
        if merge is not None and not callable(merge):
            raise ConfigurationError(f"Parallel merge= must be callable, got {merge!r}")
        combine = merge or _join
        self._ids, self._merge, self._name = [b[0] for b in branches], merge, name
        order = list(ids)

        async def merge_answers(scope: Scope) -> None:
            outputs = scope.get(trace.OUTPUTS) or {}
            answers = {key: str(outputs.get(key, "")) for key in order}
            merged = combine(answers)
            if inspect.isawaitable(merged):
                merged = await merged
            scope[trace.CURRENT] = str(merged)
            scope[trace.FINAL_CONTENT] = str(merged)

        self.runners = [runner for _, runner in branches]
        children = [(branch_id, check_runner(runner, f"Parallel branch {branch_id!r}"),
                     {**mount_options(runner, collect="outputs", key=branch_id), "name": branch_id})
                    for branch_id, runner in branches]
        self.chart = (
            flow_chart("Start", start, id="start", description="Take the message")
            .parallel(*children, fail_fast=True)
            .then("Merge", merge_answers, id="merge", description="Merge the branch answers")
            .build(description=name)
        )

    def _remake(self, runners: list[Runner]) -> Self:
        return type(self)(*zip(self._ids, runners, strict=True), merge=self._merge,
                          name=self._name)
