"""Permissions: may the agent run this tool call, with these arguments, right now?

A permission checker is asked once per tool call, before any ``before_tool`` rule and before
the tool runs. It answers ``allow``, ``deny`` (the model reads a refusal and the run goes on) or
``halt`` (the model reads a generic refusal and the run stops cleanly with
``stopped_early="permission-halt"``; the tool never runs, so no output of it is ever seen).

Contract:

* A checker that raises denies (fail closed). The model reads a terminal sentence; the error
  text goes only to the ``permission.check`` event's ``rationale``.
* The halt text the model reads never carries the telemetry ``reason``.
* ``PermissionPolicy`` is the built-in checker: rules in written order, first match wins, a
  rule matches on the tool name (``"*"`` for any) and an optional predicate over the arguments.
  A predicate that raises makes the whole check raise, which denies.

Any object with a ``name`` and a ``check(request)`` method (sync or async) can stand in for a
policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigurationError
from ..providers._base import Message

__all__ = [
    "PermissionChecker",
    "PermissionDecision",
    "PermissionPolicy",
    "PermissionRequest",
    "PermissionRule",
    "PermissionVerdict",
    "check_permission",
]

PermissionResult = Literal["allow", "deny", "halt"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequest:
    """What the checker is asked about: one proposed tool call."""

    target: str
    """The tool's name."""
    args: Mapping[str, Any]
    """The arguments as the model wrote them (a copy: changing it changes nothing)."""
    tool_call_id: str
    iteration: int
    history: Sequence[Message]
    """The conversation so far (read-only)."""
    capability: str = "tool_call"
    actor: str = "agent"


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDecision:
    """A checker's answer. ``tell_model`` overrides the text the model reads on deny/halt."""

    result: PermissionResult
    rule_id: str | None = None
    """Which policy rule decided (recorded on the event)."""
    rationale: str | None = None
    """Why, for people reading the trace; shown to the model on deny unless ``tell_model``."""
    tell_model: str | None = None
    reason: str | None = None
    """A telemetry tag; never shown to the model."""


@runtime_checkable
class PermissionChecker(Protocol):
    """The port: ``check`` may be sync or async."""

    name: str

    def check(self, request: PermissionRequest
              ) -> PermissionDecision | Awaitable[PermissionDecision]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRule:
    """One line of a policy: for ``tool`` (``"*"`` = any) and args matching ``when``, answer
    ``result``."""

    id: str
    result: PermissionResult
    tool: str = "*"
    when: Callable[[Mapping[str, Any]], bool] | None = None
    """A predicate over the call's arguments; absent means every call to ``tool``."""
    rationale: str | None = None
    tell_model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ConfigurationError(f"PermissionRule id={self.id!r} must be a non-empty str")
        if self.result not in ("allow", "deny", "halt"):
            raise ConfigurationError(
                f"PermissionRule {self.id!r}: result={self.result!r} must be 'allow', 'deny' "
                "or 'halt'")
        if self.when is not None and not callable(self.when):
            raise ConfigurationError(
                f"PermissionRule {self.id!r}: when={self.when!r} must be a function of the "
                "arguments returning bool")

    def matches(self, request: PermissionRequest) -> bool:
        if self.tool not in ("*", request.target):
            return False
        return self.when is None or bool(self.when(request.args))


class PermissionPolicy:
    """Rules in written order, first match wins; ``default`` answers when none matches."""

    def __init__(self, *, rules: Iterable[PermissionRule],
                 default: Literal["allow", "deny"] = "allow", name: str = "policy") -> None:
        self.rules = tuple(rules)
        for item in self.rules:
            if not isinstance(item, PermissionRule):
                raise ConfigurationError(
                    f"{item!r} is not a PermissionRule; build one with "
                    "PermissionRule(id=..., tool=..., result=...)")
        if len({r.id for r in self.rules}) != len(self.rules):
            raise ConfigurationError("two permission rules share an id; rule ids must be unique")
        if default not in ("allow", "deny"):
            raise ConfigurationError(f"default={default!r} must be 'allow' or 'deny'")
        self.default: Literal["allow", "deny"] = default
        self.name = name

    def check(self, request: PermissionRequest) -> PermissionDecision:
        for item in self.rules:
            if item.matches(request):
                return PermissionDecision(result=item.result, rule_id=item.id,
                                          rationale=item.rationale, tell_model=item.tell_model)
        return PermissionDecision(result=self.default, rationale="no rule matched")


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionVerdict:
    """What the loop does with a call: run it, or show ``refusal`` instead (and maybe halt)."""

    result: PermissionResult
    refusal: str | None = None
    halted: bool = False
    event: dict[str, Any]
    """The ``permission.check`` payload."""


def denied_text(decision: PermissionDecision) -> str:
    return decision.tell_model or f"[permission denied: {decision.rationale or 'policy'}]"


def halted_text(tool_name: str, decision: PermissionDecision) -> str:
    return decision.tell_model or f"Tool '{tool_name}' is not available in this context."


def failed_text(tool_name: str) -> str:
    return (f"Tool '{tool_name}' could not be authorized because the permission check failed, "
            "so it was not run. Do not call it again.")


async def check_permission(checker: PermissionChecker, request: PermissionRequest
                           ) -> PermissionVerdict:
    """Ask ``checker`` about one call; failing closed when it raises or answers nonsense."""
    base: dict[str, Any] = {"capability": request.capability, "actor": request.actor,
                            "target": request.target, "tool_call_id": request.tool_call_id,
                            "iteration": request.iteration, "checker": checker.name}
    try:
        answer: Any = checker.check(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, PermissionDecision) or answer.result not in (
                "allow", "deny", "halt"):
            raise TypeError(f"check() returned {answer!r}, not a PermissionDecision")
    except Exception as exc:
        return PermissionVerdict(
            result="deny", refusal=failed_text(request.target),
            event={**base, "result": "deny", "reason": "checker-failed",
                   "rationale": f"{type(exc).__name__}: {exc}"})
    event = {**base, "result": answer.result, "policy_rule_id": answer.rule_id,
             "rationale": answer.rationale, "reason": answer.reason}
    if answer.result == "deny":
        return PermissionVerdict(result="deny", refusal=denied_text(answer), event=event)
    if answer.result == "halt":
        return PermissionVerdict(result="halt", refusal=halted_text(request.target, answer),
                                 halted=True, event=event)
    return PermissionVerdict(result="allow", event=event)


def check_checker(checker: object) -> PermissionChecker | None:
    """``Agent(permissions=...)``: a checker, or None; anything else is refused clearly."""
    if checker is None:
        return None
    if not isinstance(checker, PermissionChecker):
        raise ConfigurationError(
            f"permissions={checker!r} is not a permission checker; pass "
            "PermissionPolicy(rules=[...]) or an object with name and check(request)")
    return checker
