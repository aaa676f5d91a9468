"""Window strategies: what part of the history the model is sent, what left, and the record."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfootprint import Agent, ConfigurationError, tool
from agentfootprint.agent import sliding_window, summarize_window, token_budget
from agentfootprint.events._catalogue import payload_model
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.providers import mock
from agentfootprint.providers._base import Message, wire_messages
from agentfootprint.runs._window import windowed_messages

# -- helpers ---------------------------------------------------------------------------------


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def conversation(turns: int) -> list[Message]:
    """``turns`` finished turns; each asks a tool once and answers."""
    history: list[Message] = []
    for n in range(1, turns + 1):
        history.append({"role": "user", "content": f"question {n}"})
        history.append({"role": "assistant", "content": "",
                        "tool_calls": [{"id": f"c{n}", "name": "lookup", "args": {"key": "k"}}]})
        history.append({"role": "tool", "content": f"result {n}", "tool_call_id": f"c{n}",
                        "tool_name": "lookup"})
        history.append({"role": "assistant", "content": f"answer {n}"})
    return history


def checkpoint(history: list[Message]) -> dict[str, Any]:
    return {"version": 1, "run_id": "earlier", "turn": 1, "history": history}


def paired(messages: list[Message]) -> bool:
    """Every tool result sent has its call sent, and every call sent has all its results."""
    calls = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return calls == results


async def plan_of(strategy: Any, history: list[Message]) -> list[Message]:
    plan = await strategy.plan(history, turn=10, previous=None)
    record = plan.to_state(strategy.name, 1)
    return windowed_messages(history, record)


# -- the strategies on their own ------------------------------------------------------------


async def test_sliding_window_keeps_the_last_turns_and_everything_after() -> None:
    history = [*conversation(4), {"role": "user", "content": "now"}]
    sent = await plan_of(sliding_window(turns=2), history)
    assert sent == history[12:]
    assert sent[0]["content"] == "question 4"


async def test_sliding_window_sends_everything_when_history_is_short() -> None:
    history = [*conversation(1), {"role": "user", "content": "now"}]
    plan = await sliding_window(turns=3).plan(history, turn=2, previous=None)
    assert plan.kept == list(range(len(history)))
    assert plan.evicted == []


async def test_injected_messages_follow_their_turn() -> None:
    history: list[Message] = [
        {"role": "user", "content": "old"},
        {"role": "user", "content": "note for old", "injected_by": "fact"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "now"},
        {"role": "user", "content": "note for now", "injected_by": "fact"},
    ]
    sent = await plan_of(sliding_window(turns=1), history)
    assert [m["content"] for m in sent] == ["now", "note for now"]


async def test_eviction_record_names_index_role_turn_reason_and_size() -> None:
    history = [*conversation(2), {"role": "user", "content": "now"}]
    plan = await sliding_window(turns=1).plan(history, turn=3, previous=None)
    assert plan.evicted[0] == {"index": 0, "role": "user", "turn": 1,
                               "reason": "outside-window", "chars": len("question 1")}
    assert [e["turn"] for e in plan.evicted] == [1, 1, 1, 1, 2, 2, 2, 2]


async def test_token_budget_keeps_the_newest_messages_that_fit() -> None:
    history: list[Message] = [{"role": "user", "content": "x" * 40},
                              {"role": "assistant", "content": "y" * 40},
                              {"role": "user", "content": "z" * 8},
                              {"role": "assistant", "content": "w" * 8},
                              {"role": "user", "content": "now!"}]
    sent = await plan_of(token_budget(max_tokens=6), history)
    assert [m["content"] for m in sent] == ["z" * 8, "w" * 8, "now!"]


async def test_token_budget_always_keeps_the_current_request() -> None:
    history: list[Message] = [{"role": "user", "content": "a"},
                              {"role": "assistant", "content": "b"},
                              {"role": "user", "content": "q" * 400}]
    sent = await plan_of(token_budget(max_tokens=1), history)
    assert sent == [history[-1]]


async def test_token_budget_drops_a_tool_exchange_whole() -> None:
    history = [*conversation(1), {"role": "user", "content": "now"}]
    history[2]["content"] = "r" * 400
    sent = await plan_of(token_budget(max_tokens=20, count=lambda m: len(m["content"])), history)
    assert paired(sent)
    assert sent == [history[-1]]


async def test_token_budget_takes_a_custom_counter() -> None:
    history: list[Message] = [{"role": "user", "content": "a"},
                              {"role": "assistant", "content": "b"},
                              {"role": "user", "content": "c"}]
    sent = await plan_of(token_budget(max_tokens=2, count=lambda m: 1), history)
    assert [m["content"] for m in sent] == ["c"]  # "b" fits but would open on an assistant


async def test_summarize_window_replaces_the_older_part_with_one_summary() -> None:
    summarizer = mock(reply="they asked about k twice")
    history = [*conversation(3), {"role": "user", "content": "now"}]
    strategy = summarize_window(provider=summarizer, model="small", keep_turns=1)
    plan = await strategy.plan(history, turn=4, previous=None)
    sent = windowed_messages(history, plan.to_state(strategy.name, 1))
    assert sent[0]["role"] == "user"
    assert sent[0]["content"].endswith("they asked about k twice")
    assert sent[1:] == [history[-1]]
    assert {e["reason"] for e in plan.evicted} == {"summarized"}
    (request,) = summarizer.requests
    assert request.model == "small"
    assert "question 1" in request.messages[0]["content"]


async def test_summary_is_reused_while_the_summarized_part_is_the_same() -> None:
    summarizer = mock(reply="summary")
    history = [*conversation(2), {"role": "user", "content": "now"}]
    strategy = summarize_window(provider=summarizer, model="small", keep_turns=1)
    first = (await strategy.plan(history, turn=3, previous=None)).to_state(strategy.name, 1)
    history.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": "x", "name": "lookup", "args": {}}]})
    history.append({"role": "tool", "content": "r", "tool_call_id": "x"})
    second = await strategy.plan(history, turn=3, previous=first)
    assert second.summary == first["summary"]
    assert len(summarizer.requests) == 1


async def test_a_failing_summarizer_folds_nothing() -> None:
    summarizer = mock(reply=RuntimeError("down"))
    history = [*conversation(2), {"role": "user", "content": "now"}]
    plan = await summarize_window(provider=summarizer, model="small", keep_turns=1).plan(
        history, turn=3, previous=None)
    assert plan.kept == list(range(len(history)))
    assert plan.error is not None and "down" in plan.error


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="turns=0"):
        sliding_window(turns=0)
    with pytest.raises(ConfigurationError, match="max_tokens"):
        token_budget(max_tokens=-1)
    with pytest.raises(ConfigurationError, match="not a Provider"):
        summarize_window(provider="openai", model="m")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="window strategy"):
        Agent(provider=mock(reply="x"), model="m", window=3)  # type: ignore[arg-type]


# -- never split a tool call from its results ------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    history: list[Message] = []
    ids = 0
    for _ in range(draw(st.integers(1, 6))):
        history.append({"role": "user", "content": "u" * draw(st.integers(0, 60))})
        if draw(st.booleans()):
            history.append({"role": "user", "content": "i" * draw(st.integers(0, 30)),
                            "injected_by": "fact"})
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                ids += 1
                calls.append({"id": f"c{ids}", "name": "lookup", "args": {}})
            history.append({"role": "assistant", "content": "", "tool_calls": calls})
            for call in calls:
                history.append({"role": "tool", "content": "r" * draw(st.integers(0, 80)),
                                "tool_call_id": call["id"]})
        if draw(st.booleans()):
            history.append({"role": "assistant", "content": "a" * draw(st.integers(0, 40))})
    return history


@settings(max_examples=150, deadline=None)
@given(history=histories(), keep=st.integers(1, 4), budget=st.integers(1, 80))
async def test_tool_calls_and_results_are_never_split(history: list[Message], keep: int,
                                                      budget: int) -> None:
    request = max(i for i, m in enumerate(history)
                  if m["role"] == "user" and "injected_by" not in m)
    for strategy in (sliding_window(turns=keep), token_budget(max_tokens=budget),
                     summarize_window(provider=mock(reply="s"), model="m", keep_turns=keep)):
        plan = await strategy.plan(history, turn=1, previous=None)
        sent = windowed_messages(history, plan.to_state(strategy.name, 1))
        assert paired(sent), strategy.name
        assert history[request] in sent, strategy.name
        assert sorted(plan.kept + [e["index"] for e in plan.evicted]) == list(
            range(len(history)))


# -- inside the agent -------------------------------------------------------------------------


async def test_the_model_receives_exactly_the_windowed_messages() -> None:
    provider = mock(script=[{"tool_calls": [{"name": "lookup", "args": {"key": "a"}}]}, "done"])
    agent = Agent(provider=provider, model="m", tools=[lookup], window=sliding_window(turns=1))
    earlier = conversation(3)
    result = await agent.run("now", continue_from=checkpoint(earlier))
    first, second = provider.requests
    assert first.messages == [{"role": "user", "content": "now"}]
    assert [m["role"] for m in second.messages] == ["user", "assistant", "tool"]
    assert result.history[:len(earlier)] == earlier  # the state's history stays complete
    log = result.recording.log
    for request, call in zip(provider.requests, [r for r in log.records
                                                 if r.stage_id == "call_llm"], strict=True):
        history = log.value_at("history", call.idx - 1)
        window = log.value_at("window", call.idx - 1)
        assert wire_messages(windowed_messages(history, window)) == request.messages


async def test_evictions_are_recorded_per_call_and_emitted() -> None:
    provider = mock(script=["fine"])
    agent = Agent(provider=provider, model="m", window=sliding_window(turns=2))
    seen: list[AgentEvent] = []
    agent.on("context.evicted", seen.append)
    result = await agent.run("now", continue_from=checkpoint(conversation(3)))
    (record,) = result.recording.state["window_evicted"]
    assert record["strategy"] == "sliding_window"
    assert record["iteration"] == 1
    assert [e["index"] for e in record["evicted"]] == [0, 1, 2, 3, 4, 5, 6, 7]
    (event,) = seen
    payload_model("context.evicted").model_validate(event.payload)
    assert event.payload["evicted"] == record["evicted"]
    assert result.recording.state["window"]["kept"] == list(range(8, 13))


async def test_summary_is_made_once_per_turn_in_the_agent() -> None:
    summarizer = mock(reply="earlier: two lookups")
    provider = mock(script=[{"tool_calls": [{"name": "lookup", "args": {"key": "a"}}]}, "done"])
    agent = Agent(provider=provider, model="m", tools=[lookup],
                  window=summarize_window(provider=summarizer, model="small", keep_turns=1))
    await agent.run("now", continue_from=checkpoint(conversation(2)))
    assert len(summarizer.requests) == 1
    for request in provider.requests:
        assert request.messages[0]["content"].endswith("earlier: two lookups")
        assert "injected_by" not in request.messages[0]


async def test_without_a_window_nothing_changes() -> None:
    provider = mock(script=["fine"])
    agent = Agent(provider=provider, model="m")
    earlier = conversation(3)
    result = await agent.run("now", continue_from=checkpoint(earlier))
    assert provider.requests[0].messages == wire_messages(
        [*earlier, {"role": "user", "content": "now"}])
    assert "window" not in result.recording.state
    assert "window_evicted" not in result.recording.state
    assert "window" not in {r.stage_id for r in result.recording.log.records}
