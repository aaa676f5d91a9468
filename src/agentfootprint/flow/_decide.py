"""``decide`` and ``select``: choices that carry their own evidence.

A rule is ``{"when": <filter or predicate>, "then": "<branch id>", "label": "<optional>"}``.
A filter is ``{"key": {"op": threshold, ...}, ...}`` with ops eq, ne, gt, gte, lt, lte, in,
not_in, all ANDed; an empty filter never matches. A predicate is ``when(scope) -> bool``.
Values are read through the scope, so the reads are tracked like any other, and each rule
leaves evidence: every condition's key, operator, threshold, actual value and result.
``decide`` takes the first matching rule; ``select`` takes all of them.

A mistake never passes for a non-match, since the default branch would then run on a typo:
a rule with a key other than ``when``/``then``/``label``, a filter on a key the state does
not hold (the error names the key and the keys there are), and a predicate that raises all
fail the step. A key that may legitimately be absent is written first (``None`` will do).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._record import Compared, record_class
from ..errors import ChartBuildError, ConfigurationError, RunError
from ._describe import summarize
from ._values import MISSING

if TYPE_CHECKING:
    from ._scope import Scope

__all__ = ["OPERATORS", "Decision", "Rule", "Selection", "check_rules", "decide", "select"]

Rule = Mapping[str, Any]

RULE_KEYS: Final = ("when", "then", "label")
"""The keys a rule may have."""


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


# Decision and Selection are dataclasses whose methods are written once (``_record.py``):
# generating them per class is paid by every cold start.


@record_class
class Decision(Compared):
    """What a decider chose, and why (``evidence`` is JSON, stored on the step's record)."""

    branch: str
    evidence: dict[str, Any]

    def __init__(self, branch: str, evidence: dict[str, Any]) -> None:
        self.branch = branch
        self.evidence = evidence


@record_class
class Selection(Compared):
    """What a selector chose, and why."""

    branches: tuple[str, ...]
    evidence: dict[str, Any]

    def __init__(self, branches: tuple[str, ...], evidence: dict[str, Any]) -> None:
        self.branches = branches
        self.evidence = evidence


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
    unknown = [key for key in rule if key not in RULE_KEYS]
    if unknown:
        return (f"rule {index} has unknown key {unknown[0]!r}{_nearest(unknown[0], RULE_KEYS)}; "
                f"a rule's keys are {', '.join(map(repr, RULE_KEYS))}")
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
            raise RunError(
                f"rule {index} (to {rule.get('then')!r}) raised {type(exc).__name__}: {exc}; "
                "fix its predicate — return False when the rule does not apply, rather than "
                "raise") from exc
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
        if actual is MISSING:
            raise ConfigurationError(_missing_key(scope, index, key))
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


def _missing_key(scope: Any, index: int, key: str) -> str:
    known = sorted(_state_keys(scope))
    shown = ", ".join(map(repr, known[:20])) + (", ..." if len(known) > 20 else "")
    return (f"rule {index} reads {key!r}, which the state does not hold"
            f"{_nearest(key, known)} (keys: {shown or 'none'}); fix the key, or write it "
            "before this step (None when it may be absent)")


def _state_keys(scope: Any) -> set[str]:
    """Every key the scope can read: committed state plus this step's own writes."""
    frame = getattr(scope, "_frame", None)
    keys = set(getattr(frame, "state", {}) or {})
    for key, value in (getattr(scope, "_staged", None) or {}).items():
        (keys.discard if value is MISSING else keys.add)(key)
    return keys


def _nearest(word: str, known: Sequence[str] | set[str]) -> str:
    import difflib  # only for an error message: a plain run never loads it

    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _shown(scope: Any, key: str, value: Any) -> str:
    return scope._shown(key, value) if hasattr(scope, "_shown") else summarize(value)
