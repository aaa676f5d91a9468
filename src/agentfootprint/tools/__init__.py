"""Tools the model can call: definition, validation, dispatch, and the code runner."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(ModuleType):
    """This package's module type: importing the ``code_runner`` submodule never binds it over
    the ``code_runner`` function (the import system sets a package attribute per submodule)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "code_runner" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
