"""act() moments: rules that judge what an agent reads, does and says, each decision recorded.

A rule is a function (sync or async) of a small context object for its moment. It answers
``allow()``, ``allow(replacement, reason=...)``, ``deny(reason)`` or ``ask(question)``::

    def small_refunds(call: ToolCallContext) -> Verdict:
        if call.args.get("amount", 0) > 100:
            return deny("Refunds over 100 need a manager.")
        return allow()

    Agent(..., act=[act("before_tool", small_refunds, id="no-refunds-over-100")])

Moments, in the order a turn reaches them: ``input`` (the user's message, before the turn) →
[``window`` (what the window strategy leaves out of the next call) → ``before_tool`` (each
call, before it runs) → ``after_tool`` (each result, before the model reads it)]* →
``output`` (the final answer).

What a replacement may replace — no rule can answer FOR a tool:

* ``input`` / ``output``: the text (must be a str).
* ``before_tool``: the call's ARGUMENTS only (must be a mapping); the tool still runs.
* ``after_tool``: nothing. The model reads the tool's real output or a refusal; a rule that
  tries to substitute a result is treated as a denial.

Chain laws: rules of one moment run in written order (``after_tool`` in REVERSE, so the first
written rule has the last word on a result); each sees the previous rule's replacement; the
first ``deny``/``ask`` wins and later rules do not run. A rule that raises, or answers
something that is not a verdict, denies with a fixed sentence naming the rule (the error goes
only to the ledger). ``ask`` means "a person decides": at ``before_tool`` the run pauses
before the call, like a check-in (``agent.resume(checkpoint, check_in_approved(by=...))``
runs it, ``check_in_declined`` refuses it); at the other moments nothing can wait, so an ask
is recorded and refused with a fixed sentence. At ``window`` a replacement is the list of
history indices to send and a denial sends everything.

Per-call dispatch order (normative, after spec §8.5):

1. ``stream.tool_start``.
2. Permission gate (``permissions=``): ``permission.check``; deny → refusal; halt → generic
   refusal and the run stops after this call; checker raised → terminal refusal.
3. ``before_tool`` rules (written order): replacement → new arguments; deny/ask → refusal.
4. Dispatch with the (possibly replaced) arguments: lookup, argument validation, execute,
   result cap.
5. Skill step bookkeeping.
6. ``after_tool`` rules (reverse order), only if the tool executed: deny → the model reads the
   reason; the real result is kept in the ledger row.
7. ``stream.tool_end``; the ``role:"tool"`` message.
8. On halt: the batch's later calls get a "not run" result (pairing holds for follow-ups),
   ``permission.halt`` is emitted, ``stopped_early="permission-halt"``, and the run stops.

Every decision (pass-throughs included) files a row in run state under ``act_ledger`` —
``{moment, rule, decision, reason, iteration, tool_call_id, tool_name, ...}`` — so it lands in
the commit log, and is emitted as ``act.decision``.

At ``input`` a denial stops the run before any model call (``stopped_early="input-denied"``,
the message is not added to history); at ``output`` it withholds the answer (``content`` is
empty, ``stopped_early="output-denied"``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from ..errors import ConfigurationError
from ..events._dispatcher import PREFIX
from ..flow import Scope
from ..providers._base import Message, ToolCall
from ..runs import trace
from ..tools._registry import ToolOutcome
from ._permissions import PermissionChecker, PermissionRequest, check_permission
from ._spec import emit_turn_end

__all__ = [
    "LEDGER",
    "ActRule",
    "ActRules",
    "GatedCall",
    "InputContext",
    "Moment",
    "OutputContext",
    "WindowContext",
    "ToolCallContext",
    "ToolResultContext",
    "Verdict",
    "act",
    "allow",
    "ask",
    "deny",
]

LEDGER = trace.ACT_LEDGER
"""The run-state key holding every act() and permission decision of the run."""

Moment = Literal["input", "before_tool", "after_tool", "window", "output"]
MOMENTS: tuple[Moment, ...] = ("input", "before_tool", "after_tool", "window", "output")


class _Keep:
    """The absence of a replacement (``None`` is a value a rule may mean)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A rule's answer. Build it with ``allow``, ``deny`` or ``ask``."""

    kind: Literal["allow", "deny", "ask"]
    replacement: Any = KEEP
    reason: str | None = None
    question: str | None = None

    @property
    def replaces(self) -> bool:
        return self.replacement is not KEEP


def allow(replacement: object = KEEP, *, reason: str | None = None) -> Verdict:
    """Pass, or pass ``replacement`` on instead; a replacement must say why (``reason``)."""
    if replacement is not KEEP and not (isinstance(reason, str) and reason.strip()):
        raise ConfigurationError(
            "allow(replacement) needs reason='...' saying why the value was replaced")
    return Verdict(kind="allow", replacement=replacement, reason=reason)


