"""A run's final state is copied when it is first read, and every copy is plain and independent.

``FlowRun.state`` used to be a deep copy made at every run's end; now it is made on the first
read of ``state``, and ``FlowRun.final`` reads single values without copying. These tests pin
that the copy is still the same plain, independent value, that ``final`` never hands out
something a caller could change behind the log's back, and (Hypothesis) that ``copy_value``
returns exactly what a naive deep copy does.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfootprint import Agent, tool
from agentfootprint.flow import Scope, flow_chart
from agentfootprint.flow._values import FrozenDict, FrozenList, copy_value, freeze, thaw
from agentfootprint.providers import mock


def _chart() -> Any:
    def first(scope: Scope) -> None:
        scope["items"] = [{"n": 1, "tags": ["a"]}]
        scope["count"] = 1

    def second(scope: Scope) -> None:
        items = scope["items"]
        items.append({"n": 2, "tags": ["b", "c"]})
        scope["items"] = items

    return flow_chart("First", first, id="first").then("Second", second, id="second").build()


def _plain(value: Any) -> bool:
    """True when no container in ``value`` is a frozen or draft one."""
    kind = type(value)
    if kind is list:
        return all(_plain(x) for x in value)
    if kind is dict:
        return all(_plain(x) for x in value.values())
    return kind in (str, int, float, bool, type(None))


def test_state_is_a_plain_independent_copy_made_once() -> None:
    """``state`` is plain, the same object on every read, and changing it changes no record."""
    run = asyncio.run(_chart().run())
    state = run.state
    assert state == {"items": [{"n": 1, "tags": ["a"]}, {"n": 2, "tags": ["b", "c"]}],
                     "count": 1}
    assert _plain(state)
    assert run.state is state
    state["items"][0]["tags"].append("mutated")
    state["count"] = 99
    assert run.state["count"] == 99  # the caller's own copy
    assert run.log.state_at(len(run.log) - 1) == {
        "items": [{"n": 1, "tags": ["a"]}, {"n": 2, "tags": ["b", "c"]}], "count": 1}


def test_final_reads_without_copying_and_refuses_mutation() -> None:
    """``final`` hands back the committed value (read-only), before and after ``state``."""
    run = asyncio.run(_chart().run())
    items = run.final("items")
    assert type(items) is FrozenList
    with pytest.raises(TypeError, match="read-only"):
        items.append({"n": 3})
    with pytest.raises(TypeError, match="read-only"):
        items[0]["n"] = 5
    assert run.final("absent", "default") == "default"
    assert run.state["items"] == items  # copied from the same committed value
    run.state["count"] = 7
    run.state["items"].append({"n": 3})
    assert run.final("count") == 1  # the caller's copy is theirs: ``final`` is what committed
    assert run.final("items") is items
    assert run.state["count"] == 7 and len(run.state["items"]) == 3


def test_state_can_be_assigned() -> None:
    run = asyncio.run(_chart().run())
    run.state = {"replaced": True}
    assert run.state == {"replaced": True}
    assert run.final("replaced") is True


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_agent_result_history_is_plain_and_independent() -> None:
    """``RunResult.history`` is a plain deep copy: changing it changes neither the recording's
    state nor a later read of it."""
    agent = Agent(provider=mock(script=[{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]},
                                        "three"]), model="mock", tools=[add])
    result = asyncio.run(agent.run("add 1 and 2"))
    assert result.content == "three" and result.iterations == 2
    history = result.history
    assert _plain(history)
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[1]["tool_calls"][0]["args"] == {"a": 1, "b": 2}
    history[1]["tool_calls"][0]["args"]["a"] = 100
    history.append({"role": "user", "content": "extra"})
    state_history = result.recording.state["history"]
    assert len(state_history) == 3
    assert state_history[1]["tool_calls"][0]["args"] == {"a": 1, "b": 2}
    assert _plain(state_history)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=20)
    | st.dictionaries(st.text(max_size=4), inner, max_size=6),
    max_leaves=60,
)


def _shapes(value: Any) -> Any:
    """``value`` with every frozen or draft container as a plain one (for comparing types)."""
    if isinstance(value, list | tuple):
        return [_shapes(x) for x in value]
    if isinstance(value, dict):
        return {k: _shapes(v) for k, v in value.items()}
    return value


def _containers(value: Any) -> list[int]:
    found: list[int] = []
    if isinstance(value, list | tuple):
        found.append(id(value))
        for x in value:
            found.extend(_containers(x))
    elif isinstance(value, dict):
        found.append(id(value))
        for x in value.values():
            found.extend(_containers(x))
    return found


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from(["plain", "frozen", "thawed"]))
def test_copy_value_matches_a_naive_deep_copy(value: Any, form: str) -> None:
    """Plain, frozen or thawed: the copy equals a naive deep copy, is plain all the way down
    and shares no container with the original."""
    source = {"plain": lambda v: copy.deepcopy(v), "frozen": freeze,
              "thawed": lambda v: thaw(freeze(v))}[form](value)
    out = copy_value(source)
    assert out == value
    assert _plain(out)
    assert _shapes(out) == _shapes(value)
    assert not set(_containers(out)) & set(_containers(source))
    if isinstance(source, FrozenDict | FrozenList):
        assert copy_value(source) is not out
