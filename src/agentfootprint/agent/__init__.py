"""Agents: ``LLMCall`` (one call) and ``Agent`` (the ReAct loop as a recorded flowchart)."""

from .agent import Agent, LLMCall, RunResult
from .loop import WRAP_UP_INSTRUCTION

__all__ = ["WRAP_UP_INSTRUCTION", "Agent", "LLMCall", "RunResult"]
