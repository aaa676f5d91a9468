"""Errors raised by the memory layer, hung on the package's one exception tree.

RunError
└── MemoryStoreError        a store failed; ``store`` names it
    └── UnreadableEntryError    stored bytes exist but cannot be read (``entry_id`` kept)
ConfigurationError
├── InvalidCursorError      a ``list`` cursor this store never handed out
└── InvalidIdentityError    an identity field no store can keep (too long, NUL, lone surrogate)
"""

from __future__ import annotations

from agentfootprint.errors import ConfigurationError, RunError

__all__ = ["InvalidCursorError", "InvalidIdentityError", "MemoryStoreError",
           "UnreadableEntryError"]


class MemoryStoreError(RunError):
    """A memory store failed. Never guessed around: a guessed answer overwrites memory."""

    def __init__(self, message: str, *, store: str) -> None:
        super().__init__(message)
        self.store = store


class UnreadableEntryError(MemoryStoreError):
    """A stored entry exists but cannot be decoded; it is never replaced by fresh state."""

    def __init__(self, message: str, *, store: str, entry_id: str) -> None:
        super().__init__(message, store=store)
        self.entry_id = entry_id


class InvalidCursorError(ConfigurationError, ValueError):
    """A ``list`` cursor that is malformed; pass back only cursors the store returned."""


class InvalidIdentityError(ConfigurationError, ValueError):
    """A ``MemoryIdentity`` field breaking the one rule every store shares. A ``ValueError``
    too, so Pydantic reports a stored identity that breaks it as a validation error."""
