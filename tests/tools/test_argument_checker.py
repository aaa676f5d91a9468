"""argument_checker: a tool's schema read once gives the same issues as check_arguments, and
arguments that fit a flat schema skip the general walk (the hot path of every tool call)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from agentfootprint.flow._values import freeze
from agentfootprint.tools import _validate
from agentfootprint.tools._validate import argument_checker, check_arguments

FLAT = {"type": "object", "properties": {
    "a": {"type": "integer", "description": "first"}, "b": {"type": "integer"},
    "name": {"type": "string", "title": "Name"}, "ratio": {"type": "number"},
    "flag": {"type": "boolean"}, "maybe": {"type": ["string", "null"]}, "any": {}},
    "required": ["a", "b"]}

SCHEMAS: list[dict[str, Any]] = [
    FLAT,
    {**FLAT, "additionalProperties": False},
    {"type": "object"},
    {"type": "object", "additionalProperties": False},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"kind": {"type": "string", "enum": ["x", "y"]}}},
    {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}},
    {"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}},
     "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}}},
    {"type": "object", "properties": {"odd": {"type": 3}, "empty": {"type": []}}},
    {"type": "object", "required": "a"},
    {"type": "object", "required": [1, "a"]},
]

VALUES: list[Any] = [
    None, {}, [], "text", {"a": 1, "b": 2}, {"a": 1}, {"a": 1, "b": 2, "zzz": 3},
    {"a": True, "b": 2}, {"a": 1.0, "b": 2}, {"a": 1.5, "b": 2}, {"a": "1", "b": 2},
    {"a": 1, "b": 2, "ratio": math.nan}, {"a": 1, "b": 2, "ratio": math.inf},
    {"a": 1, "b": 2, "ratio": 0.5, "flag": False, "name": "n", "maybe": None, "any": [1]},
    {"a": 1, "b": 2, "maybe": 3}, {"a": 1, "b": 2, "extra": {"deep": math.nan}},
    {"a": 1, "b": 2, "name": None}, {"kind": "z"}, {"kind": "x"}, {"items": [1, "2"]},
    {"n": "no"}, {"n": None}, {"p": {"x": "1"}}, {"odd": 1, "empty": "e"},
]


@pytest.mark.parametrize(("schema", "value"), list(itertools.product(SCHEMAS, VALUES)))
def test_same_issues_as_the_general_walk(schema: dict[str, Any], value: Any) -> None:
    assert argument_checker(schema)(value) == check_arguments(schema, value)
    assert argument_checker(schema)(freeze(value)) == check_arguments(schema, freeze(value))


def test_fitting_arguments_of_a_flat_schema_skip_the_general_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[object] = []
    general = _validate.check_arguments

    def counting(schema: Any, value: object) -> list[_validate.ArgumentIssue]:
        walked.append(value)
        return general(schema, value)

    monkeypatch.setattr(_validate, "check_arguments", counting)
    check = argument_checker({**FLAT, "additionalProperties": False})
    assert check({"a": 1, "b": 2, "name": "x", "maybe": None}) == []
    assert check(freeze({"a": 1, "b": 2})) == []  # a call as the run's state holds it
    assert walked == []
    issues = check({"a": "one", "b": 2})
    assert walked == [{"a": "one", "b": 2}]
    assert issues == [{"path": "a", "expected": "integer", "got": "string"}]
