"""What a state value looks like to a person, and whether it can travel as JSON.

``summarize`` is the one-line form narratives, decisions and reprs show (never the whole
value: a history can be megabytes); ``check_json_value`` names the first part of a value a
checkpoint could not carry.
"""

from __future__ import annotations

from typing import Any

from ._values import MISSING, SCALAR_TYPES, DraftList, FrozenDict, FrozenList

__all__ = ["check_json_value", "summarize"]


def summarize(value: object, max_len: int = 80) -> str:
    """One line: strings quoted and cut, lists as ``(N items)``, dicts by their first keys."""
    if value is MISSING:
        return "(missing)"
    if value is None:
        return "None"
    if isinstance(value, str):
        import json  # loaded on first use: a plain run never writes JSON

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
        if kind in SCALAR_TYPES:
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


def _kind(value: object) -> type:
    kind = type(value)
    if kind is FrozenList or kind is tuple or kind is DraftList:
        return list
    if kind is FrozenDict:
        return dict
    return kind
