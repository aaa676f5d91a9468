"""Tools the model can call: definition, validation and dispatch."""

from .registry import ToolOutcome, ToolRegistry
from .tool import Tool, ToolContext, define_tool, tool

__all__ = ["Tool", "ToolContext", "ToolOutcome", "ToolRegistry", "define_tool", "tool"]
