"""Redaction by kind: naming kinds of content, never an internal key, keeps a secret out of
every byte a run leaves behind — across three turns of a memory conversation with recall.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, Tracing
from agentfootprint.errors import ConfigurationError
from agentfootprint.explain import backtrack, render_html_report
from agentfootprint.flow._redact import REDACTED
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import Recording, RedactionPolicy, RunStore, trace

SECRET = "X7Q-99182-PLUGH"
ENDING = SECRET[-5:]


def _forms(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, base64.b64encode(raw), base64.urlsafe_b64encode(raw),
            json.dumps(secret).encode()]


def _assert_clean(what: str, data: bytes | str) -> None:
    blob = data.encode() if isinstance(data, str) else data
    for form in _forms(SECRET):
        assert form not in blob, f"the secret leaked into {what}"


def _answer(request: LLMRequest) -> str:
    """Turn 1 acknowledges; later turns repeat what memory recalled (secret included)."""
    seen = (request.system or "") + " ".join(str(m.get("content")) for m in request.messages)
    return f"Your passport is {SECRET}." if SECRET in seen and "passport?" in seen \
        else "Noted."


def _agent(store: SQLiteStore, run_store: RunStore, policy: RedactionPolicy) -> Agent:
    chat = define_memory(id="chat", type="episodic", strategy="window", keep_turns=10,
                         store=store)
    return Agent(provider=mock(respond=_answer), model="mock", memory=[chat],
                 identity=MemoryIdentity("c-1"),
                 tracing=Tracing(redaction=policy, run_store=run_store))


def test_kinds_alone_keep_a_secret_out_of_every_sink(tmp_path: Path) -> None:
    """user_text + model_text + memory_content: no internal key named, nothing leaks anywhere."""
    policy = RedactionPolicy(kinds={"user_text", "model_text", "memory_content"})
    events: list[str] = []
    run_store = RunStore(tmp_path / "runs.db")
    turns = [f"My passport number is {SECRET}, please remember it.",
             "What is the weather like?", "What is my passport?"]
    results = []
    with SQLiteStore(tmp_path / "memory.db") as store:
        for message in turns:
            agent = _agent(store, run_store, policy)  # a fresh agent per request
            agent.on("*", lambda event: events.append(json.dumps(event.payload, default=str)))
            result = agent.run_sync(message)
            results.append(result)
            _assert_clean(f"turn {result.turn}'s checkpoint", json.dumps(agent.checkpoint()))
    assert [r.turn for r in results] == [1, 2, 3]
    # the model really saw the secret through recall: the answer is the only place it is plain
    assert SECRET in results[2].content
    for result in results:
        recording = Recording.of(result)
        _assert_clean(f"turn {result.turn}'s recording", recording.model_dump_json())
        _assert_clean(f"turn {result.turn}'s narrative", "\n".join(result.narrative()))
        _assert_clean(f"turn {result.turn}'s report",
                      render_html_report(recording, backtrack=backtrack(result)))
    _assert_clean("the events", "\n".join(events))
    # no fingerprint either: the system prompt's content hashes are masked in the record
    rows = [change.value for record in results[2].recording.log.records
            for change in record.changes if change.key == trace.SYSTEM_SLOT]
    assert rows and all(row["hash"] == REDACTED for value in rows for row in value)
    assert any(row["source"].startswith("memory:chat#") for value in rows for row in value)
    # still explainable: the answer walks back to the turn-1 entry, its content masked
    answer = str(backtrack(results[2]))
    assert "BORN" in answer and "msg-1-0" in answer and REDACTED in answer
    _assert_clean("the run store file", (tmp_path / "runs.db").read_bytes())
    assert len(run_store.list()) == 3


def test_a_conversation_keeps_its_shape() -> None:
    """Masked content, kept roles, tool names and injection ids: what explain walks on."""
    policy = RedactionPolicy(kinds={"tool_args", "memory_content"})
    history = [
        {"role": "user", "content": "refund order 7"},
        {"role": "user", "content": "Maya is a VIP", "injected_by": "memory:chat#msg-1-0"},
        {"role": "assistant", "content": "Checking.",
         "tool_calls": [{"id": "c1", "name": "refund", "args": {"card": SECRET}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    shown = policy.redact_value(trace.HISTORY, history)
    assert [m["role"] for m in shown] == ["user", "user", "assistant", "tool"]
    assert shown[0]["content"] == "refund order 7"          # user_text is not redacted here
    assert shown[1] == {**history[1], "content": REDACTED}   # recalled memory is
    assert shown[2]["tool_calls"] == [{"id": "c1", "name": "refund", "args": REDACTED}]
    assert shown[3]["content"] == "done"
    assert policy.keeps_shape(trace.HISTORY) and not policy.keeps_shape(trace.TURN)


def test_a_key_named_by_the_user_is_masked_whole() -> None:
    """keys= means the whole value, shape or not."""
    policy = RedactionPolicy(keys=[trace.HISTORY])
    assert policy.redact_value(trace.HISTORY, [{"role": "user", "content": "x"}]) == REDACTED


def test_a_kind_covers_every_key_of_a_family() -> None:
    """A memory id nobody listed is covered: the family's keys are redacted by prefix."""
    policy = RedactionPolicy(kinds={"memory_content"})
    assert policy.is_redacted(trace.MEMORY_RECALL.of("a-memory-added-later"))
    assert policy.is_redacted(trace.HISTORY) and policy.is_redacted(trace.RECALL)
    assert not policy.is_redacted(trace.TURN)
    assert policy.report()["kinds"] == ["memory_content"]


