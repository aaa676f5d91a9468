"""A ``@tool``'s arguments are validated by its model's fields schema alone (no model instance
per call) with exactly the model's results: the same keyword arguments, defaults and coercions,
and the same errors; a model that is more than its fields is validated as the model."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from agentfootprint import RunContext, tool
from agentfootprint.tools._arguments import FunctionCall
from agentfootprint.tools._registry import ToolRegistry


class Point(BaseModel):
    x: int


@tool(blocking=False)
def shaped(a: int, b: Annotated[str, Field(min_length=2)] = "zz", c: list[int] | None = None,
           p: Point | None = None) -> str:
    """Echo the arguments."""
    return f"{a} {b} {c} {p}"


def _outcome(result: Any) -> Any:
    try:
        return result()
    except ValidationError as exc:
        return exc.errors(include_url=False)


@pytest.mark.parametrize("args", [
    {"a": 1}, {"a": "7", "b": "xy"}, {"a": 1, "c": [1, "2"]}, {"a": 1, "p": {"x": "3"}},
    {"b": "x"}, {"a": 1.5}, {"a": 1, "zz": 2}, {"a": 1, "p": {"x": 1, "y": 2}}, {},
])
def test_the_fields_validator_gives_what_the_model_gives(args: dict[str, Any]) -> None:
    call = shaped.execute
    assert isinstance(call, FunctionCall)
    fields = call.fields_validator()
    assert fields is not None
    model = call.validator()
    assert _outcome(lambda: fields(args)[0]) == _outcome(lambda: model(args).__dict__)


def test_a_model_with_its_own_validation_is_not_reduced_to_its_fields() -> None:
    from pydantic import model_validator

    def build() -> FunctionCall:
        @tool(blocking=False)
        def plain(a: int) -> int:
            """Return a."""
            return a

        call = plain.execute
        assert isinstance(call, FunctionCall)
        return call

    call = build()

    class Checked(call.model):  # type: ignore[name-defined,misc]
        @model_validator(mode="after")
        def positive(self) -> Checked:
            if self.a < 0:
                raise ValueError("a must be positive")
            return self

    call.model = Checked
    call._validator = None
    assert call.fields_validator() is None


async def test_the_registry_calls_the_function_with_the_validated_fields() -> None:
    registry = ToolRegistry([shaped])
    ctx = RunContext("c", 1, "r", tool_name="shaped")
    ok = await registry.dispatch({"id": "c", "name": "shaped",
                                  "args": {"a": 4, "p": {"x": 5}}}, ctx)
    assert (ok.content, ok.status) == ("4 zz None x=5", "success")
    assert registry._plans["shaped"][5] is True  # (the fields validator is in use)
    bad = await registry.dispatch({"id": "c", "name": "shaped", "args": {"a": 1, "b": "x"}},
                                  ctx)
    assert bad.status == "invalid" and bad.error
    assert [dict(i) for i in bad.issues] == [
        {"path": "b", "expected": "String should have at least 2 characters", "got": "str"}]
