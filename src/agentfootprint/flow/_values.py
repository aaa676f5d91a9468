"""Value rules shared by the scope, the commit log and the narrative.

State values are JSON-shaped (None, bool, int, float, str, list, dict with str keys).
Committed values are *frozen*: lists and dicts become ``FrozenList``/``FrozenDict`` (real
``list``/``dict`` subclasses that refuse mutation), so state, the log and every reader can
share one object safely, and a step that copies a long history and appends one message costs
one pointer per element, not a deep copy. Reads hand back a shallow, mutable copy of the top
level (``thaw``): append to it and write it back; nested values stay read-only, and mutating
one raises an error that says how to copy it.

* ``freeze``     -- the committed, shareable form of a value;
* ``thaw``       -- what a read returns: a plain top-level copy over frozen parts;
* ``copy_value`` -- a fully independent, plain (mutable) deep copy, for replay and callers;
* ``same_value`` -- the strict equality that decides whether a write changed anything
                    (type-exact, NaN equals NaN, lists ordered, dict key order included);
* ``summarize``  -- a short, one-line rendering for narratives and evidence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, Final, NoReturn

__all__ = [
    "MISSING",
    "FrozenDict",
    "FrozenList",
    "check_json_value",
    "copy_value",
    "freeze",
    "same_value",
    "summarize",
    "thaw",
]


class _Missing:
    """Sentinel for "no value": absent keys, deleted keys. Distinct from ``None``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final[Any] = _Missing()

_SCALARS: Final = (str, int, float, bool, type(None))


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    kind = "list" if isinstance(self, list) else "dict"
    raise TypeError(
        f"this {kind} is part of committed state and is read-only; copy it "
        f"({kind}(value) or a comprehension), change the copy and write it back")


class FrozenList(list[Any]):
    """A committed list: reads like a list, refuses every mutation."""

    __slots__ = ()
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self


class FrozenDict(dict[str, Any]):
    """A committed dict: reads like a dict, refuses every mutation."""

    __slots__ = ()
    clear = pop = popitem = setdefault = update = _refuse
    __setitem__ = __delitem__ = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


_LISTS: Final = (list, FrozenList, tuple)
_DICTS: Final = (dict, FrozenDict)


# The functions below dispatch on ``type(value)`` itself, not ``isinstance``: a list or dict
# subclass other than the frozen ones is a foreign value and is passed through untouched. Once
# the type has decided a branch, the isinstance after it always holds: it narrows for mypy.


def freeze(value: object) -> Any:
    """The committed form: lists and dicts frozen all the way down (frozen parts reused)."""
    kind = type(value)
    if kind in _SCALARS or kind is FrozenList or kind is FrozenDict:
        return value
    if (kind is list and isinstance(value, list)) or (kind is tuple and isinstance(value, tuple)):
        return FrozenList([x if type(x) in _SCALARS else freeze(x) for x in value])
    if kind is dict and isinstance(value, dict):
        return FrozenDict({k: (v if type(v) in _SCALARS else freeze(v))
                           for k, v in value.items()})
    return value


def thaw(value: object) -> Any:
    """A read's result: a plain copy of the top level; nested values stay shared and frozen."""
    kind = type(value)
    if kind is FrozenList and isinstance(value, list):
        return list(value)
    if kind is FrozenDict and isinstance(value, dict):
        return dict(value)
    return value


def copy_value(value: object) -> Any:
    """A plain, fully independent deep copy (frozen parts become ordinary lists and dicts)."""
    kind = type(value)
    if (kind is list or kind is FrozenList) and isinstance(value, list):
        return [x if type(x) in _SCALARS else copy_value(x) for x in value]
    if (kind is dict or kind is FrozenDict) and isinstance(value, dict):
        return {k: (v if type(v) in _SCALARS else copy_value(v)) for k, v in value.items()}
    if kind is tuple and isinstance(value, tuple):
        return [copy_value(x) for x in value]
    return value


def _kind(value: object) -> type:
    kind = type(value)
    if kind is FrozenList or kind is tuple:
        return list
    if kind is FrozenDict:
        return dict
    return kind


# Any, not object: narrowing its branches for mypy costs isinstance calls per compared
# container, on every commit.
def same_value(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same state value (``1``, ``1.0`` and ``True`` differ).

    Shared (identical) parts compare in constant time, so re-writing a long list that only
    gained a tail costs one identity check per element.
    """
    if a is b:
        return True
    kind = _kind(a)
    if kind is not _kind(b):
        return False
    if kind is float:
        return bool(a == b or (math.isnan(a) and math.isnan(b)))
    if kind is list:
        return len(a) == len(b) and all(
            x is y or same_value(x, y) for x, y in zip(a, b, strict=True))
    if kind is dict:
        if len(a) != len(b) or list(a) != list(b):  # key order is kept by replay, so it counts
            return False
        return all(v is b[k] or same_value(v, b[k]) for k, v in a.items())
    try:
        return bool(a == b)
    except Exception:  # an exotic __eq__ must not break a commit
        return False


def same_prefix(longer: Iterable[object], prefix: Iterable[object]) -> bool:
    """True when the list ``longer`` starts with exactly the elements of ``prefix``."""
    return all(x is y or same_value(x, y) for x, y in zip(longer, prefix, strict=False))


def summarize(value: object, max_len: int = 80) -> str:
    """One line: strings quoted and cut, lists as ``(N items)``, dicts by their first keys."""
    if value is MISSING:
        return "(missing)"
    if value is None:
        return "None"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= max_len else text[: max_len - 4] + '..."'
    if isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        n = len(value)
        return "[]" if n == 0 else f"({n} item{'s' if n != 1 else ''})"
    if isinstance(value, dict):
        if not value:
            return "{}"
        keys = list(value)
        shown = ", ".join(str(k) for k in keys[:4])
        text = "{" + shown + (f", ... ({len(keys)} keys)" if len(keys) > 4 else "") + "}"
        return text if len(text) <= max_len else f"{{{len(keys)} keys}}"
    text = repr(value)
    return text if len(text) <= max_len else text[: max_len - 3] + "..."


def check_json_value(value: object, where: str) -> None:
    """Raise ``TypeError`` naming ``where`` when ``value`` cannot travel as JSON."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        kind = _kind(item)
        if kind in _SCALARS:
            continue  # NaN and infinities travel as the JSON extensions json.loads reads
        if kind is list:
            stack.extend((x, f"{path}[{i}]") for i, x in enumerate(item))
        elif kind is dict:
            for k, v in item.items():
                if not isinstance(k, str):
                    raise TypeError(f"{path} has a non-string key {k!r}; use str keys in state")
                stack.append((v, f"{path}.{k}"))
        else:
            raise TypeError(
                f"{path} holds a {kind.__name__} ({item!r:.60}); "
                "state must be JSON-shaped (dict, list, str, int, float, bool, None)"
            )
