"""``Conditional``: route the message to the first runner whose predicate holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from ..errors import ConfigurationError, RunError
from ..flow import Decision, Scope, flow_chart
from ..flow._describe import summarize
from ..runs import trace
from ._base import Composition, Input, Runner, check_runner, mount_options, start

__all__ = ["Conditional"]

OTHERWISE = "otherwise"


class Conditional(Composition):
    """``Conditional(("urgent", lambda i: i.message.startswith("URGENT"), a), otherwise=b)``.

    Predicates see an ``Input``: ``.message`` (the previous step's answer) and ``.original``
    (the message the pipeline was run with); the first that holds wins, and the decision is
    recorded with the predicates it evaluated. A predicate that raises fails the run with an
    error naming its branch: read as false, a bug would silently route to ``otherwise``.
    """

    def __init__(self, *branches: tuple[str, Callable[[Input], bool], Runner],
                 otherwise: Runner,
                 name: str = "Conditional") -> None:
        if not branches:
            raise ConfigurationError("Conditional needs at least one (id, predicate, runner)")
        for branch in branches:
            if (not isinstance(branch, tuple) or len(branch) != 3
                    or not isinstance(branch[0], str) or not callable(branch[1])):
                raise ConfigurationError(
                    f"Conditional branch {branch!r} must be (id, predicate, runner)")
        ids = [b[0] for b in branches]
        if len(set(ids)) != len(ids) or OTHERWISE in ids:
            raise ConfigurationError(
                f"Conditional branch ids must be distinct and not {OTHERWISE!r}")
        routes = [(b[0], b[1]) for b in branches]
        self._routes, self._name = routes, name

        def route(scope: Scope) -> Decision:
            message, original = str(scope[trace.CURRENT]), str(scope[trace.ORIGINAL])
            rules = []
            for index, (branch_id, predicate) in enumerate(routes):
                rule: dict[str, Any] = {"type": "function", "rule": index, "branch": branch_id,
                                        "label": f"{branch_id} predicate", "matched": False,
                                        "inputs": [{"key": "message",
                                                    "value": summarize(message)}]}
                try:
                    rule["matched"] = bool(predicate(Input(message, original)))
                except Exception as exc:
                    raise RunError(
                        f"{name}: the predicate of branch {branch_id!r} raised "
                        f"{type(exc).__name__}: {exc}; fix it — return False when the branch "
                        "does not apply, rather than raise") from exc
                rules.append(rule)
                if rule["matched"]:
                    return Decision(branch_id, {"chosen": branch_id, "default": OTHERWISE,
                                                "rules": rules})
            return Decision(OTHERWISE, {"chosen": OTHERWISE, "default": OTHERWISE,
                                        "rules": rules})

        self.runners = [b[2] for b in branches] + [otherwise]
        builder = (flow_chart("Start", start, id="start", description="Take the message")
                   .decide("Route", route, id="route",  # trace: own id, not the agent's
                           description="Choose a branch"))
        for branch_id, _, runner in branches:
            builder = builder.branch(branch_id, branch_id,
                                     check_runner(runner, f"Conditional branch {branch_id!r}"),
                                     **mount_options(runner))
        builder = builder.branch(OTHERWISE, OTHERWISE,
                                 check_runner(otherwise, "Conditional otherwise"),
                                 **mount_options(otherwise))
        self.chart = builder.default(OTHERWISE).end().build(description=name)

    def _remake(self, runners: list[Runner]) -> Self:
        *branches, otherwise = runners
        return type(self)(*((bid, predicate, runner) for (bid, predicate), runner
                            in zip(self._routes, branches, strict=True)),
                          otherwise=otherwise, name=self._name)
