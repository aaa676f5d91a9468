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
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Final, cast

from pydantic_core import ValidationError

from .._record import Compared, record_class
from ..errors import ConfigurationError
from ..providers._base import ToolCall, ToolSchema
from ._pause import PauseRequest
from ._tool import Tool, ToolContext

if TYPE_CHECKING:
    from ._arguments import FunctionCall
    from ._replay import ToolReplay
    from ._validate import ArgumentIssue

    _Plan = tuple[Tool, Callable[[object], list[ArgumentIssue]],
                  Callable[[dict[str, Any]], list[ArgumentIssue]] | None,
                  Callable[[Any], Any] | None, FunctionCall | None, bool]
    """A tool's calls, worked out once (``ToolRegistry._plan``): the tool, its schema check,
    its own ``validate`` while still needed, and for a ``@tool`` its validator, its call and
    whether that validator is its fields validator (``FunctionCall.fields_validator``)."""

__all__ = ["ToolOutcome", "ToolRegistry", "cap_result", "origin_clash", "result_text"]

logger = logging.getLogger("agentfootprint.tools")

NO_VALUE = "(this tool returned no value)"
OUTCOME_UNKNOWN: Final = "outcome-unknown"
"""The status of a call a crash interrupted and that was not run again (``tools/_replay.py``;
defined here so the run journal reads it without loading the replay: cold start)."""


@record_class
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
        self._plans: dict[str, _Plan] = {}
        self.context_free: dict[str, Tool] = {}
        """By name, the tools whose calls need no ``RunContext``: ``@tool`` functions without
        a context parameter (and no script), once planned. ``dispatch`` may be given
        ``ctx=None`` for a call of such a tool (``context_free.get(name) is tool``), so the hot
        path builds no context for a call that never sees it."""
        self.replay: ToolReplay | None = None
        """Set on an explanation's re-run only: calls are answered from the recording
        (``tools/_replay.py``), and a tool runs for real only when that is safe."""

    def schemas(self) -> list[ToolSchema]:
        return self._schemas

    def __bool__(self) -> bool:
        return bool(self.tools)

    def _plan(self, found: Tool) -> _Plan:
        """How calls of ``found`` are checked and run, worked out on its first call.

        Its schema check (``argument_checker``; a ``define_tool``'s ``validate`` is that very
        check, so it is not run twice); for a ``@tool`` (``tools/_arguments.py``) its model's
        validator, whose one validation per call gives the function's keyword arguments;
        else the tool's own ``validate``.
        """
        from ._arguments import function_call
        from ._validate import argument_checker, checks_schema  # (the first call: cold start)

        own = found.validate
        check: Callable[[object], list[ArgumentIssue]]
        validate: Callable[[dict[str, Any]], list[ArgumentIssue]] | None = own
        if checks_schema(own, found.input_schema):
            check, validate = cast("Callable[[object], list[ArgumentIssue]]", own), None
        else:
            check = argument_checker(found.input_schema)
        function = function_call(found.execute, own)
        if function is not None:
            fields = function.fields_validator()
            plan: _Plan = (found, check, None, fields or function.validator(), function,
                           fields is not None)
            if function.context_param is None and getattr(found, "script", None) is None:
                self.context_free[found.name] = found
        else:
            plan = (found, check, validate, None, None, False)
        self._plans[found.name] = plan
        return plan

    async def dispatch(self, call: ToolCall, ctx: ToolContext | None,
                       run_id: str = "") -> ToolOutcome:
        """Run ``call``; its one result. ``ctx`` may be ``None`` only for a tool in
        ``context_free`` (it never sees one); ``run_id`` then names the run in the warning
        a raising tool logs."""
        name = call["name"]
        found = self.tools.get(name)
        plan = self._plans.get(name)
        if plan is None or plan[0] is not found:
            if found is None:
                names = ", ".join(self.tools) or "none"
                return ToolOutcome(f"Unknown tool '{name}'. Available tools: {names}.",
                                   error=True, status="unknown")
            plan = self._plan(found)
        _, check, validate, validator, function, fields = plan
        args = call.get("args") or {}
        issues = check(args)
        kwargs: dict[str, Any] | None = None
        if issues:
            pass
        elif validator is not None:  # a @tool: its one validation gives the function's kwargs
            try:
                # this call's own fields: the fields validator's dict, else the model's
                kwargs = validator(args)[0] if fields else validator(args).__dict__
            except ValidationError as exc:
                from ._arguments import issues_of

                issues = issues_of(exc)
        elif validate is not None:
            issues = validate(args)
        if issues:
            from ._validate import describe_issues

            return ToolOutcome(describe_issues(name, issues), error=True, status="invalid",
                               issues=tuple(issues))
        if self.replay is not None:
            answered = self.replay.answer(found, args)
            if answered is not None:
                return answered
        try:
            if function is not None and kwargs is not None:
                if function.context_param is not None:
                    kwargs[function.context_param] = ctx
                value = (await asyncio.to_thread(function.func, **kwargs) if found.blocking
                         else function.func(**kwargs))
            else:
                assert ctx is not None  # (a tool outside ``context_free`` is always given one)
                value = (await asyncio.to_thread(found.execute, args, ctx) if found.blocking
                         else found.execute(args, ctx))
            kind = type(value)
            if kind is CoroutineType or (kind not in _NEVER_AWAITABLE
                                         and inspect.isawaitable(value)):
                value = await value
                kind = type(value)
        except PauseRequest:
            raise  # a person must answer: the loop pauses the run at this call
        except Exception as exc:
            if getattr(ctx, "_missed", None) is exc:  # ctx.deps read in a run given none:
                raise  # the run fails naming the tool (tools/_context.py), not a tool error
            # the type, never the message: it may hold a secret the run's redaction masks
            logger.warning("tool %r raised %s (call %s of run %s); the model was given the "
                           "error text, and the run's recording holds it", name,
                           type(exc).__name__, call.get("id"),
                           run_id if ctx is None else ctx.run_id)
            return ToolOutcome(f"Error: {type(exc).__name__}: {exc}", error=True, status="error")
        # ``result_text``, inlined for the common str and int results
        text = (value if kind is str else int.__repr__(value) if kind is int
                else result_text(value))
        cap = self.max_result_chars
        if cap is not None and len(text) > cap:
            text = cap_result(name, text, cap)
        # ``ToolOutcome(text)``, without its ``__init__`` call (one per tool call)
        outcome: ToolOutcome = _new(ToolOutcome)
        outcome.content = text
        outcome.error = False
        outcome.status = "success"
        outcome.issues = ()
        return outcome


_new = object.__new__

_NEVER_AWAITABLE = frozenset((str, int, float, bool, type(None), dict, list, tuple))
"""Exact result types that are never awaitable (``inspect.isawaitable`` is not asked)."""


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
