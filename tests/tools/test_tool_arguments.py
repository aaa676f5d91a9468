"""A ``@tool``'s arguments: the schema is pydantic's own, the validator is built on the first
call, and a dispatched call is validated once with the same coercions and messages as before."""

from __future__ import annotations

import asyncio
import enum
import json
import subprocess
import sys
import textwrap
from datetime import date
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field, field_validator

from agentfootprint import RunContext, ToolContext, define_tool, tool
from agentfootprint.tools._arguments import FunctionCall
from agentfootprint.tools._registry import ToolRegistry
from agentfootprint.tools._tool import _clean_schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: float
    y: float = 0.0


class Node(BaseModel):
    name: str
    children: list[Node] = []


def _plain(a: int, b: str = "x", c: float = 1.5, d: bool = False) -> None:
    """Plain scalars with defaults.

    Args:
        a: The first one.
        b: The second one.
    """


def _optional(limit: Optional[int] = None, tags: list[str] | None = None) -> None:  # noqa: UP045
    """Optional values."""


def _choices(color: Color, mode: Literal["fast", "slow"] = "fast", day: date | None = None
             ) -> None:
    """Enums, literals and dates."""


def _nested(point: Point, points: list[Point], by_name: dict[str, Point]) -> None:
    """Nested models."""


def _recursive(root: Node) -> None:
    """A self-referencing model."""


def _constrained(count: Annotated[int, Field(ge=1, le=10)],
                 name: Annotated[str, Field(min_length=2, pattern="^[a-z]+$")]) -> None:
    """Constraints pydantic writes into the schema."""


SEEN: list[int] = []


class Counted(BaseModel):
    """A model that notes every value it validates."""

    n: int

    @field_validator("n")
    @classmethod
    def _seen(cls, value: int) -> int:
        SEEN.append(value)
        return value


class Few(BaseModel):
    count: int

    @field_validator("count")
    @classmethod
    def _below_five(cls, value: int) -> int:
        if value >= 5:
            raise ValueError("at most four")
        return value


def _with_context(ctx: RunContext[Any], city: str) -> None:
    """The context parameter is not shown."""


@pytest.mark.parametrize("func", [_plain, _optional, _choices, _nested, _recursive,
                                  _constrained, _with_context])
def test_the_schema_is_what_model_json_schema_writes(func: Any) -> None:
    """The schema is generated without building the validator, and equals the one pydantic's
    public model_json_schema() writes for the same (then fully built) model."""
    made = tool(func)
    call = made.execute
    assert isinstance(call, FunctionCall)
    assert call.model.__pydantic_complete__ is False  # declared, not built
    public = _clean_schema(call.model.model_json_schema())  # builds it
    assert json.dumps(made.input_schema) == json.dumps(public)


def test_the_schema_falls_back_to_the_public_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """If pydantic's generator cannot be driven directly, model_json_schema() answers."""
    from agentfootprint.tools import _arguments

    def broken(model: Any) -> None:
        raise TypeError("another pydantic")

    expected = tool(_nested).input_schema
    monkeypatch.setattr(_arguments, "_generated_schema", broken)
    assert tool(_nested).input_schema == expected


