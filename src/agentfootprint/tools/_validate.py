"""Argument checks against the JSON Schema the model was shown, for every tool.

An honest subset, never raising on odd schemas: ``type`` (unions too; ``integer`` means a
whole number, and a JSON boolean is never a number), ``enum`` of plain values, ``required``,
``properties`` (recursive), ``items`` (one schema, recursive), ``additionalProperties: false``,
``anyOf``/``oneOf`` (some branch must fit) and local ``$ref``s into ``$defs``. Other keywords
are not checked. Whatever the schema says, ``NaN`` and the infinities are refused anywhere in
the arguments: they are not JSON, so a tool must never run on one (nor a recording hold one).
An issue names the path and the expected and actual *types*, never the value, so a bad
argument holding personal data is not copied into the prompt. (jsonschema would check more,
but it is not a core dependency; ``@tool`` functions get Pydantic validation after this.)
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from typing_extensions import TypedDict

__all__ = ["ArgumentIssue", "argument_checker", "check_arguments", "checks_schema",
           "describe_issues"]

MAX_ISSUES = 10

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "number": (int, float), "integer": (int,), "null": (type(None),),
}


class ArgumentIssue(TypedDict):
    path: str
    expected: str
    got: str


def _type_name(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _matches(value: Any, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    expected = _TYPES.get(kind)
    return expected is None or isinstance(value, expected)


def check_arguments(schema: Mapping[str, Any], value: object) -> list[ArgumentIssue]:
    """Every issue (at most ten) found in ``value`` against ``schema``."""
    issues: list[ArgumentIssue] = []
    value = {} if value is None else value
    _non_finite(value, "", issues)
    if not issues:
        _check(schema, value, "", issues, schema)
    return issues[:MAX_ISSUES]


_FLAT_WORDS = frozenset(("type", "title", "description", "default", "examples"))
"""The only words a property of a flat schema may use (none of them nests or constrains)."""


def argument_checker(schema: Mapping[str, Any]) -> Callable[[object], list[ArgumentIssue]]:
    """``check_arguments`` against ``schema``, read once: the same issues for every value.

    A flat object schema (named scalar properties with a ``type`` at most, as ``@tool`` and
    most hand-written schemas are) is compiled into a quick acceptance test, so arguments
    that fit cost a dict walk instead of the general schema walk on every call; anything the
    quick test does not accept (a wrong type, a missing field, a nested value, a schema with
    references or unions) goes through :func:`check_arguments`, which names the issues.
    """
    plan = _flat_plan(schema)
    if plan is None:
        def general(value: object) -> list[ArgumentIssue]:
            return check_arguments(schema, value)

        _SCHEMA_OF[general] = schema
        return general
    required, kinds, closed = plan
    needed = frozenset(required)
    # by property: the exact Python types its ``type`` surely accepts (an untyped one: any
    # scalar); a property the schema does not name takes any scalar unless it is closed
    fits = {key: frozenset(t for k in kind for t in _SURE.get(k, ())) if kind else _FLAT_SCALARS
            for key, kind in kinds.items()}
    other = frozenset() if closed else _FLAT_SCALARS
    isfinite = math.isfinite

    def check(value: object) -> list[ArgumentIssue]:
        if isinstance(value, dict) and value.keys() >= needed:
            for key, item in value.items():
                held = type(item)
                if held not in fits.get(key, other) or (held is float and not isfinite(item)):
                    break
            else:
                return []
        return check_arguments(schema, value)

    _SCHEMA_OF[check] = schema
    return check


_SCHEMA_OF: weakref.WeakKeyDictionary[Callable[[object], list[ArgumentIssue]],
                                      Mapping[str, Any]] = weakref.WeakKeyDictionary()
"""The schema each ``argument_checker`` check was compiled from (``checks_schema``)."""


def checks_schema(check: object, schema: Mapping[str, Any]) -> bool:
    """Whether ``check`` is ``argument_checker(schema)`` for this very ``schema`` object (a
    ``define_tool``'s ``validate``): the registry then runs it once per call, not twice."""
    try:
        return _SCHEMA_OF.get(check) is schema  # type: ignore[call-overload]
    except TypeError:  # not weakly referable (a bound method of a slotted class, ...)
        return False


_SURE: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),)}
"""Exact scalar types ``_matches`` accepts for a type name (a finite float, an int not a bool)."""
_FLAT_SCALARS = frozenset((str, int, float, bool, type(None)))


