"""Redaction on the paths beside the state keys: error text, pauses, repeated content, recall,
secret-shaped text, and a history masked whole that must stay explainable.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, Tracing, check_in_approved, tool
from agentfootprint.errors import ConfigurationError, StageError
from agentfootprint.explain import backtrack, render_html_report
from agentfootprint.flow import flow_chart
from agentfootprint.flow._redact import REDACTED
from agentfootprint.flow._redact import RedactionPolicy as KeyPolicy
from agentfootprint.memory import InMemoryStore, MemoryIdentity, define_memory
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RedactionPolicy, RunStore, trace

SECRET = "sk-live-SECRET-0123456789"


def _raising_chart() -> Any:
    def load(scope: Any) -> None:
        scope["api_key"] = scope.args["key"]

    def call(scope: Any) -> None:
        raise RuntimeError(f"upstream rejected {scope['api_key']}")

    return flow_chart("Load", load).then("Call", call).build()


def test_a_stage_error_quoting_a_redacted_value_is_masked_everywhere(tmp_path: Path) -> None:
    """d04: the step's error, the StageError, the failed run's error, the narrative, the
    error events and the run store file show the marker where the secret stood."""
    errors: list[str] = []

    class Errors:
        def on_error(self, event: Any) -> None:
            errors.append(event.data["error"])

        def on_run_failed(self, event: Any) -> None:
            errors.append(event.data["error"])

    with pytest.raises(StageError) as raised:
        _raising_chart().run_sync({"key": SECRET}, redaction=KeyPolicy(keys=["api_key"]),
                                  recorders=[Errors()])
    run = raised.value.run
    failed = run.log.records[-1]
    assert failed.error == f"RuntimeError: upstream rejected {REDACTED}"
    assert SECRET not in str(raised.value) and REDACTED in str(raised.value)
    assert SECRET not in str(run.error) and SECRET not in run.narrative()
    assert len(errors) == 2 and all(SECRET not in e and REDACTED in e for e in errors)
    assert isinstance(raised.value.__cause__, RuntimeError)  # the caller keeps the original
    with RunStore(tmp_path / "runs.db") as store:
        store.save(run)
    assert SECRET.encode() not in (tmp_path / "runs.db").read_bytes()
    assert SECRET not in Recording.of(run).to_json()


def test_text_patterns_mask_secret_shaped_text_no_key_held() -> None:
    """A secret that was never under a redacted key is masked by its shape, in state values,
    emitted payloads and error text alike; a pattern that matches nothing is refused."""

    def stage(scope: Any) -> None:
        scope["note"] = f"called with {SECRET}"
        scope.emit("app.called", {"detail": f"key={SECRET}"})
        raise ValueError(f"bad key {SECRET}")

    policy = KeyPolicy(text_patterns=[r"sk-live-[\w-]+"])
    with pytest.raises(StageError) as raised:
        flow_chart("Call", stage).build().run_sync(redaction=policy)
    recorded = Recording.of(raised.value.run).to_json()
    assert SECRET not in recorded and SECRET not in str(raised.value)
    assert f"called with {REDACTED}" in recorded and f"key={REDACTED}" in recorded
    assert policy.report()["text_patterns"] == [r"sk-live-[\w-]+"]
    with pytest.raises(ConfigurationError, match="matches empty text"):
        KeyPolicy(text_patterns=[r"x*"])


@tool(check_in=True)
def store_key(key: str) -> str:
    """Store a key."""
    return f"stored {len(key)} characters"


def _paused(policy: Any) -> Any:
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "store_key", "args": {"key": SECRET}}]}, "Stored."]),
        model="m", tools=[store_key], tracing=Tracing(redaction=policy))
    return agent, agent.run_sync("store my key")


@pytest.mark.parametrize("policy", [
    KeyPolicy(keys=[trace.LLM_TOOL_CALLS, trace.HISTORY, trace.MESSAGES]),
    RedactionPolicy(kinds={"tool_args"})], ids=["keys", "kinds"])
def test_a_check_in_pause_records_the_call_masked_and_still_runs_it(policy: Any) -> None:
    """d05: the paused batch repeats the redacted tool calls, so it is redacted too — in the
    recording, the checkpoint's log and its pause data; approving runs the real call."""
    agent, paused = _paused(policy)
    assert paused.paused
    checkpoint = paused.checkpoint
    assert SECRET not in Recording.of(paused).to_json()
    assert SECRET not in json.dumps(checkpoint["flow"]["log"])
    assert SECRET not in json.dumps(checkpoint["pause"])
    assert SECRET not in json.dumps(checkpoint["flow"]["pause_data"])
    assert paused.check_in is not None and paused.check_in.args == {"key": REDACTED}
    # the resume state is the one place the live value is kept: resuming needs it
    assert checkpoint["flow"]["state"][trace.PAUSED_TOOL_BATCH]["calls"][0]["args"] == {
        "key": SECRET}
    done = agent.resume_sync(json.loads(json.dumps(checkpoint)), check_in_approved(by="ops"))
    assert done.content == "Stored."
    tool_message = next(m for m in done.history if m["role"] == "tool")
    assert tool_message["content"] == f"stored {len(SECRET)} characters"
    assert SECRET not in Recording.of(done).to_json()


