"""Issue 21, round two: an append to a long list is committed without copying the list, the
agent reads its history without copies where it only looks, and the caches over a growing
history (wire messages, delivery keys) answer exactly what a whole rebuild would.

The tests pin behaviour that would break if the flat-cost paths went: the committed value is
the stage's own list (no copy), it refuses mutation afterwards, it keeps no earlier list alive,
a peeked read is the committed object itself and is recorded as a read, and the agent copies
its history once per iteration at most (ToolCalls appending to it), not at every stage.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, Limits, tool
from agentfootprint.context._delivery import KeysMemo, keys_in_window
from agentfootprint.flow import _scope, _values, flow_chart
from agentfootprint.flow._scope import peek
from agentfootprint.flow._values import (
    DraftList,
    FrozenList,
    committed_of,
    extends,
    freeze,
    settle,
    thaw,
)
from agentfootprint.providers import mock
from agentfootprint.providers._base import WireMemo, wire_messages


def messages(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"m{i}"} for i in range(start, start + n)]


def test_an_appended_read_list_is_committed_as_the_very_list_the_stage_wrote() -> None:
    base = freeze(messages(100))
    read = thaw(base)
    read.append({"role": "assistant", "content": "hi", "tool_calls": [{"id": "c1"}]})
    settled = settle(base, read)
    assert settled is not None
    frozen, grown = settled
    assert frozen is read and type(frozen) is FrozenList and grown == len(base)
    assert type(frozen[-1]["tool_calls"]) is FrozenList  # the tail is frozen all the way down
    assert extends(frozen, base) and len(base) == 100  # the earlier list is untouched
    assert not hasattr(frozen, "_base")  # it keeps no earlier committed list alive
    with pytest.raises(TypeError, match="read-only"):
        read.append({"role": "user", "content": "too late"})


def test_a_stage_list_committed_in_place_records_an_append_and_replays() -> None:
    kept: list[Any] = []

    def grow(scope: Any) -> None:
        history = scope["history"]
        history.append({"role": "user", "content": "next"})
        scope["history"] = history
        kept.append(history)

    def look(scope: Any) -> None:
        kept.append(peek(scope, "history"))

    run = (flow_chart("grow", grow, id="grow").then("again", grow, id="again")
           .then("look", look, id="look").build().run_sync(state={"history": messages(40)}))
    assert kept[2] is kept[1]  # what the next stage reads is the list "again" wrote: no copy
    first, second = (r.changes[0] for r in run.log.records[:2])
    assert first.op == second.op == "append" and len(second.value) == 1
    assert len(run.log.state_at(0)["history"]) == 41  # the first commit, as it was
    assert len(run.state["history"]) == 42
    assert type(kept[0]) is FrozenList and len(kept[0]) == 41  # the first stage's list: frozen


def test_peek_is_a_recorded_read_of_the_committed_value_itself() -> None:
    seen: dict[str, Any] = {}

    def look(scope: Any) -> None:
        seen["peeked"] = peek(scope, "history")
        seen["missing"] = peek(scope, "absent", "default")
        scope["mine"] = [1, 2]
        seen["own"] = peek(scope, "mine")

    def again(scope: Any) -> None:
        seen["again"] = peek(scope, "history")
        seen["copy"] = scope.get("history")

    run = (flow_chart("look", look, id="look").then("again", again, id="again").build()
           .run_sync(state={"history": messages(20)}))
    assert seen["again"] is seen["peeked"] and type(seen["peeked"]) is FrozenList
    copied: Any = seen["copy"]
    assert type(copied) is DraftList and copied is not seen["peeked"]
    assert seen["missing"] == "default" and seen["own"] == [1, 2]
    assert run.log.records[0].reads == ("history", "absent")  # as scope.get would record


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_the_agent_copies_its_history_once_per_tool_iteration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MessagesSlot and CallLLM only look at the history; only ToolCalls reads it to append."""
    copies: list[int] = []
    real_thaw = _values.thaw

    def count(value: object) -> None:
        if isinstance(value, list) and value and isinstance(value[0], dict) \
                and "role" in value[0]:
            copies.append(len(value))

    def counting_thaw(value: object) -> Any:
        count(value)
        return real_thaw(value)

    real_draft = _values.DraftList

    def counting_draft(value: Any) -> Any:  # the scope's reads build a DraftList inline
        count(value)
        return real_draft(value)

    monkeypatch.setattr(_scope, "thaw", counting_thaw)
    monkeypatch.setattr(_scope, "DraftList", counting_draft)
    n = 12
    script: list[Any] = [{"tool_calls": [{"name": "add", "args": {"a": k, "b": 1}}]}
                         for k in range(1, n)]
    agent = Agent(provider=mock(script=[*script, "done"]), model="mock", tools=[add],
                  limits=Limits(max_iterations=n + 1))
    result = agent.run_sync("Keep adding.")
    assert result.content == "done" and result.iterations == n
    assert len(copies) == n - 1  # one read-to-append per tool batch, none per other stage


def test_keys_memo_answers_as_a_whole_scan_would() -> None:
    memo = KeysMemo()
    injected = {"role": "user", "content": "note", "injected_by": "rule-a"}
    first = freeze([*messages(30), injected])
    assert memo(first) == keys_in_window(first)
    grown = thaw(first)
    grown += [*messages(5, 30), {"role": "user", "content": "other", "injected_by": "rule-b"}]
    second = settle(first, grown)
    assert second is not None and extends(second[0], first)
    assert memo(second[0]) == keys_in_window(second[0]) and len(memo(second[0])) == 2
    unrelated = freeze(messages(3))  # not a lineage member: scanned whole
    assert memo(unrelated) == set()
    assert memo(thaw(first)) == keys_in_window(first)  # an unchanged read is its committed list
    plain = [injected]
    assert memo(plain) == keys_in_window(plain)


def test_wire_memo_serves_two_histories_grown_from_one_list() -> None:
    memo = WireMemo()
    base = freeze([*messages(20), {"role": "user", "content": "x", "injected_by": "r"}])
    assert memo(base) == wire_messages(base)
    forks = []
    for label in ("a", "b"):
        read = thaw(base)
        read.append({"role": "assistant", "content": label})
        settled = settle(base, read)
        assert settled is not None
        forks.append(settled[0])
    for fork in (*forks, *forks):
        out = memo(fork)
        assert out == wire_messages(fork) and out[-1]["content"] in ("a", "b")
        assert type(out) is list and out is not memo(fork)
    assert committed_of(thaw(forks[0])) is forks[0]
    changed = thaw(forks[0])
    changed[0] = {"role": "user", "content": "edited"}
    assert committed_of(changed) is None and type(changed) is DraftList
