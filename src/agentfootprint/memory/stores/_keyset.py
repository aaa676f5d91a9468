"""The keyset cursor both stores use: the ``(updated_at, seq)`` of the last entry handed out."""

from __future__ import annotations

from agentfootprint.memory._errors import InvalidCursorError


def encode_cursor(updated_at: int, seq: int) -> str:
    """An opaque cursor pointing just after the entry with this sort key."""
    return f"{updated_at}:{seq}"


def decode_cursor(cursor: str, *, store: str) -> tuple[int, int]:
    """The sort key inside ``cursor``; a cursor this store could not have made is refused."""
    try:
        updated_at, seq = cursor.split(":")
        return int(updated_at), int(seq)
    except (AttributeError, ValueError):
        raise InvalidCursorError(
            f"{store}.list(cursor={cursor!r}) is not a cursor this store returned; "
            "pass None for the first page or the cursor of the previous page."
        ) from None
