"""A ``@tool`` without a context parameter is called without a ``RunContext`` (the hot path),
while a tool that takes one still gets its ids and deps, and either kind behaves the same in a
run: its result, the warning a raising tool logs (naming the run) and the recorded history."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentfootprint import Agent, RunContext, define_tool, tool
from agentfootprint.providers import mock
from agentfootprint.tools._registry import ToolRegistry


@tool(blocking=False)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(blocking=False)
def whoami(ctx: RunContext, tag: str) -> str:
    """Say which call this is."""
    return f"{tag} {ctx.tool_call_id} {ctx.iteration} {ctx.run_id} {ctx.tool_name}"


@tool(blocking=False)
def broken(a: int) -> int:
    """Always fails."""
    raise RuntimeError(f"no {a}")


def _script(*calls: tuple[str, dict[str, Any]]) -> Any:
    return mock(script=[*({"tool_calls": [{"name": n, "args": a}]} for n, a in calls),
                        {"content": "done"}])


async def test_only_a_function_tool_without_a_context_parameter_is_context_free() -> None:
    raw = define_tool("raw", "A raw tool.", None, lambda args: "ok", blocking=False)
    registry = ToolRegistry([add, whoami, raw])
    for name, args in (("add", {"a": 1, "b": 2}), ("whoami", {"tag": "t"}), ("raw", {})):
        await registry.dispatch({"id": "c", "name": name, "args": args},
                                RunContext("c", 1, "r", tool_name=name))
    assert registry.context_free == {"add": add}
    outcome = await registry.dispatch({"id": "c2", "name": "add", "args": {"a": 2, "b": 3}},
                                      None, "r")
    assert (outcome.content, outcome.error, outcome.status, outcome.issues) == (
        "5", False, "success", ())


async def test_a_context_tool_still_gets_its_context_next_to_a_context_free_one() -> None:
    agent = Agent(provider=_script(("add", {"a": 1, "b": 2}), ("whoami", {"tag": "t"}),
                                   ("add", {"a": 2, "b": 2})),
                  model="m", tools=[add, whoami])
    result = await agent.run("go", run_id="run-1")
    tool_messages = [m for m in result.history if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        "3", f"t {tool_messages[1]['tool_call_id']} 2 run-1 whoami", "4"]
    assert [m["tool_name"] for m in tool_messages] == ["add", "whoami", "add"]


async def test_a_raising_context_free_tool_logs_the_run_it_ran_in(
        caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(provider=_script(("broken", {"a": 1}), ("broken", {"a": 2})), model="m",
                  tools=[broken])
    with caplog.at_level(logging.WARNING, logger="agentfootprint.tools"):
        result = await agent.run("go", run_id="run-7")
    tool_messages = [m for m in result.history if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["Error: RuntimeError: no 1",
                                                     "Error: RuntimeError: no 2"]
    warned = [r.getMessage() for r in caplog.records if r.name == "agentfootprint.tools"]
    assert len(warned) == 2  # the second call is a context-free one: the run is still named
    assert all("'broken' raised RuntimeError" in w and "of run run-7" in w for w in warned)
