"""Agents: ``LLMCall`` (one call) and ``Agent`` (the ReAct loop as a recorded flowchart)."""

from typing import TYPE_CHECKING, Any

from .agent import Agent, LLMCall, RunResult
from .checkin import check_in_approved, check_in_declined
from .loop import WRAP_UP_INSTRUCTION
from .moments import act, allow, ask, deny
from .permissions import PermissionPolicy, PermissionRule

if TYPE_CHECKING:
    from .window import (
        WindowStrategy,
        restoring,
        sliding_window,
        summarize_window,
        token_budget,
        windowed_messages,
    )

_WINDOW_NAMES = frozenset((
    "WindowStrategy", "restoring", "sliding_window", "summarize_window", "token_budget",
    "windowed_messages"))

__all__ = [
    "WRAP_UP_INSTRUCTION",
    "Agent",
    "LLMCall",
    "PermissionPolicy",
    "PermissionRule",
    "RunResult",
    "WindowStrategy",
    "act",
    "allow",
    "ask",
    "check_in_approved",
    "check_in_declined",
    "deny",
    "restoring",
    "sliding_window",
    "summarize_window",
    "token_budget",
    "windowed_messages",
]


def __getattr__(name: str) -> Any:
    """Window strategies load on first use: most agents never set ``window=``."""
    if name in _WINDOW_NAMES:
        from . import window

        value = getattr(window, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
