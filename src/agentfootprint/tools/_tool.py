"""Tools: ``@tool`` on a typed function, or ``define_tool`` with a raw JSON Schema.

``@tool`` reads the signature and docstring: the first paragraph is the description, an
``Args:`` section describes parameters, type hints become the JSON Schema, and Pydantic
validates the model's arguments before the function runs. A parameter annotated
``RunContext[Deps]`` (or ``ToolContext``, the same class) receives the call's context, with
the run's deps, instead of a model argument. The tool stays callable as the function it was
made from (``add(1, 2)``; ``tool.fn`` is that function), so a unit test needs no agent.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    NoReturn,
    get_origin,
    get_type_hints,
    overload,
)

from pydantic import BaseModel, ConfigDict, create_model
from typing_extensions import ParamSpec, TypeVar

from .._record import Shown, assign, record_class
from ..errors import ConfigurationError
from ..providers._base import ToolSchema
from ._context import RunContext, ToolContext

if TYPE_CHECKING:  # the schema checker loads with the first define_tool (cold start)
    from ._validate import ArgumentIssue

__all__ = ["CheckIn", "RunContext", "Tool", "ToolContext", "define_tool", "tool"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

CheckIn = bool | Callable[[dict[str, Any]], bool] | None
"""A tool's consent gate: ``True`` always asks a person, ``fn(args) -> bool`` asks when it
returns true, ``None``/``False`` never asks (see ``agent/checkin.py``)."""


def _no_function(*args: Any, **kwargs: Any) -> NoReturn:
    """The ``fn`` of a tool built directly from an ``execute`` (no function of its own)."""
    raise TypeError("this tool was not made from a function; run it through an agent")


P = ParamSpec("P", default=...)
R = TypeVar("R", default=Any)


@record_class(frozen=True)
class Tool(Shown, Generic[P, R]):
    """A callable the model can ask for, with the schema it is shown.

    Generic in the function it was made from (``Tool[(a: int, b: int), int]`` for ``@tool``
    on ``def add(a: int, b: int) -> int``), so calling the tool type-checks like the function.
    A frozen dataclass (identity eq) whose ``__init__`` and ``__repr__`` are written once
    (``_record.py``).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    execute: Callable[[dict[str, Any], ToolContext], Any]
    """Runs the tool with already-validated arguments; may be sync or async."""
    validate: Callable[[dict[str, Any]], list[ArgumentIssue]] = field(repr=False)
    """Returns the argument issues (empty when the arguments are fine)."""
    check_in: CheckIn = None
    """The consent gate (check-in); ``None`` = no consent needed."""
    blocking: bool = False
    """True for a sync function that may block (network, disk, a subprocess): it runs in a
    worker thread, so other runs and parallel branches on the event loop go on meanwhile."""
    side_effects: bool = True
    """False declares the tool safe to run again (a pure lookup): a call a crash interrupted
    is simply re-run on resume. True (the default: a tool that declares nothing is treated
    as unsafe to repeat) means an interrupted call is not repeated blindly."""
    idempotent: bool = False
    """True declares that the tool deduplicates by ``ctx.idempotency_key``: a call a crash
    interrupted is run again on resume with the same key, and the tool applies it once."""
    fn: Callable[P, R] = field(default=_no_function, repr=False, compare=False)
    """The function the tool was made from (``@tool``'s function, ``define_tool``'s
    ``execute``); calling the tool calls it."""

    def __init__(self, name: str, description: str, input_schema: Mapping[str, Any],
                 execute: Callable[[dict[str, Any], ToolContext], Any],
                 validate: Callable[[dict[str, Any]], list[ArgumentIssue]],
                 check_in: CheckIn = None, blocking: bool = False, side_effects: bool = True,
                 idempotent: bool = False, fn: Callable[P, R] = _no_function) -> None:
        assign(self, name=name, description=description, input_schema=input_schema,
               execute=execute, validate=validate, check_in=check_in, blocking=blocking,
               side_effects=side_effects, idempotent=idempotent, fn=fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function the tool was made from, as itself (a unit test needs no agent)."""
        if self.fn is _no_function:
            raise TypeError(f"tool {self.name!r} was not made from a function, so it cannot be "
                            "called directly; run it through an agent")
        return self.fn(*args, **kwargs)

    def schema(self) -> ToolSchema:
        return {"name": self.name, "description": self.description,
                "input_schema": dict(self.input_schema)}


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ (providers reject others); "
            "rename it")


def define_tool(name: str, description: str, input_schema: Mapping[str, Any] | None,
                execute: Callable[..., Any], *, blocking: bool | None = None,
                side_effects: bool = True, idempotent: bool = False) -> Tool:
    """A tool from a JSON Schema; ``execute(args)`` or ``execute(args, ctx)``.

    A sync ``execute`` runs in a worker thread (``blocking``, the default for sync functions)
    unless ``blocking=False`` says it returns at once. ``side_effects=False`` declares it safe
    to re-run; ``idempotent=True`` declares it deduplicates by ``ctx.idempotency_key``.
    """
    _check_name(name)
    if not description:
        raise ConfigurationError(f"tool {name!r} needs a description; the model reads it")
    if not callable(execute):
        raise ConfigurationError(f"tool {name!r}: execute must be callable, got {execute!r}")
    schema = dict(input_schema or {"type": "object", "properties": {}})
    if schema.get("type") != "object" or not isinstance(schema.get("properties", {}), Mapping):
        raise ConfigurationError(
            f"tool {name!r}: input_schema must describe an object of named arguments, e.g. "
            "{'type': 'object', 'properties': {'city': {'type': 'string'}}}")
    takes_ctx = _arity(execute) >= 2
    from ._validate import argument_checker

    def run(args: dict[str, Any], ctx: ToolContext) -> Any:
        return execute(args, ctx) if takes_ctx else execute(args)

    return Tool(name, description, schema, run, argument_checker(schema),
                blocking=_blocking(execute, blocking), side_effects=side_effects,
                idempotent=idempotent, fn=execute)


def _blocking(fn: Callable[..., Any], given: bool | None) -> bool:
    if given is not None:
        return given
    return not inspect.iscoroutinefunction(fn)


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(*, name: str | None = None, description: str | None = None,
         check_in: CheckIn = None, blocking: bool | None = None, side_effects: bool = True,
         idempotent: bool = False) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None, check_in: CheckIn = None,
         blocking: bool | None = None, side_effects: bool = True,
         idempotent: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function (sync or async) into a ``Tool``.

    A sync function runs in a worker thread, so a slow one (an HTTP call, a query) never stalls
    other runs on the event loop; ``blocking=False`` runs a quick pure one inline instead.
    ``side_effects=False`` declares it safe to re-run after a crash (a pure lookup);
    ``idempotent=True`` declares it deduplicates by ``ctx.idempotency_key``.
    """

    def make(func: Callable[..., Any]) -> Tool[..., Any]:
        return _from_function(func, name=name, description=description, check_in=check_in,
                              blocking=_blocking(func, blocking), side_effects=side_effects,
                              idempotent=idempotent)

    return make(fn) if fn is not None else make


def _from_function(func: Callable[..., Any], *, name: str | None, description: str | None,
                   check_in: CheckIn, blocking: bool, side_effects: bool = True,
                   idempotent: bool = False) -> Tool:
    tool_name = name or func.__name__
    _check_name(tool_name)
    summary, param_docs = _parse_docstring(inspect.getdoc(func) or "")
    text = description or summary
    if not text:
        raise ConfigurationError(
            f"tool {tool_name!r} needs a description: add a docstring or pass description=")
    try:
        hints = get_type_hints(func, include_extras=True)  # Annotated[int, Field(ge=1)] kept
    except Exception as exc:
        raise ConfigurationError(f"tool {tool_name!r}: cannot read its type hints ({exc})") from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(func).parameters.values():
        if param.name not in hints:
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type hint; annotate it "
                f"(e.g. {param.name}: str) so the model knows what to send, or Any for anything")
        annotation = hints[param.name]
        if annotation is RunContext or get_origin(annotation) is RunContext:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(f"tool {tool_name!r}: *args/**kwargs cannot be described")
        from pydantic import Field

        default = ... if param.default is inspect.Parameter.empty else param.default
        doc = param_docs.get(param.name)  # (None would override an Annotated description)
        fields[param.name] = (annotation, Field(default) if doc is None
                              else Field(default, description=doc))
    from ._arguments import FunctionCall, arguments_schema

    # declared now, built on the first call (its JSON Schema needs no validator: cold start)
    model: type[BaseModel] = create_model(
        f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid", defer_build=True),
        **fields)
    call = FunctionCall(func, model, context_param)
    return Tool(tool_name, text, _clean_schema(arguments_schema(model)), call, call.issues,
                check_in, blocking, side_effects=side_effects, idempotent=idempotent, fn=func)


