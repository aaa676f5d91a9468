"""Tools: @tool and define_tool schemas, argument validation, and the per-call dispatch."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal, Optional

import pytest

from agentfootprint import Agent, ConfigurationError, Limits, Tool, ToolContext, define_tool, tool
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.providers import MockProvider, mock
from agentfootprint.tools._registry import NO_VALUE, ToolRegistry, cap_result, result_text

# -- helpers ---------------------------------------------------------------------------------


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: sunny"


def calls(*items: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args} for name, args in items]}


async def run_agent(tools: list[Tool], *replies: Any, **options: Any
                    ) -> tuple[Any, MockProvider, list[AgentEvent]]:
    provider = mock(script=[*replies, "done"])
    agent = Agent(provider=provider, model="m", tools=tools, **options)
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    return await agent.run("go"), provider, events


def tool_messages(result: Any) -> list[dict[str, Any]]:
    return [m for m in result.history if m["role"] == "tool"]


# -- dispatch inside the agent ---------------------------------------------------------------


async def test_a_sync_tool_runs_off_the_event_loop() -> None:
    """Two agents run concurrently; one's sync tool waits for the other's to set an event.
    Were sync tools run on the loop, the first would hold it and the second never start (the
    wait would time out); in worker threads both finish. blocking=False keeps one inline."""
    import threading

    ready = threading.Event()

    @tool
    def wait_for_peer(x: int) -> str:
        """Wait until the other agent's tool has run."""
        return "peer seen" if ready.wait(timeout=5) else "timed out"

    @tool
    def signal_peer(x: int) -> str:
        """Let the waiting agent go on."""
        ready.set()
        return "signalled"

    waiting = run_agent([wait_for_peer], calls(("wait_for_peer", {"x": 1})))
    signalling = run_agent([signal_peer], calls(("signal_peer", {"x": 1})))
    (first, _, _), _ = await asyncio.gather(waiting, signalling)
    assert tool_messages(first)[0]["content"] == "peer seen"
    assert wait_for_peer.blocking

    @tool(blocking=False)
    def quick(x: int) -> int:
        """Return x."""
        return x

    @tool
    async def awaited(x: int) -> int:
        """Return x."""
        return x

    assert not quick.blocking and not awaited.blocking


async def test_calls_in_one_response_run_sequentially_in_order() -> None:
    """Several calls in one response run one after another, in order, one tool message each."""
    trace: list[str] = []

    @tool
    async def slow(label: str, delay: float) -> str:
        """Wait, then echo the label."""
        trace.append(f"start {label}")
        await asyncio.sleep(delay)
        trace.append(f"end {label}")
        return label.upper()

    result, provider, _ = await run_agent(
        [slow], calls(("slow", {"label": "a", "delay": 0.02}), ("slow", {"label": "b", "delay": 0}),
                      ("slow", {"label": "c", "delay": 0.01})))
    assert trace == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assistant = result.history[1]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == 3
    assert result.history[2:] == [
        {"role": "tool", "content": "A", "tool_call_id": ids[0], "tool_name": "slow"},
        {"role": "tool", "content": "B", "tool_call_id": ids[1], "tool_name": "slow"},
        {"role": "tool", "content": "C", "tool_call_id": ids[2], "tool_name": "slow"},
    ]
    assert provider.requests[1].messages == result.history


async def test_unknown_tool_becomes_a_result_and_the_run_continues() -> None:
    """A call to an unknown tool gets a readable error result and the run goes on."""
    result, _, events = await run_agent([weather], calls(("teleport", {"to": "Mars"})))
    [message] = tool_messages(result)
    assert message["content"] == "Unknown tool 'teleport'. Available tools: weather."
    assert result.content == "done"
    [end] = [e for e in events if e.type.endswith("stream.tool_end")]
    assert (end.payload["error"], end.payload["status"]) == (True, "unknown")


