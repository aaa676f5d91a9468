"""Tools the model can call: definition, validation, dispatch, and the code runner."""

from .code_runner import (
    CodeRunnerTool,
    RunLimits,
    ScriptDispatch,
    code_runner,
    dispatch_script_call,
)
from .registry import ToolOutcome, ToolRegistry
from .scripts import (
    MAX_SCRIPT_BYTES,
    MAX_SCRIPT_ROWS,
    RunnerOutcome,
    ScriptRow,
    ToolScript,
    check_script_ledger,
    record_script_row,
    script_rows_of_turn,
    without_earlier_script_text,
)
from .tool import Tool, ToolContext, define_tool, tool

__all__ = [
    "MAX_SCRIPT_BYTES",
    "MAX_SCRIPT_ROWS",
    "CodeRunnerTool",
    "RunLimits",
    "RunnerOutcome",
    "ScriptDispatch",
    "ScriptRow",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "ToolScript",
    "check_script_ledger",
    "code_runner",
    "define_tool",
    "dispatch_script_call",
    "record_script_row",
    "script_rows_of_turn",
    "tool",
    "without_earlier_script_text",
]
