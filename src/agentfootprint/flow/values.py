"""Value rules shared by the scope, the commit log and the narrative.

State values are JSON-shaped (None, bool, int, float, str, list, dict with str keys).
Three operations matter everywhere and must agree:

* ``copy_value``   -- an independent copy of the mutable parts, so readers never alias state;
* ``same_value``   -- the strict equality that decides whether a write changed anything
                      (type-exact, NaN equals NaN, lists ordered, dicts by key set);
* ``summarize``    -- a short, one-line rendering for narratives and evidence.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

__all__ = ["MISSING", "copy_value", "same_value", "summarize", "check_json_value"]


class _Missing:
    """Sentinel for "no value": absent keys, deleted keys. Distinct from ``None``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final[Any] = _Missing()

_SCALARS: Final = (str, int, float, bool, type(None))


def copy_value(value: Any) -> Any:
    """Copy lists and dicts all the way down; scalars and other objects are shared."""
    kind = type(value)
    if kind is list:
        return [x if type(x) in _SCALARS else copy_value(x) for x in value]
    if kind is dict:
        return {k: (v if type(v) in _SCALARS else copy_value(v)) for k, v in value.items()}
    if kind is tuple:
        return tuple(copy_value(x) for x in value)
    return value


def same_value(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same state value (``1``, ``1.0`` and ``True`` differ).

    Python's ``==`` runs first at C speed; when it says equal, the JSON encodings confirm
    that no ``1``/``True``/``1.0`` confusion hid inside. Unequal dict key order counts as a
    change, which is lossless (the log stores a ``set`` instead of an ``append``).
    """
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is float:
        return bool(a == b or (math.isnan(a) and math.isnan(b)))
    if kind in _SCALARS:
        return bool(a == b)
    try:
        if a != b:
            return _strict_equal(a, b) if kind in (list, dict, tuple) else False
        if kind in (list, dict, tuple):
            return json.dumps(a) == json.dumps(b)
        return True
    except (TypeError, ValueError):
        return _strict_equal(a, b)
    except Exception:  # an exotic __eq__ must not break a commit
        return False


def _strict_equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is float:
        return bool(a == b or (math.isnan(a) and math.isnan(b)))
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if kind is dict:
        return a.keys() == b.keys() and all(_strict_equal(v, b[k]) for k, v in a.items())
    try:
        return bool(a == b)
    except Exception:
        return False


def summarize(value: Any, max_len: int = 80) -> str:
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


def check_json_value(value: Any, where: str) -> None:
    """Raise ``TypeError`` naming ``where`` when ``value`` cannot travel as JSON."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind in _SCALARS:
            if kind is float and not math.isfinite(item):
                continue  # NaN/inf are written as JSON extensions by the stdlib encoder
            continue
        if kind is list or kind is tuple:
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
