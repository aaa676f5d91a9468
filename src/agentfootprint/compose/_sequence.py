"""``Sequence``: runners one after another, each answering the previous one's answer."""

from __future__ import annotations

from typing import Self

from ..errors import ConfigurationError
from ..flow import flow_chart
from ._base import Composition, Runner, check_runner, mount_options, start

__all__ = ["Sequence"]


class Sequence(Composition):
    """``Sequence(("classify", a), ("respond", b))``: ``b`` receives ``a``'s answer."""

    def __init__(self, *steps: tuple[str, Runner], name: str = "Sequence") -> None:
        if not steps:
            raise ConfigurationError("Sequence needs at least one (id, runner) step")
        builder = flow_chart("Start", start, id="start", description="Take the message")
        self.runners = []
        for step in steps:
            if not isinstance(step, tuple) or len(step) != 2 or not isinstance(step[0], str):
                raise ConfigurationError(f"Sequence step {step!r} must be (id, runner)")
            step_id, runner = step
            chart = check_runner(runner, f"Sequence step {step_id!r}")
            builder = builder.subflow(step_id, chart, name=step_id, **mount_options(runner))
            self.runners.append(runner)
        self.chart = builder.build(description=name)
        self._ids = [step[0] for step in steps]
        self._name = name

    def _remake(self, runners: list[Runner]) -> Self:
        return type(self)(*zip(self._ids, runners, strict=True), name=self._name)
