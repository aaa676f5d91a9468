"""``RunResult.history`` is copied from the recording on first read, and is then the caller's
own plain list: a run whose history nobody reads does not copy its conversation."""

from __future__ import annotations

import asyncio
import copy

import pytest

from agentfootprint import Agent, RunResult, tool
from agentfootprint.providers import mock
from agentfootprint.runs import trace


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _run() -> RunResult:
    calls = [{"tool_calls": [{"name": "add", "args": {"a": i, "b": 1}}]} for i in range(3)]
    agent = Agent(provider=mock(script=[*calls, "four"]), model="mock", tools=[add])
    return asyncio.run(agent.run("count up"))


def test_history_is_the_conversation_as_plain_independent_lists() -> None:
    result = _run()
    unread = RunResult.__dict__["history"]  # the slot: not filled until someone reads it
    with pytest.raises(AttributeError):
        unread.__get__(result, RunResult)
    history = result.history
    assert [m["role"] for m in history] == ["user"] + ["assistant", "tool"] * 3
    assert [m["content"] for m in history if m["role"] == "tool"] == ["1", "2", "3"]
    assert type(history) is list and all(type(m) is dict for m in history)
    assert result.history is history  # copied once
    history.append({"role": "user", "content": "mine"})
    history[0]["content"] = "changed"
    committed = result.recording.final(trace.HISTORY)
    assert committed[0]["content"] == "count up" and len(committed) == 7


def test_the_recording_state_changed_by_the_caller_does_not_change_the_history() -> None:
    result = _run()
    result.recording.state[trace.HISTORY].clear()
    assert len(result.history) == 7


def test_copies_and_explicit_histories() -> None:
    result = _run()
    twin = copy.copy(result)
    assert twin.history == result.history  # (a shallow copy: the same list, as before)
    given = RunResult(content="x", run_id="r", turn=1, recording=result.recording,
                      history=[{"role": "user", "content": "hi"}])
    assert given.history == [{"role": "user", "content": "hi"}]
    assert RunResult(content="x", run_id="r", turn=1, recording=result.recording).history == []
    with pytest.raises(AttributeError, match="histroy"):
        result.histroy  # type: ignore[attr-defined]
