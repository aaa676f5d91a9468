"""The window projection: which messages a call was sent, from ``history`` and its window plan.

The agent's window strategies record their plan under ``trace.WINDOW`` instead of a copy of the
messages; anyone rebuilding a past request (the recording, backtrack, the report) projects the
recorded ``history`` through it. It lives here, beside the contract, so readers of a recording
need no agent import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["windowed_messages"]


def windowed_messages(history: Sequence[Any], window: Mapping[str, Any] | None) -> list[Any]:
    """The messages a call was sent, rebuilt from ``history`` and its ``window`` record.

    With no record (no strategy configured) that is the whole history, so a past request
    rebuilds the same way with or without a window.
    """
    if window is None:
        return list(history)
    sent: list[Any] = [window["summary"]] if window.get("summary") else []
    sent.extend(history[i] for i in window["kept"] if i < len(history))
    return sent