def test_a_key_repeating_a_redacted_key_is_redacted_with_its_shape() -> None:
    """The contract's repeat rules: a plain key policy gains them through the agent; a recall
    keeps its ids and turns, its text masked; an unrelated key stays readable."""
    policy = RedactionPolicy(keys=[trace.NEW_MESSAGES, trace.LLM_TOOL_CALLS])
    assert policy.is_redacted(trace.PAUSED_TOOL_BATCH)
    assert policy.is_redacted(trace.MEMORY_RECALL.of("chat"))
    assert not policy.is_redacted(trace.TURN) and not policy.is_redacted(trace.SYSTEM_PROMPT)
    recall = {"text": f"user: {SECRET}", "entry_ids": ["msg-1-0"], "turns": [1],
              "pieces": [{"text": SECRET, "entry_ids": ["msg-1-0"], "turns": [1]}]}
    shown = policy.redact_value(trace.MEMORY_RECALL.of("chat"), recall)
    assert shown["text"] == REDACTED and shown["entry_ids"] == ["msg-1-0"]
    assert shown["pieces"][0] == {"text": REDACTED, "entry_ids": ["msg-1-0"], "turns": [1]}
    assert not RedactionPolicy(keys=["other"]).is_redacted(trace.PAUSED_TOOL_BATCH)


def test_a_redacted_secret_does_not_return_through_memory_recall() -> None:
    """d06: the store keeps what the user wrote; every turn that recalls it records it masked,
    and the recalled entry is still named (explainable)."""
    keys = [trace.USER_MESSAGE, trace.HISTORY, trace.MESSAGES, trace.NEW_MESSAGES,
            trace.LLM_CONTENT, trace.FINAL_CONTENT]
    store = InMemoryStore()
    results = []
    for text in (f"my key is {SECRET}", "which key?"):
        memory = define_memory(id="chat", type="episodic", strategy="window", keep_turns=5,
                               store=store)
        agent = Agent(provider=mock(reply="noted"), model="m", memory=[memory],
                      identity=MemoryIdentity("c"), tracing=Tracing(redaction=KeyPolicy(keys=keys)))
        results.append(agent.run_sync(text))
    assert all(SECRET not in Recording.of(r).to_json() for r in results)
    kept = asyncio.run(store.get(MemoryIdentity("c"), "msg-1-0"))
    assert kept is not None and SECRET in str(kept.value)  # the user's data, as written
    recall = results[1].recording.state[trace.MEMORY_RECALL.of("chat")]
    assert SECRET in recall["text"]  # the run itself read it
    recorded = Recording.of(results[1]).to_json()
    assert "msg-1-0" in recorded and REDACTED in recorded


def test_a_history_redacted_whole_stays_explainable(tmp_path: Path) -> None:
    """d03: backtrack, the report and the CLI (explain, report, runs list) work on a run whose
    history was masked whole, and show the marker where the conversation stood."""
    with RunStore(tmp_path / "runs.db") as store:
        result = Agent(provider=mock(reply="hi"), model="m",
                       tracing=Tracing(redaction=KeyPolicy(keys=[trace.HISTORY]),
                                       run_store=store)).run_sync("hello there")
    chain = str(backtrack(result))
    assert REDACTED in chain and "the user's message" in chain
    assert REDACTED in render_html_report(Recording.of(result))
    exe = str(Path(sys.executable).with_name("agentfootprint"))
    for args in (["explain", result.run_id], ["report", result.run_id, "-o",
                                                str(tmp_path / "r.html")], ["runs", "list"]):
        done = subprocess.run([exe, *args, "--store", str(tmp_path / "runs.db")],
                              capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert "AttributeError" not in done.stdout + done.stderr
    assert REDACTED in (tmp_path / "r.html").read_text()


def test_streamed_tokens_of_a_redacted_answer_are_masked() -> None:
    """A token is a piece of the answer: when the answer is redacted, so is every token
    delivered to a stream.token listener; the caller still gets the real answer."""
    tokens: list[str] = []
    agent = Agent(provider=mock(reply=f"Your key is {SECRET}."), model="m", stream=True,
                  tracing=Tracing(redaction=RedactionPolicy(kinds={"model_text"})))
    agent.on("stream.token", lambda event: tokens.append(event.payload["content"]))
    result = agent.run_sync("which key?")
    assert result.content == f"Your key is {SECRET}."
    assert tokens and set(tokens) == {REDACTED}


def test_a_decision_quoting_a_redacted_value_is_masked_in_record_and_event() -> None:
    """A decider's evidence holds the values its rules read; one that repeats a redacted
    value shows the marker, in the record and in the decision event a recorder gets."""
    from agentfootprint.flow import decide

    seen: list[Any] = []

    class Decisions:
        def on_decision(self, event: Any) -> None:
            seen.append(event.data)

    def load(scope: Any) -> None:
        scope["token"] = SECRET
        scope["copy"] = f"token {SECRET}"

    chart = (flow_chart("Load", load)
             .decide("Route", lambda s: decide(s, [
                 {"when": {"copy": {"ne": ""}}, "then": "ok", "label": "has a copy"}],
                 default="stop"), id="route")
             .branch("ok", "Ok", lambda s: None)
             .branch("stop", "Stop", lambda s: None)
             .end().build())
    run = chart.run_sync(redaction=KeyPolicy(keys=["token"]), recorders=[Decisions()])
    assert seen and SECRET not in json.dumps(seen) and REDACTED in json.dumps(seen)
    assert SECRET not in Recording.of(run).to_json()