async def test_missing_argument_names_the_field() -> None:
    """Invalid arguments become a result naming the field; the tool does not run."""
    ran: list[str] = []

    @tool
    def forecast(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        ran.append(city)
        return "rain"

    result, _, events = await run_agent([forecast], calls(("forecast", {"days": 2})))
    [message] = tool_messages(result)
    assert message["content"].startswith(
        "Invalid arguments for tool 'forecast' — the call was not executed.")
    assert "'city' is required but missing" in message["content"]
    assert ran == []
    assert result.content == "done"
    [invalid] = [e for e in events if e.type.endswith("validation.args_invalid")]
    assert invalid.payload["issues"] == [{"path": "city", "expected": "a value", "got": "missing"}]
    [end] = [e for e in events if e.type.endswith("stream.tool_end")]
    assert (end.payload["error"], end.payload["status"]) == (True, "invalid")


async def test_wrong_argument_type_names_the_field() -> None:
    """A wrong argument type yields a result naming the field and the type received."""

    @tool
    def forecast(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        return "rain"

    result, _, _ = await run_agent([forecast], calls(("forecast", {"city": 12, "days": "many"})))
    [message] = tool_messages(result)
    lines = message["content"].splitlines()
    assert "- 'city': expected string, got integer" in lines
    assert "- 'days': expected integer, got string" in lines
    assert lines[-1] == "Fix the arguments and call the tool again."


async def test_raising_tool_becomes_a_result() -> None:
    """A tool that raises gives a result with the exception text and the run continues."""

    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"cannot do {reason}")

    result, _, events = await run_agent([explode], calls(("explode", {"reason": "that"})))
    [message] = tool_messages(result)
    assert "cannot do that" in message["content"]
    assert "ValueError" in message["content"]
    assert result.content == "done"
    [end] = [e for e in events if e.type.endswith("stream.tool_end")]
    assert (end.payload["error"], end.payload["status"]) == (True, "error")


async def test_over_size_result_is_replaced_by_a_marker() -> None:
    """max_tool_result_chars swaps an over-size result for a {truncated, reason, head} marker."""

    @tool
    def dump(n: int) -> str:
        """A long text."""
        return "".join(str(i % 10) for i in range(n))

    result, _, events = await run_agent(
        [dump], calls(("dump", {"n": 5000}), ("dump", {"n": 50})),
        limits=Limits(max_tool_result_chars=200))
    big, small = tool_messages(result)
    assert len(big["content"]) <= 200
    marker = json.loads(big["content"])
    assert marker["truncated"] is True
    assert "dump returned 5000 chars, over the 200-char cap" in marker["reason"]
    assert marker["head"] and "0123456789".startswith(marker["head"][:10])
    assert "".join(str(i % 10) for i in range(5000)).startswith(marker["head"])
    assert small["content"] == "".join(str(i % 10) for i in range(50))
    ends = [e for e in events if e.type.endswith("stream.tool_end")]
    assert ends[0].payload["result"] == big["content"]


@pytest.mark.parametrize("cap", [64, 100, 150])
def test_marker_never_exceeds_the_cap(cap: int) -> None:
    """The truncation marker is never longer than the cap, for every cap the agent accepts."""
    marker = cap_result("search_documents", "x" * 10_000, cap)
    assert len(marker) <= cap, marker
    assert json.loads(marker)["truncated"] is True


def test_cap_below_minimum_is_refused() -> None:
    """A max_tool_result_chars too small to hold a marker raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="max_tool_result_chars"):
        Agent(provider=mock(reply="x"), model="m", tools=[weather],
              limits=Limits(max_tool_result_chars=10))


async def test_sync_and_async_tools_both_run() -> None:
    """Sync and async tool functions are both executed and their results returned."""

    @tool
    def plain(x: int) -> int:
        """Double x."""
        return x * 2

    @tool
    async def awaited(x: int) -> dict[str, int]:
        """Triple x."""
        await asyncio.sleep(0)
        return {"value": x * 3}

    result, _, _ = await run_agent([plain, awaited],
                                   calls(("plain", {"x": 2}), ("awaited", {"x": 2})))
    assert [m["content"] for m in tool_messages(result)] == ["4", '{"value": 6}']


async def test_tool_context_parameter_receives_the_call() -> None:
    """A ToolContext parameter gets tool_call_id, iteration and run_id; it is not in the schema."""
    seen: list[ToolContext] = []

    @tool
    def where(city: str, ctx: ToolContext) -> str:
        """Record where the call came from."""
        seen.append(ctx)
        return city

    assert "ctx" not in where.input_schema["properties"]
    assert where.input_schema["required"] == ["city"]
    result, _, _ = await run_agent([where], calls(("where", {"city": "a"})),
                                   calls(("where", {"city": "b"})))
    ids = [c["id"] for m in result.history if m.get("tool_calls") for c in m["tool_calls"]]
    assert [(c.tool_call_id, c.iteration, c.run_id) for c in seen] == [
        (ids[0], 1, result.run_id), (ids[1], 2, result.run_id)]


async def test_define_tool_passes_ctx_when_execute_takes_two_params() -> None:
    """define_tool calls execute(args, ctx) when it takes two parameters, else execute(args)."""
    got: list[Any] = []
    two = define_tool("two", "Takes ctx.", None, lambda args, ctx: got.append(ctx) or "ok")
    one = define_tool("one", "Args only.", None, lambda args: got.append(args) or "ok")
    result, _, _ = await run_agent([two, one], calls(("two", {}), ("one", {"k": 1})))
    assert isinstance(got[0], ToolContext)
    assert got[0].run_id == result.run_id
    assert got[1] == {"k": 1}


async def test_tool_returning_none_reads_as_no_value() -> None:
    """A tool returning None gives the model a sentence instead of an empty string."""

    @tool
    def nothing() -> None:
        """Does nothing."""

    result, _, _ = await run_agent([nothing], calls(("nothing", {})))
    assert tool_messages(result)[0]["content"] == NO_VALUE


def test_result_text_shapes() -> None:
    """Strings pass as they are; other values become JSON; None becomes a sentence."""
    assert result_text("plain") == "plain"
    assert result_text({"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert result_text(None) == NO_VALUE


# -- @tool schemas ---------------------------------------------------------------------------


def test_tool_schema_from_signature_and_docstring() -> None:
    """@tool builds the schema: first paragraph, Args descriptions, required vs defaults, types."""

    @tool
    def search(query: str, tags: list[int], unit: Literal["c", "f"] = "c",
               limit: Optional[int] = None,  # noqa: UP045 (typing.Optional must work)
               owner: str | None = None) -> str:
        """Search the catalogue
        for matching items.

        Longer explanation the model need not read.

        Args:
            query: What to look for.
            tags (list[int]): Tag ids to filter by.
            unit: Temperature unit.

        Returns:
            The matches.
        """
        return query

    assert search.name == "search"
    assert search.description == "Search the catalogue for matching items."
    schema = search.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["query", "tags"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["tags"] == {"type": "array", "items": {"type": "integer"},
                             "description": "Tag ids to filter by."}
    assert props["unit"] == {"enum": ["c", "f"], "type": "string", "default": "c",
                             "description": "Temperature unit."}
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["owner"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert "title" not in json.dumps(schema)
    assert search.schema() == {"name": "search", "description": search.description,
                               "input_schema": schema}


def test_tool_validates_with_pydantic() -> None:
    """A @tool's validate() reports missing, mistyped, out-of-enum and extra arguments."""

    @tool
    def convert(value: float, unit: Literal["c", "f"]) -> float:
        """Convert a temperature."""
        return value

    assert convert.validate({"value": 1.5, "unit": "c"}) == []
    issues = convert.validate({"unit": "k", "bogus": 1})
    assert [i["path"] for i in issues] == ["value", "unit", "bogus"]
    assert issues[0]["got"] == "missing"
    assert issues[2]["expected"] == "no such field"


def test_tool_name_and_description_overrides() -> None:
    """@tool(name=..., description=...) override the function's name and docstring."""

    @tool(name="get-weather", description="Weather now.")
    def anything(city: str) -> str:
        return city

    assert (anything.name, anything.description) == ("get-weather", "Weather now.")


async def test_decorated_async_function_stays_awaitable_inside_tool() -> None:
    """@tool on an async function executes it and awaits the result."""

    @tool
    async def ping(host: str) -> str:
        """Ping a host."""
        return f"pong {host}"

    value = ping.execute({"host": "h"}, ToolContext("c1", 1, "r1"))
    assert await value == "pong h"


def test_tool_refuses_bad_names() -> None:
    """@tool refuses names providers reject."""
    with pytest.raises(ConfigurationError, match="rename"):

        @tool(name="bad name!")
        def fine(x: int) -> int:
            """Fine."""
            return x


def test_tool_refuses_a_parameter_without_a_type_hint() -> None:
    """An unannotated parameter would reach the model as an empty schema; Any is the way to
    say 'anything' on purpose."""
    def weather(city):  # type: ignore[no-untyped-def]
        """Current weather."""

    with pytest.raises(ConfigurationError, match="parameter 'city' has no type hint"):
        tool(weather)

    def anything(value: Any) -> str:
        """Echo anything."""
        return str(value)

    assert tool(anything).input_schema["properties"]["value"] == {}


def test_tool_refuses_missing_description() -> None:
    """@tool refuses a function without a docstring or description."""
    with pytest.raises(ConfigurationError, match="description"):

        @tool
        def undocumented(x: int) -> int:
            return x


@pytest.mark.parametrize("kind", ["args", "kwargs"])
def test_tool_refuses_star_parameters(kind: str) -> None:
    """@tool refuses *args and **kwargs, which cannot be described to a model."""
    with pytest.raises(ConfigurationError, match=r"\*args"):
        if kind == "args":

            @tool
            def star(*values: int) -> int:
                """Sum."""
                return sum(values)
        else:

            @tool
            def double_star(**values: int) -> int:
                """Sum."""
                return sum(values.values())


# -- define_tool -----------------------------------------------------------------------------

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "count": {"type": "integer"},
        "speed": {"type": "string", "enum": ["slow", "fast"]},
        "filters": {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                           "min": {"type": ["number", "null"]}},
            "required": ["tags"],
        },
    },
    "required": ["order_id"],
    "additionalProperties": False,
}


