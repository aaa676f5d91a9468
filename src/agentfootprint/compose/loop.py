"""``Loop``: run a runner again on its own answer, a fixed number of times or until done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ..flow import Decision, flow_chart
from .base import Composition, check_runner, mount_options, start

__all__ = ["Loop"]


class Loop(Composition):
    """``Loop(runner, times=3, until=lambda answer: "DONE" in answer)``.

    The runner's answer becomes its next message. The loop stops after ``times`` passes or as
    soon as ``until(answer)`` holds, whichever comes first; the decision is on the record.
    """

    def __init__(self, runner: Any, *, times: int,
                 until: Callable[[str], bool] | None = None, name: str = "Loop") -> None:
        if not isinstance(times, int) or times < 1:
            raise ConfigurationError(f"Loop(times={times!r}) must be an int >= 1")
        if until is not None and not callable(until):
            raise ConfigurationError(f"Loop(until={until!r}) must be callable")
        chart = check_runner(runner, "Loop body")

        def again(scope: Any) -> Decision:
            passes = int(scope.get("passes") or 0) + 1
            scope["passes"] = passes
            answer = str(scope["final_content"])
            done = bool(until(answer)) if until is not None else False
            chosen = "done" if done or passes >= times else "again"
            label = ("until() held" if done else f"{passes} of {times} passes"
                     if chosen == "done" else f"pass {passes} of {times}")
            rule = {"type": "function", "rule": 0, "branch": chosen, "matched": True,
                    "label": label, "inputs": [{"key": "passes", "value": str(passes)}]}
            return Decision(chosen, {"chosen": chosen, "default": "done", "rules": [rule]})

        def finish(scope: Any) -> None:
            scope["loop_finished"] = True

        self.runners = [runner]
        self.chart = (
            flow_chart("Start", start, id="start", description="Take the message")
            .subflow("body", chart, name="Body", **mount_options())
            .decide("Again", again, id="again", description="Run again or stop")
            .branch("again", "Again", lambda scope: None, id="repeat", loop_to="body")
            .branch("done", "Done", finish, id="done")
            .end()
            .build(description=name)
        )