def test_a_run_that_calls_no_tool_builds_no_validator() -> None:
    """In a fresh process, declaring a tool and running an agent that answers directly never
    builds the arguments validator nor loads pydantic's plugin loader; the first call does."""
    code = textwrap.dedent('''
        import sys
        from agentfootprint import Agent, Limits, tool
        from agentfootprint.providers import mock

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        agent = Agent(provider=mock(script=["done"]), model="mock", tools=[add],
                      limits=Limits(max_iterations=2))
        assert agent.run_sync("hi").content == "done"
        before = (add.execute.model.__pydantic_complete__,
                  "pydantic.plugin._loader" in sys.modules)
        agent = Agent(provider=mock(script=[
            {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "done"]),
            model="mock", tools=[add], limits=Limits(max_iterations=3))
        result = agent.run_sync("add")
        assert [m["content"] for m in result.history if m["role"] == "tool"] == ["3"]
        print(before, add.execute.model.__pydantic_complete__)
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(False,", "False)", "True"]


async def test_a_dispatched_call_is_validated_once() -> None:
    """The registry validates a @tool call once (the check, then the call's own keyword
    arguments); the tool's validate and execute, called directly, validate once each."""
    seen = SEEN
    seen.clear()

    @tool
    async def double(item: Counted) -> int:
        """Double it."""
        return item.n * 2

    registry = ToolRegistry([double])
    outcome = await registry.dispatch(
        {"id": "c1", "name": "double", "args": {"item": {"n": 4}}}, ToolContext("c1"))
    assert (outcome.content, outcome.status, seen) == ("8", "success", [4])
    assert double.validate({"item": {"n": 5}}) == [] and seen == [4, 5]
    assert await double.execute({"item": {"n": 6}}, ToolContext()) == 12 and seen == [4, 5, 6]


async def test_pydantic_coercions_reach_the_function() -> None:
    """What the function receives is the validated value: an int for a float field becomes a
    float, a dict for a model field becomes the model, defaults are filled, the context
    parameter receives the call's context."""
    got: dict[str, Any] = {}

    @tool
    def place(ctx: ToolContext, where: Point, scale: float, label: str = "here") -> str:
        """Place a point."""
        got.update(ctx=ctx, where=where, scale=scale, label=label)
        return "ok"

    ctx = ToolContext("c1", tool_name="place")
    outcome = await ToolRegistry([place]).dispatch(
        {"id": "c1", "name": "place", "args": {"where": {"x": 1}, "scale": 2}}, ctx)
    assert outcome.content == "ok"
    assert got["ctx"] is ctx and got["where"] == Point(x=1.0, y=0.0)
    assert type(got["scale"]) is float and got["label"] == "here"


async def test_a_value_pydantic_refuses_is_an_invalid_result_and_the_tool_does_not_run() -> None:
    """A value the schema check lets through but pydantic refuses (a constraint) is an
    'invalid' result naming the field, with pydantic's words; the function never runs."""
    ran: list[int] = []

    @tool
    def pick(few: Few) -> int:
        """Pick some."""
        ran.append(few.count)
        return few.count

    outcome = await ToolRegistry([pick]).dispatch(
        {"id": "c", "name": "pick", "args": {"few": {"count": 7}}}, ToolContext("c"))
    assert outcome.status == "invalid" and outcome.error and not ran
    assert outcome.issues == ({"path": "few.count", "expected": "Value error, at most four",
                               "got": "int"},)
    assert outcome.content == ("Invalid arguments for tool 'pick' — the call was not executed."
                               "\n- 'few.count': expected Value error, at most four, got int"
                               "\nFix the arguments and call the tool again.")


async def test_a_blocking_tool_gets_its_keyword_arguments_in_a_worker_thread() -> None:
    """A sync @tool is validated on the loop and runs in a worker thread with its arguments."""
    import threading

    @tool
    def where(city: str) -> str:
        """Which thread runs it."""
        return f"{city} on {threading.current_thread() is threading.main_thread()}"

    outcome = await ToolRegistry([where]).dispatch(
        {"id": "c", "name": "where", "args": {"city": "Oslo"}}, ToolContext("c"))
    assert outcome.content == "Oslo on False"


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every value the general argument check (``check_arguments``) walks, in order."""
    from agentfootprint.tools import _validate

    seen: list[object] = []
    general = _validate.check_arguments

    def counting(schema: Any, value: object) -> Any:
        seen.append(value)
        return general(schema, value)

    monkeypatch.setattr(_validate, "check_arguments", counting)
    return seen


async def test_a_define_tool_schema_is_checked_once_per_call(walked: list[object]) -> None:
    """A define_tool's validate is the schema check itself: the registry runs it once."""
    checked = walked
    made = define_tool("t", "A tool.", {"type": "object", "properties": {  # not flat: general
        "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}, lambda args: args["n"])
    registry = ToolRegistry([made])
    outcome = await registry.dispatch({"id": "c", "name": "t", "args": {"n": 3}},
                                      ToolContext("c"))
    refused = await registry.dispatch({"id": "d", "name": "t", "args": {"n": "3"}},
                                      ToolContext("d"))
    assert outcome.content == "3" and checked == [{"n": 3}, {"n": "3"}]
    assert refused.status == "invalid" and "expected integer or null, got string" in \
        refused.content


async def test_a_replaced_validate_is_still_run() -> None:
    """A @tool whose validate was replaced (dataclasses.replace) runs that validate and its
    execute, not the fast path of the original pair."""
    import dataclasses

    @tool
    async def echo(text: str) -> str:
        """Echo it."""
        return text

    strict = dataclasses.replace(echo, validate=lambda args: [
        {"path": "text", "expected": "shouting", "got": "str"}] if args["text"].islower()
        else [])
    registry = ToolRegistry([strict])
    refused = await registry.dispatch({"id": "c", "name": "echo", "args": {"text": "hi"}},
                                      ToolContext("c"))
    fine = await registry.dispatch({"id": "d", "name": "echo", "args": {"text": "HI"}},
                                   ToolContext("d"))
    assert refused.status == "invalid" and "expected shouting" in refused.content
    assert fine.content == "HI"


async def test_a_sync_function_returning_an_awaitable_is_awaited() -> None:
    """A non-blocking sync function that returns an awaitable (a future) is awaited, as an
    async tool's coroutine is; a plain result is used as it is."""
    @tool(blocking=False)
    def later(n: int) -> Any:
        """A future of n."""
        future = asyncio.get_running_loop().create_future()
        future.set_result(n + 1)
        return future

    @tool(blocking=False)
    def now(n: int) -> list[int]:
        """A list."""
        return [n]

    registry = ToolRegistry([later, now])
    got = [await registry.dispatch({"id": "c", "name": name, "args": {"n": 1}},
                                   ToolContext("c")) for name in ("later", "now")]
    assert [o.content for o in got] == ["2", "[1]"]


def test_the_flat_check_answers_fitting_arguments_itself(walked: list[object]) -> None:
    """A flat schema's check accepts exact fitting scalars (an unnamed one too, unless the
    schema is closed; any scalar for an untyped property) without the general walk; a NaN, a
    float for an integer or an unnamed key of a closed schema take the walk, which answers."""
    from agentfootprint.tools import _validate

    schema = {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}, "any": {}}}
    check = _validate.argument_checker(schema)
    closed = _validate.argument_checker({**schema, "additionalProperties": False})
    assert check({"n": 1, "x": 0.5, "any": "s", "extra": True}) == [] and walked == []
    assert check({"n": 2.0}) == [] and walked == [{"n": 2.0}]
    assert check({"n": 1, "x": float("nan")})[0]["expected"] == "a finite number"
    assert closed({"n": 1, "extra": 1}) == [
        {"path": "extra", "expected": "no such field", "got": "integer"}]
    assert len(walked) == 3