def order_tool() -> Tool:
    return define_tool("order", "Look up an order.", ORDER_SCHEMA, lambda args: "ok")


def test_define_tool_accepts_valid_arguments() -> None:
    """Arguments that satisfy the schema give no issues."""
    assert order_tool().validate({"order_id": "A1", "count": 3, "speed": "fast",
                                  "filters": {"tags": ["x"], "min": None}}) == []
    assert order_tool().validate({"order_id": "A1", "count": 3.0}) == []  # integral number


@pytest.mark.parametrize(("args", "issue"), [
    ({}, {"path": "order_id", "expected": "a value", "got": "missing"}),
    (None, {"path": "order_id", "expected": "a value", "got": "missing"}),
    ({"order_id": 7}, {"path": "order_id", "expected": "string", "got": "integer"}),
    ({"order_id": "A", "count": "3"}, {"path": "count", "expected": "integer", "got": "string"}),
    ({"order_id": "A", "count": True}, {"path": "count", "expected": "integer", "got": "boolean"}),
    ({"order_id": "A", "count": 2.5}, {"path": "count", "expected": "integer", "got": "number"}),
    ({"order_id": "A", "speed": "warp"},
     {"path": "speed", "expected": "one of 'slow', 'fast'", "got": "string"}),
    ({"order_id": "A", "filters": {}},
     {"path": "filters.tags", "expected": "a value", "got": "missing"}),
    ({"order_id": "A", "filters": {"tags": ["a", 2]}},
     {"path": "filters.tags[1]", "expected": "string", "got": "integer"}),
    ({"order_id": "A", "filters": {"tags": [], "min": "low"}},
     {"path": "filters.min", "expected": "number or null", "got": "string"}),
    ({"order_id": "A", "colour": "red"},
     {"path": "colour", "expected": "no such field", "got": "string"}),
    ("not an object", {"path": "", "expected": "object", "got": "string"}),
])
def test_define_tool_validation_issues(args: Any, issue: dict[str, str]) -> None:
    """define_tool validates required, types, enum, nested properties/items, extra keys."""
    assert order_tool().validate(args) == [issue]


