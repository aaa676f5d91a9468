"""``decide`` and ``select``: choices that carry their own evidence.

A rule is ``{"when": <filter or predicate>, "then": "<branch id>", "label": "<optional>"}``.
A filter is ``{"key": {"op": threshold, ...}, ...}`` with ops eq, ne, gt, gte, lt, lte, in,
not_in, all ANDed; an empty filter never matches. A predicate is ``when(scope) -> bool``.
Values are read through the scope, so the reads are tracked like any other, and each rule
leaves evidence: every condition's key, operator, threshold, actual value and result.
``decide`` takes the first matching rule; ``select`` takes all of them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import ChartBuildError, ConfigurationError
from ._values import MISSING, summarize

if TYPE_CHECKING:
    from ._scope import Scope

__all__ = ["OPERATORS", "Decision", "Rule", "Selection", "check_rules", "decide", "select"]

Rule = Mapping[str, Any]


def _in(actual: Any, threshold: Any) -> bool:
    return isinstance(threshold, (list, tuple, set, frozenset)) and actual in threshold


def _not_in(actual: Any, threshold: Any) -> bool:
    return not isinstance(threshold, (list, tuple, set, frozenset)) or actual not in threshold


OPERATORS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
    "in": _in,
    "not_in": _not_in,
}


@dataclass(slots=True)
class Decision:
    """What a decider chose, and why (``evidence`` is JSON, stored on the step's record)."""

    branch: str
    evidence: dict[str, Any]


@dataclass(slots=True)
class Selection:
    """What a selector chose, and why."""

    branches: tuple[str, ...]
    evidence: dict[str, Any]


def decide(scope: Scope, rules: Sequence[Rule], default: str) -> Decision:
    """First rule that matches wins; none matching gives ``default``."""
    _check_shapes(rules, "decide()")
    evidence: list[dict[str, Any]] = []
    for index, rule in enumerate(rules):
        result = _evaluate(scope, index, rule)
        evidence.append(result)
        if result["matched"]:
            return Decision(result["branch"], {"chosen": result["branch"], "default": default,
                                               "rules": evidence})
    return Decision(default, {"chosen": default, "default": default, "rules": evidence})


def select(scope: Scope, rules: Sequence[Rule]) -> Selection:
    """Every rule that matches contributes its branch (once, in rule order)."""
    _check_shapes(rules, "select()")
    evidence = [_evaluate(scope, index, rule) for index, rule in enumerate(rules)]
    chosen: list[str] = []
    for result in evidence:
        if result["matched"] and result["branch"] not in chosen:
            chosen.append(result["branch"])
    return Selection(tuple(chosen), {"selected": chosen, "rules": evidence})


def check_rules(rules: Sequence[Rule], branches: Sequence[str], *, where: str) -> None:
    """Build-time check of declarative rules: known branches, known operators, a ``when``."""
    for index, rule in enumerate(rules):
        problem = _shape_problem(index, rule)
        if problem is not None:
            raise ChartBuildError(f"{where}: {problem}")
        if rule["then"] not in branches:
            raise ChartBuildError(
                f"{where}: rule {index} goes to unknown branch {rule['then']!r}; "
                f"branches are {', '.join(map(repr, branches))}"
            )


def _check_shapes(rules: Sequence[Rule], where: str) -> None:
    """The same checks when ``decide``/``select`` get their rules at run time.

    A misspelt operator or ``{"x": 1}`` for ``{"x": {"eq": 1}}`` is a mistake in the code, not
    a fact about the data: it is refused instead of silently never matching.
    """
    for index, rule in enumerate(rules):
        problem = _shape_problem(index, rule)
        if problem is not None:
            raise ConfigurationError(f"{where}: {problem}")


def _shape_problem(index: int, rule: Any) -> str | None:
    if not isinstance(rule, Mapping) or "when" not in rule or "then" not in rule:
        return f"rule {index} must be a dict with 'when' and 'then'"
    when = rule["when"]
    if callable(when):
        return None
    if not isinstance(when, Mapping):
        return f"rule {index} 'when' must be a filter dict or callable"
    for key, ops in when.items():
        if not isinstance(ops, Mapping):
            return f"rule {index} key {key!r} needs {{op: value}}, e.g. {{'eq': {ops!r}}}"
        for op in ops:
            if op not in OPERATORS:
                return (f"rule {index} uses unknown operator {op!r} on {key!r}; "
                        f"use one of {', '.join(OPERATORS)}")
    return None


def _evaluate(scope: Any, index: int, rule: Rule) -> dict[str, Any]:
    when = rule.get("when")
    out: dict[str, Any] = {"rule": index, "branch": rule.get("then"), "matched": False}
    if rule.get("label") is not None:
        out["label"] = rule["label"]
    if callable(when):
        out["type"] = "function"
        inputs: list[tuple[str, Any]] = []
        previous = scope._watch(inputs)
        try:
            out["matched"] = bool(when(scope))
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            scope._watch(previous)
        out["inputs"] = [{"key": k, "value": _shown(scope, k, v)} for k, v in inputs]
        return out
    out["type"] = "filter"
    conditions: list[dict[str, Any]] = []
    matched = isinstance(when, Mapping)
    for key, ops in (when.items() if isinstance(when, Mapping) else ()):
        if not isinstance(ops, Mapping):
            continue
        actual = scope.get(key, MISSING)
        for op, threshold in ops.items():
            check = OPERATORS.get(op)
            result = False
            if check is not None and actual is not MISSING:
                try:
                    result = bool(check(actual, threshold))
                except TypeError:
                    result = False
            if isinstance(threshold, (set, frozenset)):
                threshold = sorted(threshold, key=repr)
            elif isinstance(threshold, tuple):
                threshold = list(threshold)
            conditions.append({"key": key, "op": op, "threshold": threshold,
                               "actual": _shown(scope, key, actual), "result": result})
            matched = matched and result
    out["conditions"] = conditions
    out["matched"] = matched and bool(conditions)
    return out


def _shown(scope: Any, key: str, value: Any) -> str:
    return scope._shown(key, value) if hasattr(scope, "_shown") else summarize(value)
