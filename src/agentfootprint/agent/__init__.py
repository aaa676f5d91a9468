"""Agents: ``LLMCall`` (one call) and ``Agent`` (the ReAct loop as a recorded flowchart)."""

from .agent import Agent, LLMCall, RunResult
from .checkin import check_in_approved, check_in_declined
from .loop import WRAP_UP_INSTRUCTION
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
