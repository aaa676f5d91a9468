"""``Loop``: run a runner again on its own answer, within a budget of passes and/or wall time."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Self

from ..errors import ConfigurationError
from ..flow import Decision, Scope, flow_chart
from ..runs import trace
from ._base import Composition, Runner, check_runner, mount_options, start

__all__ = ["Loop"]


class Loop(Composition):
    """``Loop(runner, times=3, until=lambda answer: "DONE" in answer)``.

    The runner's answer becomes its next message. A budget is mandatory: ``times`` (passes)
    and/or ``max_seconds`` (wall time, checked after each pass). The loop stops when a budget
    is spent or as soon as ``until(answer)`` holds, whichever comes first; the decision is on
    the record.
    """

    def __init__(self, runner: Runner, *, times: int | None = None,
                 until: Callable[[str], bool] | None = None,
                 max_seconds: float | None = None, name: str = "Loop") -> None:
        if times is None and max_seconds is None:
            raise ConfigurationError(
                "Loop needs a budget: pass times=N (passes) and/or max_seconds=S (wall time)")
        if times is not None and (isinstance(times, bool) or not isinstance(times, int)
                                  or times < 1):
            raise ConfigurationError(f"Loop(times={times!r}) must be an int >= 1")
        if max_seconds is not None and not (
                isinstance(max_seconds, int | float) and math.isfinite(max_seconds)
                and max_seconds > 0):
            raise ConfigurationError(
                f"Loop(max_seconds={max_seconds!r}) must be a positive number of seconds")
        if until is not None and not callable(until):
            raise ConfigurationError(f"Loop(until={until!r}) must be callable")
        chart = check_runner(runner, "Loop body")
        self._options: dict[str, Any] = {"times": times, "until": until,
                                         "max_seconds": max_seconds, "name": name}

        def begin(scope: Scope) -> None:
            start(scope)
            if max_seconds is not None:
                scope[trace.LOOP_STARTED] = time.monotonic()

        def again(scope: Scope) -> Decision:
            passes = int(scope.get(trace.PASSES) or 0) + 1
            scope[trace.PASSES] = passes
            answer = str(scope[trace.FINAL_CONTENT])
            done = bool(until(answer)) if until is not None else False
            out_of_passes = times is not None and passes >= times
            out_of_time = (max_seconds is not None
                           and time.monotonic() - scope[trace.LOOP_STARTED] >= max_seconds)
            chosen = "done" if done or out_of_passes or out_of_time else "again"
            if done:
                label = "until() held"
            elif out_of_passes:
                label = f"{passes} of {times} passes"
            elif out_of_time:
                label = f"the {max_seconds} s wall-time budget was spent after {passes} passes"
            else:
                label = f"pass {passes}" + (f" of {times}" if times is not None else "")
            rule = {"type": "function", "rule": 0, "branch": chosen, "matched": True,
                    "label": label, "inputs": [{"key": "passes", "value": str(passes)}]}
            return Decision(chosen, {"chosen": chosen, "default": "done", "rules": [rule]})

        def finish(scope: Scope) -> None:
            scope[trace.LOOP_FINISHED] = True

        self.runners = [runner]
        self.chart = (
            flow_chart("Start", begin, id="start", description="Take the message")
            .subflow("body", chart, name="Body", **mount_options(runner))
            .decide("Again", again, id="again", description="Run again or stop")
            .branch("again", "Again", lambda scope: None, id="repeat", loop_to="body")
            .branch("done", "Done", finish, id="done")
            .end()
            .build(description=name)
        )

    def _remake(self, runners: list[Runner]) -> Self:
        (body,) = runners
        return type(self)(body, **self._options)