def deny(reason: str) -> Verdict:
    """Refuse; at ``before_tool``/``after_tool`` the ``reason`` is what the model reads."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError("deny(reason) needs a non-empty reason; the model reads it")
    return Verdict(kind="deny", reason=reason)


def ask(question: str) -> Verdict:
    """A person should decide. Recorded, then refused until the loop can pause here."""
    if not isinstance(question, str) or not question.strip():
        raise ConfigurationError("ask(question) needs the question to put to a person")
    return Verdict(kind="ask", question=question)


@dataclass(frozen=True, slots=True, kw_only=True)
class InputContext:
    """The user's message, before the turn starts."""

    message: str
    history: Sequence[Message]
    iteration: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallContext:
    """One tool call, before it runs. ``args`` are as replaced by earlier rules."""

    tool_name: str
    tool_call_id: str
    args: Mapping[str, Any]
    iteration: int
    history: Sequence[Message]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultContext:
    """One executed call's result, before the model reads it."""

    tool_name: str
    tool_call_id: str
    args: Mapping[str, Any]
    result: str
    error: bool
    status: str
    iteration: int
    history: Sequence[Message]


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowContext:
    """What a window strategy is about to leave out of this call (before it is sent).

    ``kept`` are the history indices to send; a replacement is another list of indices (whole
    tool-call units are added back automatically, the current request always stays); a denial
    sends the whole history instead, so nothing the rule cares about is lost.
    """

    kept: Sequence[int]
    evicted: Sequence[Mapping[str, Any]]
    strategy: str
    iteration: int
    history: Sequence[Message]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputContext:
    """The final answer, before it is handed back."""

    content: str
    iteration: int
    history: Sequence[Message]