@pytest.mark.parametrize("kinds, fix", [({"tool_arguments"}, "tool_args"),
                                        ("tool_args", "{'tool_args'}")])
def test_a_wrong_kind_is_refused_with_the_fix(kinds: Any, fix: str) -> None:
    """A misspelt kind, or one string instead of a set, names the kinds to pick from."""
    with pytest.raises(ConfigurationError, match=fix.replace("{", r"\{").replace("}", r"\}")):
        RedactionPolicy(kinds=kinds)


def test_only_what_is_masked_is_scrubbed_from_events() -> None:
    """tool_args redacted: the arguments leave every event, the tool's name stays readable."""
    from agentfootprint import Tracing, tool

    @tool
    async def lookup_order(order_id: str) -> str:
        """Find an order."""
        return "shipped"

    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": SECRET}}]}, "Shipped."]),
        model="mock", tools=[lookup_order],
        tracing=Tracing(redaction=RedactionPolicy(kinds={"tool_args"})))
    events: list[str] = []
    agent.on("*", lambda event: events.append(json.dumps(event.payload, default=str)))
    result = agent.run_sync("Where is my order?")
    _assert_clean("the events", "\n".join(events))
    _assert_clean("the recording", Recording.of(result).model_dump_json())
    assert any("lookup_order" in e for e in events)
    calls = [c.value for r in result.recording.log.records for c in r.changes
             if c.key == trace.LLM_TOOL_CALLS and c.value]
    assert calls[0] == [{"id": calls[0][0]["id"], "name": "lookup_order", "args": REDACTED}]


def test_a_checkpoint_is_a_record_and_still_continues() -> None:
    """Under a policy the conversation checkpoint is masked as recorded, and follow_up works."""
    from agentfootprint import Tracing
    from agentfootprint.flow._redact import RedactionPolicy as KeyPolicy

    seen: list[list[str]] = []

    def answer(request: LLMRequest) -> str:
        seen.append([str(m.get("content")) for m in request.messages])
        return "Noted."

    cases = [(RedactionPolicy(kinds={"user_text"}), 3), (KeyPolicy(keys=["history"]), 1)]
    for policy, kept in cases:
        seen.clear()
        agent = Agent(provider=mock(respond=answer), model="mock",
                      tracing=Tracing(redaction=policy))
        agent.run_sync(f"My card is {SECRET}.")
        _assert_clean("the checkpoint", json.dumps(agent.checkpoint()))
        agent.follow_up_sync("And my name is Ann.")
        assert len(seen[-1]) == kept and SECRET not in " ".join(seen[-1])
