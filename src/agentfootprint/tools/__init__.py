"""Tools beyond ``@tool``: pausing from inside a tool, and the code runner.

``tool``, ``define_tool``, ``Tool`` and ``ToolContext`` are imported from ``agentfootprint``.
Here: ``ask_human`` and ``pause_here`` (a tool that waits on a person), ``code_runner`` (a
tool that runs a program) and ``mcp_server`` (the tools of an MCP server). Dispatch,
validation and the script ledger live in their modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names
from ._pause import ask_human, pause_here

if TYPE_CHECKING:
    from ._code_runner import code_runner
    from ._mcp import mcp_server

__all__ = ["ask_human", "code_runner", "mcp_server", "pause_here"]

# The code runner and the MCP client load on first use: an agent without them never pays.
_LAZY = {"code_runner": "_code_runner", "mcp_server": "_mcp"}

_MOVED = {
    **dict.fromkeys(("Tool", "ToolContext", "define_tool", "tool"), "agentfootprint"),
    **dict.fromkeys(("CodeRunnerTool", "RunLimits", "ScriptDispatch", "dispatch_script_call"),
                    "agentfootprint.tools._code_runner"),
    "PauseRequest": "agentfootprint.tools._pause",
    **dict.fromkeys(("ToolOutcome", "ToolRegistry"), "agentfootprint.tools._registry"),
    **dict.fromkeys(("MAX_SCRIPT_BYTES", "MAX_SCRIPT_ROWS", "RunnerOutcome", "ScriptRow",
                     "ToolScript", "check_script_ledger", "record_script_row",
                     "script_rows_of_turn", "without_earlier_script_text"),
                    "agentfootprint.tools._scripts"),
}
"""Names this package no longer exports, and where each is imported from (one release)."""

_lazy, __dir__ = _lazy_names(__name__, _LAZY)
_moved = _moved_names(__name__, _MOVED, stacklevel=3)


def __getattr__(name: str) -> Any:
    """A lazy name on first use; else a name that moved, with a DeprecationWarning."""
    return _lazy(name) if name in _LAZY else _moved(name)