_NAMED: Final = frozenset({"properties", "patternProperties", "$defs", "definitions"})
"""Schema keywords whose keys are names (a parameter may be called ``title``), not keywords."""


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop Pydantic's titles: the model needs names and types, not echoes of them.

    Only the ``title`` keyword goes; a parameter or definition named ``title`` stays."""
    def strip(node: object) -> Any:
        if isinstance(node, dict):
            return {k: ({n: strip(s) for n, s in v.items()} if k in _NAMED and isinstance(v, dict)
                        else strip(v))
                    for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    out: dict[str, Any] = strip(schema)
    out.setdefault("properties", {})
    return out


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    summary = doc.split("\n\n", 1)[0].strip()
    params: dict[str, str] = {}
    if not any(head in doc for head in ("Args:", "Arguments:", "Parameters:")):
        return " ".join(summary.split()), params  # (no section: no regex compiled, cold start)
    match = re.search(r"^(?:Args|Arguments|Parameters):\s*$(.*?)(?:^\S|\Z)", doc, re.M | re.S)
    if match:
        for line in match.group(1).splitlines():
            found = re.match(r"\s+(\w+)(?:\s*\(.*?\))?\s*:\s*(.+)", line)
            if found:
                params[found.group(1)] = found.group(2).strip()
    return " ".join(summary.split()), params
