"""Where an agent used as a tool files its inner run: a context variable set per tool call.

The ToolCalls step sets the reporter around every dispatch (the hot path), while the
agent-as-tool itself (``agent/_as_tool.py``, a dataclass and its factory) is only needed once
someone calls ``agent.as_tool``. Keeping the reporter here lets a plain run skip loading that
module (tests/test_import_cost.py pins it); ``_as_tool`` reads the reporter from here.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from functools import partial
from typing import Any

from ..flow import Scope
from ..runs import trace

__all__ = ["Report", "end_sub_runs", "file_sub_run", "report_sub_runs", "reporter"]

Report = Callable[[str, str, str, dict[str, Any]], None]
"""``report(tool name, tool call id, inner run id, inner recording as JSON)``."""

reporter: contextvars.ContextVar[Report | None] = contextvars.ContextVar(
    "agent_tool_reports", default=None)
"""Set by the ToolCalls step around one dispatch: where an agent-tool files its inner run."""


def file_sub_run(scope: Scope, tool: str, call_id: str, run_id: str,
                 recording: dict[str, Any]) -> None:
    """Files an agent-tool's inner run into the step of ``scope`` (its links and recording);
    the reporter is this, bound to the step's scope (``partial``: no Python call per tool)."""
    links = dict(scope.get(trace.SUB_RUNS) or {})
    links[call_id] = {"tool": tool, "run_id": run_id}
    scope[trace.SUB_RUNS] = links
    kept = dict(scope.get(trace.SUB_RECORDINGS) or {})
    kept[run_id] = recording
    scope[trace.SUB_RECORDINGS] = kept


def report_sub_runs(scope: Scope) -> contextvars.Token[Report | None]:
    """While one tool call runs: an agent-tool's inner run is linked into ``scope``'s step.

    The caller ends it with :func:`end_sub_runs` (in a ``finally``) when the call is done; a
    plain set and reset, as a tool call is the hot path.
    """
    return reporter.set(partial(file_sub_run, scope))


def end_sub_runs(token: contextvars.Token[Report | None]) -> None:
    """Undo :func:`report_sub_runs` (the reporter around the call comes back)."""
    reporter.reset(token)
