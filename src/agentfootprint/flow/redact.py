"""Redaction: which keys and emitted events must never be recorded in the clear.

The policy is applied where the record is *written* (commit log, read/write events, emit
payloads, decision evidence), so no redacted value reaches the log, the narrative, an event,
a recording or a checkpoint's embedded log. Stage code always sees the real values.
One marker everywhere: ``"[REDACTED]"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

__all__ = ["REDACTED", "RedactionPolicy"]

REDACTED: Final = "[REDACTED]"


@dataclass(slots=True)
class RedactionPolicy:
    """Keys by exact name, keys by regular expression, and emitted event names by expression."""

    keys: Iterable[str] = ()
    patterns: Iterable[str] = ()
    emit_patterns: Iterable[str] = ()
    _keys: frozenset[str] = field(init=False, repr=False)
    _patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False)
    _emit: tuple[re.Pattern[str], ...] = field(init=False, repr=False)
    _cache: dict[str, bool] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.keys = tuple(self.keys)
        self.patterns = tuple(self.patterns)
        self.emit_patterns = tuple(self.emit_patterns)
        self._keys = frozenset(self.keys)
        self._patterns = tuple(_compile(p, "patterns") for p in self.patterns)
        self._emit = tuple(_compile(p, "emit_patterns") for p in self.emit_patterns)

    def is_redacted(self, key: str) -> bool:
        """True when the state key ``key`` must be recorded as ``[REDACTED]``."""
        hit = self._cache.get(key)
        if hit is None:
            hit = key in self._keys or any(p.search(key) for p in self._patterns)
            self._cache[key] = hit
        return hit

    def is_redacted_emit(self, name: str) -> bool:
        """True when an emitted event's payload must be recorded as ``[REDACTED]``."""
        return any(p.search(name) for p in self._emit)

    def report(self) -> dict[str, list[str]]:
        """What is redacted, never the values."""
        return {
            "keys": sorted(self._keys),
            "patterns": [p.pattern for p in self._patterns],
            "emit_patterns": [p.pattern for p in self._emit],
        }


def _compile(pattern: str, field_name: str) -> re.Pattern[str]:
    from ..errors import ConfigurationError

    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigurationError(
            f"RedactionPolicy {field_name} entry {pattern!r} is not a valid regular expression "
            f"({exc}); escape it with re.escape() or fix the pattern"
        ) from exc