RuleFn = Callable[[Any], "Verdict | Awaitable[Verdict]"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActRule:
    """A rule bound to its moment, with the id the ledger names it by."""

    moment: Moment
    rule: RuleFn
    id: str


@overload
def act(moment: Literal["input"],
        rule: Callable[[InputContext], Verdict | Awaitable[Verdict]], *,
        id: str | None = None) -> ActRule: ...
@overload
def act(moment: Literal["before_tool"],
        rule: Callable[[ToolCallContext], Verdict | Awaitable[Verdict]], *,
        id: str | None = None) -> ActRule: ...
@overload
def act(moment: Literal["after_tool"],
        rule: Callable[[ToolResultContext], Verdict | Awaitable[Verdict]], *,
        id: str | None = None) -> ActRule: ...
@overload
def act(moment: Literal["window"],
        rule: Callable[[WindowContext], Verdict | Awaitable[Verdict]], *,
        id: str | None = None) -> ActRule: ...
@overload
def act(moment: Literal["output"],
        rule: Callable[[OutputContext], Verdict | Awaitable[Verdict]], *,
        id: str | None = None) -> ActRule: ...
def act(moment: Moment, rule: Callable[[Any], Any], *, id: str | None = None) -> ActRule:
    """Bind ``rule`` to ``moment``; ``id`` (default: the function's name) names it in the
    ledger."""
    if moment not in MOMENTS:
        raise ConfigurationError(
            f"act moment {moment!r} is not one of {', '.join(MOMENTS)}")
    if not callable(rule):
        raise ConfigurationError(f"act({moment!r}, {rule!r}): the rule must be a function")
    name = id if id is not None else getattr(rule, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        raise ConfigurationError(
            f"act({moment!r}, ...): give the rule an id=, the ledger names every decision "
            "by it")
    return ActRule(moment=moment, rule=rule, id=name)


@dataclass(frozen=True, slots=True)
class _Judged:
    """A chain's outcome: the value to go on with, or a refusal text."""

    value: Any
    refusal: str | None = None
    asked: str | None = None
    """An ``ask`` verdict's question (with ``refusal`` as the fallback text)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GatedCall:
    """The gate's word on one call: run ``call``, or show ``refusal`` (and maybe halt)."""

    call: ToolCall
    refusal: ToolOutcome | None = None
    halted: bool = False
    ask: dict[str, Any] | None = None
    """A before_tool rule asked a person: ``{"rule", "question"}``; the loop pauses."""


@dataclass(frozen=True, slots=True)
class ActRules:
    """An agent's rules grouped by moment (written order kept) and its permission checker."""

    rules: tuple[ActRule, ...] = ()
    permissions: PermissionChecker | None = None
    _by_moment: dict[str, tuple[ActRule, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for item in self.rules:
            if not isinstance(item, ActRule):
                raise ConfigurationError(
                    f"act entry {item!r} is not a rule; build it with act(moment, rule, id=...)")
            if item.id in seen:
                raise ConfigurationError(
                    f"two act rules have id {item.id!r}; rule ids must be unique")
            seen.add(item.id)
        object.__setattr__(self, "_by_moment", {
            m: tuple(r for r in self.rules if r.moment == m) for m in MOMENTS})

    def at(self, moment: Moment) -> tuple[ActRule, ...]:
        return self._by_moment[moment]

    @property
    def gates_tools(self) -> bool:
        return bool(self.permissions is not None or self.at("before_tool")
                    or self.at("after_tool"))

    # -- the moments --------------------------------------------------------------------

    async def judge_input(self, scope: Scope) -> None:
        """Run the input rules over the user's message (Seed has put it last in history)."""
        history: list[Message] = scope[trace.HISTORY]
        message = scope[trace.USER_MESSAGE]
        judged = await self._chain(
            scope, "input", message, str,
            lambda value: InputContext(message=value, history=tuple(history[:-1])),
            iteration=0)
        if judged.refusal is not None:
            scope[trace.HISTORY] = history[:-1]
            scope[trace.FINAL_CONTENT] = ""
            scope[trace.STOPPED_EARLY] = "input-denied"
            emit_turn_end(scope, "")
            scope.break_("input-denied")
        elif judged.value != message:
            scope[trace.USER_MESSAGE] = judged.value
            scope[trace.HISTORY] = [*history[:-1], {**history[-1], "content": judged.value}]

    async def judge_output(self, scope: Scope, content: str) -> str:
        """The answer to hand back: ``content``, its replacement, or "" when withheld."""
        history: list[Message] = scope[trace.HISTORY]
        iteration = scope[trace.ITERATION]
        judged = await self._chain(
            scope, "output", content, str,
            lambda value: OutputContext(content=value, iteration=iteration,
                                        history=tuple(history)),
            iteration=iteration)
        if judged.refusal is not None:
            scope[trace.STOPPED_EARLY] = "output-denied"
            return ""
        return str(judged.value)

    async def gate_call(self, scope: Scope, call: ToolCall, iteration: int) -> GatedCall:
        """Steps 2–3 of the dispatch order: the permission gate, then the before_tool rules."""
        history: list[Message] = scope[trace.HISTORY]
        args = dict(call.get("args") or {})
        if self.permissions is not None:
            verdict = await check_permission(self.permissions, PermissionRequest(
                target=call["name"], args=copy.deepcopy(args), tool_call_id=call["id"],
                iteration=iteration, history=tuple(history)))
            scope.emit(PREFIX + "permission.check", verdict.event)
            if verdict.refusal is not None:
                if verdict.halted:
                    scope[trace.PERMISSION_HALT] = {
                        "target": call["name"], "tool_call_id": call["id"],
                        "iteration": iteration, "rule_id": verdict.event.get("policy_rule_id"),
                        "reason": verdict.event.get("reason"), "tell_model": verdict.refusal}
                return GatedCall(call=call, halted=verdict.halted, refusal=ToolOutcome(
                    verdict.refusal, error=True, status="denied"))
        rules = self.at("before_tool")
        if not rules:
            return GatedCall(call=call)
        judged = await self._chain(
            scope, "before_tool", args, Mapping,
            lambda value: ToolCallContext(
                tool_name=call["name"], tool_call_id=call["id"], args=copy.deepcopy(value),
                iteration=iteration, history=tuple(history)),
            iteration=iteration, call=call)
        if judged.asked is not None:
            rule = next(r["rule"] for r in reversed(scope[LEDGER]) if r["decision"] == "ask")
            return GatedCall(call=call, ask={"rule": rule, "question": judged.asked})
        if judged.refusal is not None:
            return GatedCall(call=call, refusal=ToolOutcome(judged.refusal, error=True,
                                                            status="denied"))
        if judged.value == args:
            return GatedCall(call=call)
        return GatedCall(call={**call, "args": dict(judged.value)})

    async def judge_window(self, scope: Scope, kept: list[int],
                           evicted: list[dict[str, Any]], strategy: str) -> list[int] | None:
        """The window rules: the indices to send instead, or ``None`` to keep the plan.

        A denial returns every index (nothing is left out); a replacement must be a list of
        history indices (checked here; units are restored by the caller).
        """
        iteration = scope[trace.ITERATION]
        history: list[Message] = scope[trace.HISTORY]
        judged = await self._chain(
            scope, "window", kept, list,
            lambda value: WindowContext(kept=tuple(value), evicted=tuple(evicted),
                                        strategy=strategy, iteration=iteration,
                                        history=tuple(history)),
            iteration=iteration)
        if judged.refusal is not None:
            return list(range(len(history)))
        if judged.value == kept:
            return None
        chosen = sorted({int(i) for i in judged.value if 0 <= int(i) < len(history)})
        return chosen

    async def judge_result(self, scope: Scope, call: ToolCall, outcome: ToolOutcome,
                           iteration: int) -> ToolOutcome:
        """Step 6: the after_tool rules, reverse order, only for calls whose tool executed."""
        rules = self.at("after_tool")
        if not rules or outcome.status not in ("success", "error"):
            return outcome
        history: list[Message] = scope[trace.HISTORY]
        judged = await self._chain(
            scope, "after_tool", outcome.content, None,
            lambda value: ToolResultContext(
                tool_name=call["name"], tool_call_id=call["id"],
                args=copy.deepcopy(dict(call.get("args") or {})), result=value,
                error=outcome.error, status=outcome.status, iteration=iteration,
                history=tuple(history)),
            iteration=iteration, call=call, order=tuple(reversed(rules)))
        if judged.refusal is None:
            return outcome
        return ToolOutcome(judged.refusal, error=True, status="denied")

    # -- the chain ----------------------------------------------------------------------

    async def _chain(self, scope: Scope, moment: Moment, value: Any,
                     replaceable: type | None, context: Callable[[Any], Any], *,
                     iteration: int, call: ToolCall | None = None,
                     order: tuple[ActRule, ...] | None = None) -> _Judged:
        """Run one moment's rules; every rule that runs files one ledger row."""
        for item in order if order is not None else self.at(moment):
            row: dict[str, Any] = {
                "moment": moment, "rule": item.id, "iteration": iteration,
                "tool_call_id": call["id"] if call is not None else None,
                "tool_name": call["name"] if call is not None else None}
            try:
                answer: Any = item.rule(context(value))
                if inspect.isawaitable(answer):
                    answer = await answer
            except Exception as exc:
                failed = (f"Refused: rule '{item.id}' failed while checking this, so it was "
                          "not allowed.")
                self._file(scope, {**row, "decision": "deny", "reason": failed,
                                   "error": f"{type(exc).__name__}: {exc}"})
                return _Judged(value, failed)
            refusal = _refusal(item.id, moment, answer, replaceable)
            if refusal is not None:
                decision = "ask" if isinstance(answer, Verdict) and answer.kind == "ask" \
                    else "deny"
                extra: dict[str, Any] = {}
                if decision == "ask":
                    extra["question"] = answer.question
                if moment == "after_tool":
                    extra["kept_result"] = value
                self._file(scope, {**row, "decision": decision, "reason": refusal, **extra})
                return _Judged(value, refusal,
                               asked=answer.question if decision == "ask" else None)
            if answer.replaces:
                self._file(scope, {**row, "decision": "replace", "reason": answer.reason,
                                   "before": copy.deepcopy(value),
                                   "after": copy.deepcopy(answer.replacement)})
                value = answer.replacement
            else:
                self._file(scope, {**row, "decision": "allow", "reason": answer.reason})
        return _Judged(value)

    @staticmethod
    def _file(scope: Scope, row: dict[str, Any]) -> None:
        scope[LEDGER] = [*(scope.get(LEDGER) or ()), row]
        scope.emit(PREFIX + "act.decision", {k: v for k, v in row.items()
                                             if k not in ("before", "after", "kept_result")})


def _refusal(rule_id: str, moment: Moment, answer: Any, replaceable: type | None
             ) -> str | None:
    """The text shown instead, when ``answer`` does not let the value through."""
    if not isinstance(answer, Verdict):
        return (f"Refused: rule '{rule_id}' gave no verdict (it must return allow(), deny() "
                "or ask()), so this was not allowed.")
    if answer.kind == "deny":
        return answer.reason
    if answer.kind == "ask":
        if moment == "before_tool":
            return f"Paused: rule '{rule_id}' asked a person to approve this call."
        return (f"Refused: rule '{rule_id}' needs a person to approve this, and only a tool "
                "call can wait for one; it was not done.")
    if not answer.replaces:
        return None
    if replaceable is None:
        return (f"Refused: rule '{rule_id}' tried to replace the tool's result; a rule may "
                "refuse a result but never answer for a tool.")
    if not isinstance(answer.replacement, replaceable):
        what = "arguments (a mapping)" if moment == "before_tool" else "text (a str)"
        return (f"Refused: rule '{rule_id}' replaced the value with "
                f"{type(answer.replacement).__name__}, but at {moment} only {what} may be "
                "replaced.")
    return None


def check_act(rules: Iterable[ActRule], permissions: PermissionChecker | None) -> ActRules:
    """``Agent(act=..., permissions=...)`` checked and grouped."""
    return ActRules(tuple(rules), permissions)
