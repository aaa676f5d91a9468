"""The tool registry and the per-call dispatch: every call gets exactly one result.

A call to an unknown tool, with invalid arguments, or whose tool raises, still yields a result
the model can read (and ``error=True``), so the conversation's tool-call pairing holds and the
model can correct itself. Arguments are checked against the schema the model was shown (a
boolean is not a number, ``NaN`` is refused) before a ``@tool``'s own Pydantic validation, so a
tool never runs on a value it did not declare. A tool that raises is also logged at WARNING
(logger ``agentfootprint.tools``) with its name and exception type (not its message, which may
hold a secret), so the failure is not only a string the model read. Results are strings: strings
as they are, anything else as JSON. An over-size result is replaced by a marker holding its
head.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._record import Compared
from ..errors import ConfigurationError
from ..providers._base import ToolCall, ToolSchema
from ._pause import PauseRequest
from ._tool import Tool, ToolContext

if TYPE_CHECKING:
    from ._replay import ToolReplay
    from ._validate import ArgumentIssue

__all__ = ["ToolOutcome", "ToolRegistry", "cap_result", "origin_clash", "result_text"]

logger = logging.getLogger("agentfootprint.tools")

NO_VALUE = "(this tool returned no value)"
OUTCOME_UNKNOWN: Final = "outcome-unknown"
"""The status of a call a crash interrupted and that was not run again (``tools/_replay.py``;
defined here so the run journal reads it without loading the replay: cold start)."""


@dataclass(slots=True, init=False, repr=False, eq=False)
class ToolOutcome(Compared):
    """What one call produced, as the model will read it.

    (A dataclass with its methods written once, ``_record.py``: cold start.)"""

    content: str
    error: bool = False
    status: str = "success"
    """``success``, ``error`` (the tool raised), ``invalid`` (bad arguments) or ``unknown``."""
    issues: tuple[ArgumentIssue, ...] = ()

    def __init__(self, content: str, error: bool = False, status: str = "success",
                 issues: tuple[ArgumentIssue, ...] = ()) -> None:
        self.content = content
        self.error = error
        self.status = status
        self.issues = issues


class ToolRegistry:
    """Tools by name, in the order they were given (the order the model sees)."""

    def __init__(self, tools: Iterable[Tool], *, max_result_chars: int | None = None) -> None:
        self.tools: dict[str, Tool] = {}
        for item in tools:
            if not isinstance(item, Tool):
                raise ConfigurationError(
                    f"{item!r} is not a Tool; decorate the function with @tool or use "
                    "define_tool(...)")
            if item.name in self.tools:
                raise ConfigurationError(
                    f"two tools are named {item.name!r}"
                    f"{origin_clash(self.tools[item.name], item)}; tool names must be unique")
            self.tools[item.name] = item
        if max_result_chars is not None and max_result_chars < 64:
            raise ConfigurationError(
                f"max_tool_result_chars={max_result_chars} is too small to hold a marker; "
                "use 64 or more")
        self.max_result_chars = max_result_chars
        self._schemas: list[ToolSchema] = [t.schema() for t in self.tools.values()]
        self._checks: dict[str, tuple[Tool, Callable[[object], list[ArgumentIssue]]]] = {}
        self.replay: ToolReplay | None = None
        """Set on an explanation's re-run only: calls are answered from the recording
        (``tools/_replay.py``), and a tool runs for real only when that is safe."""

    def schemas(self) -> list[ToolSchema]:
        return self._schemas

    def __bool__(self) -> bool:
        return bool(self.tools)

    def _check(self, found: Tool) -> Callable[[object], list[ArgumentIssue]]:
        """``found``'s schema check, compiled on its first call (see ``argument_checker``)."""
        kept = self._checks.get(found.name)
        if kept is None or kept[0] is not found:
            from ._validate import argument_checker  # (loads with the first call: cold start)

            kept = self._checks[found.name] = (found, argument_checker(found.input_schema))
        return kept[1]

    async def dispatch(self, call: ToolCall, ctx: ToolContext) -> ToolOutcome:
        found = self.tools.get(call["name"])
        if found is None:
            names = ", ".join(self.tools) or "none"
            return ToolOutcome(f"Unknown tool '{call['name']}'. Available tools: {names}.",
                               error=True, status="unknown")
        args = call.get("args") or {}
        issues = self._check(found)(args) or found.validate(args)
        if issues:
            from ._validate import describe_issues

            return ToolOutcome(describe_issues(found.name, issues), error=True, status="invalid",
                               issues=tuple(issues))
        if self.replay is not None:
            answered = self.replay.answer(found, args)
            if answered is not None:
                return answered
        try:
            if found.blocking:
                value = await asyncio.to_thread(found.execute, args, ctx)
            else:
                value = found.execute(args, ctx)
            if inspect.isawaitable(value):
                value = await value
        except PauseRequest:
            raise  # a person must answer: the loop pauses the run at this call
        except Exception as exc:
            if getattr(ctx, "_missed", None) is exc:  # ctx.deps read in a run given none:
                raise  # the run fails naming the tool (tools/_context.py), not a tool error
            # the type, never the message: it may hold a secret the run's redaction masks
            logger.warning("tool %r raised %s (call %s of run %s); the model was given the "
                           "error text, and the run's recording holds it", found.name,
                           type(exc).__name__, call.get("id"), ctx.run_id)
            return ToolOutcome(f"Error: {type(exc).__name__}: {exc}", error=True, status="error")
        return ToolOutcome(cap_result(found.name, result_text(value), self.max_result_chars))


def origin_clash(first: Tool, second: Tool) -> str:
    """For a duplicate-name message: `` (MCP server 'a' and MCP server 'b': ... prefix=...)``
    when either tool came from an MCP server (``tools/_mcp.py``), else nothing."""
    servers = [getattr(t, "origin", {}).get("mcp_server") for t in (first, second)]
    if not any(servers):
        return ""
    where = " and ".join(f"MCP server {s!r}" if s else "a local tool" for s in servers)
    return f" ({where}: open one server with mcp_server(..., prefix='<server>_'))"


def result_text(value: object) -> str:
    """The string the model reads for a tool's return value."""
    if isinstance(value, str):
        return value
    if value is None:
        return NO_VALUE
    kind = type(value)
    if kind is int:  # what json.dumps writes for an int (its repr), without the encoder
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    import json  # loaded on first use: a plain run never writes JSON

    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def cap_result(tool_name: str, text: str, cap: int | None) -> str:
    """``text`` when it fits, else a JSON marker of at most ``cap`` characters with its head."""
    if cap is None or len(text) <= cap:
        return text
    import json  # loaded on first use: a plain run never writes JSON

    reason = (f"{tool_name} returned {len(text)} chars, over the {cap}-char cap. "
              "Narrow the request and call again.")
    marker = {"truncated": True, "reason": reason, "head": ""}
    if len(json.dumps(marker, ensure_ascii=False)) > cap:
        bare = len(json.dumps({**marker, "reason": ""}, ensure_ascii=False))
        marker["reason"] = f"{len(text)} chars, over the {cap}-char cap; narrow the request"[
            : cap - bare]
    room = cap - len(json.dumps(marker, ensure_ascii=False))
    head = text[: max(room, 0)]
    while head and len(json.dumps({**marker, "head": head}, ensure_ascii=False)) > cap:
        head = head[: max(len(head) - 16, 0)]
    return json.dumps({**marker, "head": head}, ensure_ascii=False)
