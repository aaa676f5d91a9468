"""Tools the model can call: definition, validation, dispatch, and the code runner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .pause import PauseRequest, ask_human, pause_here
from .registry import ToolOutcome, ToolRegistry
from .tool import Tool, ToolContext, define_tool, tool

if TYPE_CHECKING:
    from .code_runner import (
        CodeRunnerTool,
        RunLimits,
        ScriptDispatch,
        code_runner,
        dispatch_script_call,
    )
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

__all__ = [
    "MAX_SCRIPT_BYTES",
    "MAX_SCRIPT_ROWS",
    "CodeRunnerTool",
    "PauseRequest",
    "RunLimits",
    "RunnerOutcome",
    "ScriptDispatch",
    "ScriptRow",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "ToolScript",
    "ask_human",
    "check_script_ledger",
    "code_runner",
    "define_tool",
    "dispatch_script_call",
    "pause_here",
    "record_script_row",
    "script_rows_of_turn",
    "tool",
    "without_earlier_script_text",
]

# The code runner and the script ledger load on first use: an agent without them never pays.
_LAZY = {
    **dict.fromkeys(("CodeRunnerTool", "RunLimits", "ScriptDispatch", "code_runner",
                     "dispatch_script_call"), "code_runner"),
    **dict.fromkeys(("MAX_SCRIPT_BYTES", "MAX_SCRIPT_ROWS", "RunnerOutcome", "ScriptRow",
                     "ToolScript", "check_script_ledger", "record_script_row",
                     "script_rows_of_turn", "without_earlier_script_text"), "scripts"),
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY, keep=("code_runner",))
