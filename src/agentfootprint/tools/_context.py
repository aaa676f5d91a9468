"""``RunContext``: what a running tool may know about its call, and the run's dependencies.

A tool asks for it by annotating a parameter (``ctx: RunContext[Deps]``); that parameter is
not shown to the model. ``deps`` is whatever the caller passed to ``agent.run(..., deps=...)``:
a database session, an HTTP client, the signed-in user. Deps are live objects, so they are
never recorded: they live in a context variable for the length of the run (never in run
state, a checkpoint, an event or the run store), and a resumed run is given them again.

An agent run inside another run (a composition's member, an agent used as a tool) sees the
enclosing run's deps unless it is given its own. ``ToolContext`` is the same class under its
older name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic

from typing_extensions import TypeVar

from ..errors import ConfigurationError

__all__ = ["DepsT", "RunContext", "ToolContext", "bound_deps", "deps_error", "run_deps"]

DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's dependencies (``Any`` when a tool does not say)."""

_run_deps: ContextVar[object | None] = ContextVar("agentfootprint_run_deps", default=None)


class RunContext(Generic[DepsT]):
    """One tool call's context: its ids and the run's ``deps``.

    Built by the agent for every call; in a unit test build one by hand,
    ``RunContext(deps=Deps(...))`` (the ids then have placeholder values), and call the tool's
    function with it: ``await lookup_order.fn(ctx, "A-1001")``.
    """

    __slots__ = ("_deps", "_missed", "idempotency_key", "iteration", "run_id", "tool_call_id",
                 "tool_name")

    tool_call_id: str
    """The model's id for this call."""
    iteration: int
    """The loop iteration the call was made in (1 for the first)."""
    run_id: str
    idempotency_key: str
    """``{run_id}:{tool_call_id}``: the same for this call in the run and in a resume of it,
    so a tool with an effect (a payment, an email) can apply it at most once by keeping it.
    Filled from the run id and call id when not given."""
    tool_name: str
    """The name of the tool being called (empty in a context built by hand)."""

    def __init__(self, tool_call_id: str = "call", iteration: int = 1, run_id: str = "run",
                 idempotency_key: str = "", *, deps: DepsT | None = None,
                 tool_name: str = "") -> None:
        self.tool_call_id = tool_call_id
        self.iteration = iteration
        self.run_id = run_id
        self.idempotency_key = idempotency_key or f"{run_id}:{tool_call_id}"
        self.tool_name = tool_name
        self._deps = deps
        self._missed: ConfigurationError | None = None

    @property
    def deps(self) -> DepsT:
        """The run's dependencies (``agent.run(..., deps=...)``).

        Raises ``ConfigurationError`` naming the tool when the run was given none; the agent
        then fails the run with that error rather than let the model read it.
        """
        if self._deps is None:
            named = f"tool {self.tool_name!r}" if self.tool_name else "this tool"
            self._missed = ConfigurationError(
                f"{named} reads ctx.deps, but this run was given no deps; pass them with "
                "agent.run(..., deps=...) (and again to agent.resume(..., deps=...))")
            raise self._missed
        return self._deps

    def __repr__(self) -> str:
        # the deps' type only: their value is the caller's (a session, a client), never shown
        deps = "None" if self._deps is None else f"<{type(self._deps).__name__}>"
        return (f"RunContext(tool_call_id={self.tool_call_id!r}, iteration={self.iteration}, "
                f"run_id={self.run_id!r}, tool_name={self.tool_name!r}, deps={deps})")


ToolContext = RunContext
"""The same class as ``RunContext``, under its older name (``ctx: ToolContext`` still works)."""


@contextmanager
def bound_deps(deps: object) -> Iterator[None]:
    """Make ``deps`` the deps of the runs started inside (``None``: keep the enclosing ones)."""
    if deps is None:
        yield
        return
    token = _run_deps.set(deps)
    try:
        yield
    finally:
        _run_deps.reset(token)


def run_deps() -> object | None:
    """The deps of the run being executed, or ``None``."""
    return _run_deps.get()


def deps_error(ctx: RunContext[Any]) -> ConfigurationError | None:
    """The error ``ctx.deps`` raised during the call (the tool ran without the deps it
    reads), or ``None``: the agent raises it after the call, whatever the tool did with it."""
    return ctx._missed
