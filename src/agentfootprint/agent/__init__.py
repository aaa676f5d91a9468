"""Agents: ``LLMCall`` (one call) and ``Agent`` (the ReAct loop as a recorded flowchart)."""

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .agent import Agent, LLMCall, RunResult
from .loop import WRAP_UP_INSTRUCTION
from .options import Governance, Limits, ModelSettings, Tracing

if TYPE_CHECKING:
    from .checkin import CheckInRequest, check_in_approved, check_in_declined
    from .moments import act, allow, ask, deny
    from .permissions import PermissionPolicy, PermissionRule
    from .window import (
        WindowStrategy,
        restoring,
        sliding_window,
        summarize_window,
        token_budget,
        windowed_messages,
    )

_LAZY = {
    **dict.fromkeys(("WindowStrategy", "restoring", "sliding_window", "summarize_window",
                     "token_budget", "windowed_messages"), "window"),
    **dict.fromkeys(("act", "allow", "ask", "deny"), "moments"),
    **dict.fromkeys(("PermissionPolicy", "PermissionRule"), "permissions"),
    **dict.fromkeys(("CheckInRequest", "check_in_approved", "check_in_declined"), "checkin"),
}
"""Names loaded on first use: most agents set no window, rules or check-ins."""

__all__ = [
    "WRAP_UP_INSTRUCTION",
    "Agent",
    "CheckInRequest",
    "Governance",
    "LLMCall",
    "Limits",
    "ModelSettings",
    "PermissionPolicy",
    "PermissionRule",
    "RunResult",
    "Tracing",
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


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