def _flat_plan(schema: Mapping[str, Any]
               ) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]], bool] | None:
    """``(required, kinds by property, closed)`` of a flat object schema; ``None`` otherwise."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or any(
            word in schema for word in ("$ref", "anyOf", "oneOf", "enum")):
        return None
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list) \
            or not all(isinstance(key, str) for key in required):
        return None
    kinds: dict[str, tuple[str, ...]] = {}
    for key, sub in props.items():
        if not isinstance(key, str) or not isinstance(sub, dict) or not set(sub) <= _FLAT_WORDS:
            return None
        kind = sub.get("type")
        if isinstance(kind, str):
            kinds[key] = (kind,)
        elif isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
            kinds[key] = tuple(kind)
        elif kind is None:
            kinds[key] = ()
        else:
            return None
    closed = schema.get("additionalProperties") is False and "properties" in schema
    return tuple(required), kinds, closed


def _non_finite(value: Any, path: str, issues: list[ArgumentIssue]) -> None:
    """``NaN``/``Infinity`` anywhere: Python's JSON reader accepts them, JSON does not."""
    if isinstance(value, float) and not math.isfinite(value):
        issues.append({"path": path, "expected": "a finite number", "got": _type_name(value)})
    elif isinstance(value, dict):
        for key, item in value.items():
            _non_finite(item, _join(path, key), issues)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _non_finite(item, f"{path}[{i}]", issues)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """A local ``$ref`` (``#/$defs/Name``, as Pydantic writes them) followed; others as they are."""
    for _ in range(32):  # a cycle of bare refs ends here instead of looping
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, dict):
            return schema
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _check(schema: Any, value: Any, path: str, issues: list[ArgumentIssue],
           root: Mapping[str, Any]) -> None:
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or len(issues) >= MAX_ISSUES:
        return
    for word in ("anyOf", "oneOf"):
        options = schema.get(word)
        if isinstance(options, list) and options:
            tried = [_issues_of(option, value, path, root) for option in options]
            if all(tried):
                expected = " or ".join(dict.fromkeys(
                    issue["expected"] for found in tried for issue in found[:1]))
                issues.append({"path": path, "expected": expected, "got": _type_name(value)})
                return
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if kinds and not any(_matches(value, k) for k in kinds):
        issues.append({"path": path, "expected": " or ".join(kinds), "got": _type_name(value)})
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        issues.append({"path": path, "expected": "one of " + ", ".join(map(repr, enum)),
                       "got": _type_name(value)})
    if isinstance(value, dict):
        props = schema.get("properties")
        for key in schema.get("required", ()) if isinstance(schema.get("required"), list) else ():
            if key not in value:
                issues.append({"path": _join(path, key), "expected": "a value", "got": "missing"})
        if isinstance(props, dict):
            for key, sub in props.items():
                if key in value:
                    _check(sub, value[key], _join(path, key), issues, root)
            if schema.get("additionalProperties") is False:
                for key in value:
                    if key not in props:
                        issues.append({"path": _join(path, key), "expected": "no such field",
                                       "got": _type_name(value[key])})
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(schema["items"], item, f"{path}[{i}]", issues, root)


def _issues_of(schema: Any, value: Any, path: str,
               root: Mapping[str, Any]) -> list[ArgumentIssue]:
    found: list[ArgumentIssue] = []
    _check(schema, value, path, found, root)
    return found


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


def describe_issues(tool_name: str, issues: list[ArgumentIssue]) -> str:
    """The tool result a model reads when its arguments were rejected."""
    lines = [f"Invalid arguments for tool '{tool_name}' — the call was not executed."]
    for issue in issues:
        where = issue["path"] or "arguments"
        if issue["got"] == "missing":
            lines.append(f"- '{where}' is required but missing")
        else:
            lines.append(f"- '{where}': expected {issue['expected']}, got {issue['got']}")
    lines.append("Fix the arguments and call the tool again.")
    return "\n".join(lines)