def test_define_tool_issue_messages_never_copy_values() -> None:
    """The model-visible message names paths and types, never the argument's value."""
    from agentfootprint.tools._validate import describe_issues

    issues = order_tool().validate({"order_id": "SECRET-SSN-123-45", "count": "SECRET-COUNT"})
    text = describe_issues("order", issues)
    assert "SECRET" not in text
    assert "- 'count': expected integer, got string" in text


def test_define_tool_caps_issues_at_ten() -> None:
    """At most ten issues are reported."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(20)}}
    tool_ = define_tool("many", "Many fields.", schema, lambda args: "ok")
    assert len(tool_.validate({f"k{i}": i for i in range(20)})) == 10


async def test_define_tool_invalid_call_inside_agent() -> None:
    """A define_tool call with bad arguments becomes a tool result; execute never runs."""
    ran: list[Any] = []
    order = define_tool("order", "Look up an order.", ORDER_SCHEMA, lambda args: ran.append(args))
    result, _, _ = await run_agent([order], calls(("order", {"count": "x"})))
    content = tool_messages(result)[0]["content"]
    assert "'order_id' is required but missing" in content
    assert "'count': expected integer, got string" in content
    assert ran == []


def test_define_tool_refusals() -> None:
    """define_tool refuses bad names, an empty description and a non-callable execute."""
    with pytest.raises(ConfigurationError):
        define_tool("no spaces allowed", "Desc.", None, lambda args: 1)
    with pytest.raises(ConfigurationError, match="description"):
        define_tool("ok", "", None, lambda args: 1)
    with pytest.raises(ConfigurationError, match="callable"):
        define_tool("ok", "Desc.", None, "not callable")  # type: ignore[arg-type]


def test_define_tool_without_schema_takes_an_empty_object() -> None:
    """define_tool with input_schema=None offers an empty object schema."""
    assert define_tool("t", "Desc.", None, lambda a: 1).input_schema == {
        "type": "object", "properties": {}}


# -- the registry ----------------------------------------------------------------------------


def test_duplicate_tool_names_are_refused() -> None:
    """Two tools with one name raise ConfigurationError naming it."""
    twin = define_tool("weather", "Another weather.", None, lambda a: 1)
    with pytest.raises(ConfigurationError, match="'weather'"):
        Agent(provider=mock(reply="x"), model="m", tools=[weather, twin])


def test_non_tool_is_refused() -> None:
    """A plain function in tools= raises ConfigurationError pointing at @tool."""
    with pytest.raises(ConfigurationError, match="@tool"):
        ToolRegistry([lambda city: city])  # type: ignore[list-item]


def test_registry_keeps_declaration_order() -> None:
    """The schemas the model sees come in the order the tools were given."""
    names = [s["name"] for s in ToolRegistry([order_tool(), weather]).schemas()]
    assert names == ["order", "weather"]


async def test_registry_dispatch_outcomes() -> None:
    """dispatch gives success, unknown and invalid outcomes with the right status."""
    registry = ToolRegistry([weather])
    ctx = ToolContext("c", 1, "r")
    ok = await registry.dispatch({"id": "c", "name": "weather", "args": {"city": "Rome"}}, ctx)
    assert (ok.content, ok.error, ok.status) == ("Rome: sunny", False, "success")
    unknown = await registry.dispatch({"id": "c", "name": "nope", "args": {}}, ctx)
    assert (unknown.error, unknown.status) == (True, "unknown")
    invalid = await registry.dispatch({"id": "c", "name": "weather", "args": {}}, ctx)
    assert (invalid.error, invalid.status) == (True, "invalid")
    assert invalid.issues == ({"path": "city", "expected": "a value", "got": "missing"},)


@pytest.mark.parametrize("schema", [{"type": "string"}, {"properties": {}},
                                    {"type": "object", "properties": ["city"]}])
def test_define_tool_refuses_a_schema_that_is_not_an_object(schema: dict[str, Any]) -> None:
    """Tool arguments are named: a model is shown an object schema, nothing else."""
    with pytest.raises(ConfigurationError, match="must describe an object of named arguments"):
        define_tool("x", "Does x.", schema, lambda args: None)
