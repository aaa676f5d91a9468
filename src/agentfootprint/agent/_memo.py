"""What the loop's stages would otherwise rebuild at every iteration, built once.

A stage that writes a value equal to the committed one costs its commit a comparison; one
that writes the committed value itself costs an identity check. So the values that do not
change from iteration to iteration (the system prompt and its slot rows when the active
injections are the same, the empty list of active injections of an agent that declares
none) are kept here already frozen (``flow/_values.py``) and written as they are. What a run
records is unchanged: the same values, committed when they change, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..context._injection import Injection
from ..context._slots import compose_system
from ..flow._values import freeze

__all__ = ["NO_INJECTIONS", "SystemMemo"]

NO_INJECTIONS: Any = freeze([])
"""``active_injections`` of an agent that declares no context: one frozen empty list."""

_KEEP = 64
"""System prompts kept per agent (one per distinct set of active pieces; recall varies)."""


class SystemMemo:
    """``compose_system`` for one agent, remembered by what the pieces are.

    The key is every input ``compose_system`` reads (each active piece's id, flavor, text
    and cache policy, in order), so a remembered answer is exactly the one it would compute;
    the rows come back frozen, the same object for the same pieces. Runs sharing the agent
    share the memo (a dict read and write each: safe under concurrent runs).
    """

    __slots__ = ("_base", "_cache", "_kept")

    def __init__(self, base: str, base_cache: str) -> None:
        self._base = base
        self._cache = base_cache
        self._kept: dict[tuple[tuple[str, str, str, str], ...], tuple[str, Any]] = {}

    def __call__(self, active: Sequence[Injection]) -> tuple[str, Any]:
        """``(text, frozen rows)`` of the system prompt with ``active`` injected."""
        key = tuple((i.id, i.flavor, i.system, i.cache) for i in active if i.system) \
            if active else ()
        found = self._kept.get(key)
        if found is None:
            text, rows = compose_system(self._base, self._cache, active)
            if len(self._kept) >= _KEEP:
                self._kept.clear()
            found = self._kept[key] = (text, freeze(rows))
        return found
