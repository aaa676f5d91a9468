"""Tool catalogs in, one neutral shape out: ``ToolDefinition`` (name, description, schema).

A catalog is what a model is shown. It comes in the shapes the providers use, and the lint
reads them all, item by item, so one file may even mix them:

* OpenAI chat completions: ``{"type": "function", "function": {"name", "description",
  "parameters"}}``; the Responses API's flat form ``{"type": "function", "name", ...}``;
  the legacy ``functions=[{"name", "description", "parameters"}]``.
* Anthropic: ``{"name", "description", "input_schema"}``.
* MCP: ``{"name", "description", "inputSchema"}``, alone or as a ``tools/list`` result
  (``{"tools": [...]}``, or the whole JSON-RPC response ``{"result": {"tools": [...]}}``).
* Plain: ``{"name", "description"}`` with ``parameters`` or no schema at all.
* Our own ``Tool`` objects, or an agent's tools.

Anything else is refused with a ``ConfigurationError`` naming the item and the shapes read;
nothing is guessed. JSON only: YAML is not a dependency of the package.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

__all__ = ["ToolDefinition", "definitions_of", "load_tool_catalog", "read_tool_catalog"]

_SHAPES = ("OpenAI ({'type': 'function', 'function': {...}} or the Responses flat form), "
           "Anthropic (name/description/input_schema), MCP (name/description/inputSchema, "
           "or a tools/list result) or plain {name, description, parameters}")


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One tool as a model sees it: what the lint checks, whatever format it came in."""

    name: str
    description: str
    """The description text; ``""`` when the catalog gives none."""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    """The JSON Schema of the arguments (``{}`` when the catalog gives none)."""
    source: str = "plain"
    """The format it was read from: ``openai``, ``openai-responses``, ``anthropic``, ``mcp``,
    ``plain`` or ``tool`` (one of our ``Tool`` objects)."""


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigurationError(f"{where}: {key!r} must be a string, got {value!r:.60}; fix "
                                 "the catalog entry")
    return value


def _schema(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where}: the parameter schema must be a JSON object, got "
                                 f"{value!r:.60}; fix the catalog entry")
    return value


def _definition(item: Any, position: int) -> ToolDefinition:
    """The tool at ``position`` of a catalog, in whichever provider shape it is written."""
    where = f"tool #{position + 1}"
    if not isinstance(item, Mapping):
        raise ConfigurationError(f"{where} is {item!r:.60}, not a JSON object; each tool must "
                                 f"be one of {_SHAPES}")
    body: Mapping[str, Any] = item
    source = "plain"
    if item.get("type") == "function" and isinstance(item.get("function"), Mapping):
        body, source = item["function"], "openai"
    elif item.get("type") == "function":
        source = "openai-responses"
    elif "input_schema" in item:
        source = "anthropic"
    elif "inputSchema" in item:
        source = "mcp"
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"{where} has no name (keys: {sorted(map(str, body))[:8]}); "
                                 f"each tool must be one of {_SHAPES}")
    where = f"tool {name!r}"
    schema_key = {"anthropic": "input_schema", "mcp": "inputSchema"}.get(source, "parameters")
    return ToolDefinition(name=name, description=_text(body, "description", where),
                          input_schema=_schema(body.get(schema_key), where), source=source)


def _items(document: Any) -> list[Any]:
    """The list of tools inside a parsed catalog document."""
    if isinstance(document, Mapping):
        if isinstance(document.get("result"), Mapping):  # a JSON-RPC tools/list response
            document = document["result"]
        for key in ("tools", "functions"):
            if isinstance(document.get(key), list):
                return list(document[key])
        if "name" in document or "function" in document:
            return [document]  # a single tool definition
        raise ConfigurationError(
            f"the catalog is a JSON object without a 'tools' list (keys: "
            f"{sorted(map(str, document))[:8]}); give a list of tools or {{'tools': [...]}}")
    if isinstance(document, list):
        return document
    raise ConfigurationError(f"the catalog is {type(document).__name__}, not a list of tools; "
                             "give a JSON list of tools or {'tools': [...]}")


def read_tool_catalog(document: Any) -> list[ToolDefinition]:
    """The tools of a parsed catalog (a list, ``{"tools": [...]}``, a JSON-RPC response)."""
    items = _items(document)
    if not items:
        raise ConfigurationError("the catalog lists no tools; there is nothing to lint")
    return [_definition(item, position) for position, item in enumerate(items)]


def load_tool_catalog(path: str | Path) -> list[ToolDefinition]:
    """The tools of the JSON file at ``path`` (``"-"`` reads standard input).

    Raises ``ConfigurationError`` in one sentence when the file cannot be read, is not JSON
    (YAML included) or holds no tool in a known shape.
    """
    import sys

    shown = str(path)
    try:
        text = sys.stdin.read() if shown == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigurationError(f"no tool catalog at {shown!r}; pass the path of a JSON "
                                 "file of tool definitions") from exc
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigurationError(f"cannot read the tool catalog {shown!r} ({reason}); pass "
                                 "a readable UTF-8 JSON file") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = (" (YAML is not read: convert it to JSON)"
                if shown.endswith((".yaml", ".yml")) else "")
        raise ConfigurationError(
            f"the tool catalog {shown!r} is not valid JSON{hint}: {exc.msg} at line "
            f"{exc.lineno} column {exc.colno}; fix the file") from exc
    try:
        return read_tool_catalog(document)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{shown}: {exc}") from None


def definitions_of(source: Any) -> list[ToolDefinition]:
    """The tools of anything the lint takes: a file path, a parsed catalog, an agent, or an
    iterable of our ``Tool`` objects, ``ToolDefinition`` objects or catalog dicts."""
    if isinstance(source, (str, Path)):
        return load_tool_catalog(source)
    if isinstance(source, Mapping):
        return read_tool_catalog(source)
    registry = getattr(getattr(source, "spec", None), "registry", None)
    if registry is not None and isinstance(getattr(registry, "tools", None), Mapping):
        source = list(registry.tools.values())  # an Agent: the tools it offers the model
    if not isinstance(source, Iterable):
        raise ConfigurationError(
            f"lint_tools cannot read {source!r:.60}; pass a catalog file path, an Agent, or a "
            "list of tools (Tool objects or catalog dicts)")
    from ..tools._tool import Tool

    out: list[ToolDefinition] = []
    for position, item in enumerate(list(source)):
        if isinstance(item, ToolDefinition):
            out.append(item)
        elif isinstance(item, Tool):
            out.append(ToolDefinition(item.name, item.description, item.input_schema, "tool"))
        else:
            out.append(_definition(item, position))
    return out
