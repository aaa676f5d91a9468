"""Recorded values as the report shows them: lists of rows, and any value as text."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["as_text", "dicts"]


def dicts(value: Any) -> list[dict[str, Any]]:
    """The dict items of ``value`` when it is a list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def as_text(value: Any) -> str:
    """A string as it is, ``None`` as empty, anything else as JSON (``repr`` if it is not)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)
