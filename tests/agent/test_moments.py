"""act() moments: each moment × each outcome, the ledger rows, and the per-call dispatch order."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, Governance, tool
from agentfootprint.agent._moments import (
    LEDGER,
    InputContext,
    OutputContext,
    ToolCallContext,
    ToolResultContext,
    Verdict,
    act,
    allow,
    ask,
    deny,
)
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.providers import MockProvider, mock

ran: list[dict[str, Any]] = []


@tool
def refund(amount: int) -> str:
    """Refund an amount to the customer."""
    ran.append({"amount": amount})
    return f"refunded {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def refund_call(amount: int = 50, call_id: str = "c1") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "refund", "args": {"amount": amount}}]}


def agent_with(*rules: Any, script: list[Any]) -> tuple[Agent, MockProvider]:
    provider = mock(script=script)
    return Agent(provider=provider, model="m", tools=[refund],
                 governance=Governance(act=list(rules))), provider


def tool_message(provider: MockProvider, request: int, call_id: str = "c1") -> str:
    found = [m["content"] for m in provider.requests[request].messages
             if m["role"] == "tool" and m.get("tool_call_id") == call_id]
    assert len(found) == 1
    return found[0]


def ledger(result: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = result.recording.state.get(LEDGER, [])
    return rows


def boom(_: Any) -> Verdict:
    raise RuntimeError("secret internals")


# -- input -----------------------------------------------------------------------------------


async def test_input_allow_passes_the_message_and_files_a_row() -> None:
    seen: list[InputContext] = []

    def look(ctx: InputContext) -> Verdict:
        seen.append(ctx)
        return allow()

    agent, provider = agent_with(act("input", look, id="look"), script=["hi"])
    result = await agent.run("hello")
    assert result.content == "hi"
    assert seen[0].message == "hello"
    assert provider.requests[0].messages[-1]["content"] == "hello"
    assert ledger(result) == [{"moment": "input", "rule": "look", "decision": "allow",
                               "reason": None, "iteration": 0, "tool_call_id": None,
                               "tool_name": None}]


async def test_input_replacement_is_what_the_model_reads() -> None:
    async def redact(ctx: InputContext) -> Verdict:
        return allow(ctx.message.replace("4111", "****"), reason="card number redacted")

    agent, provider = agent_with(act("input", redact, id="pii"), script=["ok"])
    result = await agent.run("my card is 4111")
    assert provider.requests[0].messages[-1]["content"] == "my card is ****"
    assert result.history[-1]["content"] == "my card is ****"
    row = ledger(result)[0]
    assert (row["decision"], row["before"], row["after"]) == (
        "replace", "my card is 4111", "my card is ****")


async def test_input_deny_stops_before_any_model_call() -> None:
    agent, provider = agent_with(act("input", lambda c: deny("off topic"), id="topic"),
                                 script=["never"])
    result = await agent.run("tell me a joke")
    assert provider.requests == []
    assert result.stopped_early == "input-denied"
    assert result.content == ""
    assert ledger(result)[0]["decision"] == "deny"
    assert ledger(result)[0]["reason"] == "off topic"


async def test_a_denied_input_still_ends_the_turn_with_agent_turn_end() -> None:
    """No model call, but the turn is over: turn_end says so, with stopped_early."""
    agent, _ = agent_with(act("input", lambda c: deny("off topic"), id="topic"),
                          script=["never"])
    ends: list[Any] = []
    agent.on("agent.turn_end", ends.append)
    result = await agent.run("tell me a joke")
    assert [(e.payload["stopped_early"], e.payload["iterations"]) for e in ends] == [
        ("input-denied", result.iterations)]
    ends[0].model()


async def test_input_ask_is_recorded_then_refused() -> None:
    agent, provider = agent_with(act("input", lambda c: ask("Is this OK?"), id="check"),
                                 script=["never"])
    result = await agent.run("hello")
    row = ledger(result)[0]
    assert (row["decision"], row["question"]) == ("ask", "Is this OK?")
    assert "needs a person to approve" in row["reason"] and "'check'" in row["reason"]
    assert result.stopped_early == "input-denied"
    assert provider.requests == []


async def test_input_raising_rule_denies_naming_the_rule() -> None:
    agent, _ = agent_with(act("input", boom, id="fragile"), script=["never"])
    result = await agent.run("hello")
    row = ledger(result)[0]
    assert row["decision"] == "deny"
    assert row["reason"] == ("Refused: rule 'fragile' failed while checking this, so it was "
                             "not allowed.")
    assert row["error"] == "RuntimeError: secret internals"
    assert result.stopped_early == "input-denied"


async def test_input_non_text_replacement_is_refused() -> None:
    agent, _ = agent_with(act("input", lambda c: allow(42, reason="x"), id="odd"),
                          script=["never"])
    result = await agent.run("hello")
    assert "only text (a str) may be replaced" in ledger(result)[0]["reason"]
    assert result.stopped_early == "input-denied"


# -- before_tool -----------------------------------------------------------------------------


async def test_before_tool_allow_runs_the_tool() -> None:
    seen: list[ToolCallContext] = []

    def look(ctx: ToolCallContext) -> Verdict:
        seen.append(ctx)
        return allow()

    agent, provider = agent_with(act("before_tool", look, id="look"),
                                 script=[refund_call(50), "done"])
    result = await agent.run("refund me")
    assert ran == [{"amount": 50}]
    assert (seen[0].tool_name, seen[0].tool_call_id, dict(seen[0].args)) == (
        "refund", "c1", {"amount": 50})
    assert tool_message(provider, 1) == "refunded 50"
    assert ledger(result)[0] | {} == {"moment": "before_tool", "rule": "look",
                                      "decision": "allow", "reason": None, "iteration": 1,
                                      "tool_call_id": "c1", "tool_name": "refund"}


async def test_before_tool_replacement_changes_only_the_arguments() -> None:
    def cap(ctx: ToolCallContext) -> Verdict:
        return allow({**ctx.args, "amount": min(ctx.args["amount"], 100)}, reason="capped")

    agent, provider = agent_with(act("before_tool", cap, id="cap"),
                                 script=[refund_call(500), "done"])
    result = await agent.run("refund me")
    assert ran == [{"amount": 100}]
    assert tool_message(provider, 1) == "refunded 100"  # the tool's real output
    row = ledger(result)[0]
    assert (row["decision"], row["before"], row["after"]) == (
        "replace", {"amount": 500}, {"amount": 100})


async def test_before_tool_non_mapping_replacement_cannot_answer_for_the_tool() -> None:
    agent, provider = agent_with(
        act("before_tool", lambda c: allow("refunded 9999", reason="fake"), id="faker"),
        script=[refund_call(5), "done"])
    result = await agent.run("refund me")
    assert ran == []
    assert "only arguments (a mapping) may be replaced" in tool_message(provider, 1)
    assert ledger(result)[0]["decision"] == "deny"


async def test_deny_at_before_tool_shows_the_model_a_refusal_and_names_the_rule() -> None:
    def over_100(ctx: ToolCallContext) -> Verdict:
        if ctx.args["amount"] > 100:
            return deny("Refunds over 100 need a manager.")
        return allow()

    agent, provider = agent_with(act("before_tool", over_100, id="no-refunds-over-100"),
                                 script=[refund_call(250), "I cannot refund that."])
    events: list[AgentEvent] = []
    agent.on("stream.tool_end", events.append)
    result = await agent.run("refund 250")
    assert ran == []
    assert tool_message(provider, 1) == "Refunds over 100 need a manager."
    row = ledger(result)[0]
    assert (row["rule"], row["decision"], row["tool_call_id"], row["iteration"]) == (
        "no-refunds-over-100", "deny", "c1", 1)
    assert events[0].payload["status"] == "denied" and events[0].payload["error"] is True
    assert result.content == "I cannot refund that."


async def test_before_tool_ask_pauses_and_a_person_decides() -> None:
    """ask() at before_tool pauses before the call; approval runs it, recorded by rule."""
    from agentfootprint import check_in_approved, check_in_declined

    agent, provider = agent_with(
        act("before_tool", lambda c: ask("Approve this refund?"), id="approve"),
        script=[refund_call(5), "done", refund_call(6), "done again"])
    paused = await agent.run("refund me")
    assert paused.paused and ran == []
    assert paused.pause is not None
    assert paused.pause["data"]["asked_by_rule"] == {"rule": "approve",
                                                     "question": "Approve this refund?"}
    assert ledger(paused)[0]["decision"] == "ask"
    assert ledger(paused)[0]["question"] == "Approve this refund?"
    done = await agent.resume(paused.checkpoint, check_in_approved(by="lead"))
    assert done.content == "done" and ran == [{"amount": 5}]
    assert tool_message(provider, 1) == "refunded 5"
    again = await agent.run("refund me again")
    declined = await agent.resume(again.checkpoint, check_in_declined(by="lead",
                                                                        note="not today"))
    assert declined.content == "done again" and ran == [{"amount": 5}]
    assert "lead declined this call" in tool_message(provider, 3)


async def test_ask_at_output_is_recorded_then_refused() -> None:
    """Only a tool call can wait for a person; an ask elsewhere is refused by a fixed text."""
    agent, _ = agent_with(act("output", lambda c: ask("Send this?"), id="review"),
                          script=["the answer"])
    result = await agent.run("q")
    assert result.content == "" and result.stopped_early == "output-denied"
    assert ledger(result)[0]["decision"] == "ask"
    assert "only a tool call can wait" in ledger(result)[0]["reason"]


async def test_window_rule_can_put_messages_back_or_refuse_eviction() -> None:
    """act("window"): a replacement chooses what is sent; a denial sends everything."""
    from agentfootprint.agent import sliding_window

    earlier = {"version": 1, "run_id": "r0", "turn": 2, "history": [
        {"role": "user", "content": "Remember: my code is 4417."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "Anytime."}]}

    def keep_code(ctx: Any) -> Verdict:
        wanted = [e["index"] for e in ctx.evicted
                  if "code" in ctx.history[e["index"]]["content"]]
        return allow([*ctx.kept, *wanted], reason="keep the code") if wanted else allow()

    provider = mock(reply="ok")
    agent = Agent(provider=provider, model="m", window=sliding_window(turns=1),
                  governance=Governance(act=[act("window", keep_code, id="keep-code")]))
    result = await agent.run("What is my code?", continue_from=earlier)
    sent = [m["content"] for m in provider.requests[0].messages]
    assert sent == ["Remember: my code is 4417.", "What is my code?"]
    assert ledger(result)[0]["decision"] == "replace"
    assert result.recording.state["window"]["kept"] == [0, 4]

    refusing = mock(reply="ok")
    agent = Agent(provider=refusing, model="m", window=sliding_window(turns=1),
                  governance=Governance(act=[
                      act("window", lambda c: deny("no eviction here"), id="keep-all")]))
    await agent.run("What is my code?", continue_from=earlier)
    assert len(refusing.requests[0].messages) == 5


async def test_window_allow_keeps_the_plan_ask_and_raising_rule_send_everything() -> None:
    """At ``window``: allow leaves the strategy's choice; ask (nobody can be asked mid-call)
    and a raising rule both refuse the eviction, so the whole history is sent."""
    from agentfootprint.agent import sliding_window

    earlier = {"version": 1, "run_id": "r0", "turn": 2, "history": [
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"}, {"role": "assistant", "content": "two"}]}
    cases = [(lambda c: allow(), "allow", 3), (lambda c: ask("Evict?"), "ask", 5),
             (boom, "deny", 5)]
    for rule, decision, sent in cases:
        provider = mock(reply="ok")
        agent = Agent(provider=provider, model="m", window=sliding_window(turns=2),
                      governance=Governance(act=[act("window", rule, id="w")]))
        result = await agent.run("third", continue_from=earlier)
        assert len(provider.requests[0].messages) == sent
        assert ledger(result)[0]["moment"] == "window"
        assert ledger(result)[0]["decision"] == decision


async def test_before_tool_raising_rule_denies_without_leaking_the_error() -> None:
    agent, provider = agent_with(act("before_tool", boom, id="fragile"),
                                 script=[refund_call(5), "done"])
    result = await agent.run("refund me")
    assert ran == []
    text = tool_message(provider, 1)
    assert "'fragile'" in text and "secret" not in text
    assert ledger(result)[0]["error"] == "RuntimeError: secret internals"


async def test_before_tool_chain_runs_in_written_order_and_first_deny_wins() -> None:
    order: list[str] = []

    def double(ctx: ToolCallContext) -> Verdict:
        order.append("double")
        return allow({"amount": ctx.args["amount"] * 2}, reason="double")

    def limit(ctx: ToolCallContext) -> Verdict:
        order.append(f"limit saw {ctx.args['amount']}")
        return deny("too much") if ctx.args["amount"] > 10 else allow()

    def never(ctx: ToolCallContext) -> Verdict:
        order.append("never")
        return allow()

    agent, _ = agent_with(act("before_tool", double, id="double"),
                          act("before_tool", limit, id="limit"),
                          act("before_tool", never, id="never"),
                          script=[refund_call(8), "done"])
    result = await agent.run("x")
    assert order == ["double", "limit saw 16"]
    assert [r["decision"] for r in ledger(result)] == ["replace", "deny"]


# -- after_tool ------------------------------------------------------------------------------


async def test_after_tool_allow_passes_the_real_result() -> None:
    seen: list[ToolResultContext] = []

    def look(ctx: ToolResultContext) -> Verdict:
        seen.append(ctx)
        return allow()

    agent, provider = agent_with(act("after_tool", look, id="look"),
                                 script=[refund_call(7), "done"])
    result = await agent.run("x")
    assert (seen[0].result, seen[0].status, seen[0].error) == ("refunded 7", "success", False)
    assert tool_message(provider, 1) == "refunded 7"
    assert ledger(result)[0]["moment"] == "after_tool"


async def test_after_tool_replacement_is_refused_a_rule_never_answers_for_a_tool() -> None:
    agent, provider = agent_with(
        act("after_tool", lambda c: allow("all good", reason="rewrite"), id="rewriter"),
        script=[refund_call(7), "done"])
    result = await agent.run("x")
    assert ran == [{"amount": 7}]
    assert "never answer for a tool" in tool_message(provider, 1)
    row = ledger(result)[0]
    assert (row["decision"], row["kept_result"]) == ("deny", "refunded 7")


async def test_after_tool_deny_model_reads_reason_real_result_kept_in_ledger() -> None:
    agent, provider = agent_with(
        act("after_tool", lambda c: deny("That result is confidential."), id="secret"),
        script=[refund_call(7), "done"])
    result = await agent.run("x")
    assert tool_message(provider, 1) == "That result is confidential."
    row = ledger(result)[0]
    assert (row["rule"], row["decision"], row["kept_result"]) == (
        "secret", "deny", "refunded 7")


async def test_after_tool_ask_and_raising_rule_both_refuse() -> None:
    agent, provider = agent_with(
        act("after_tool", boom, id="fragile"),
        script=[refund_call(1, "c1"), refund_call(2, "c2"), "done"])
    result = await agent.run("x")
    assert "'fragile'" in tool_message(provider, 1, "c1")
    agent, provider = agent_with(
        act("after_tool", lambda c: ask("Show this?"), id="asker"),
        script=[refund_call(1), "done"])
    result = await agent.run("x")
    assert "needs a person to approve" in tool_message(provider, 1)
    assert ledger(result)[0]["decision"] == "ask"


async def test_after_tool_walks_the_rules_in_reverse_and_skips_unexecuted_calls() -> None:
    order: list[str] = []

    def first(ctx: ToolResultContext) -> Verdict:
        order.append("first")
        return allow()

    def second(ctx: ToolResultContext) -> Verdict:
        order.append("second")
        return allow()

    bad = {"tool_calls": [{"id": "c0", "name": "refund", "args": {"amount": "lots"}}]}
    agent, _ = agent_with(act("after_tool", first, id="first"),
                          act("after_tool", second, id="second"),
                          script=[bad, refund_call(3), "done"])
    await agent.run("x")
    assert order == ["second", "first"]  # the invalid call never executed: no rows for it


# -- output ----------------------------------------------------------------------------------


async def test_output_allow_replace_deny_ask_raise() -> None:
    def look(ctx: OutputContext) -> Verdict:
        assert ctx.content == "The answer is 42."
        return allow()

    agent, _ = agent_with(act("output", look, id="look"), script=["The answer is 42."])
    result = await agent.run("x")
    assert result.content == "The answer is 42."
    assert ledger(result)[0]["decision"] == "allow"

    agent, _ = agent_with(
        act("output", lambda c: allow(c.content.upper(), reason="shout"), id="shout"),
        script=["quiet"])
    result = await agent.run("x")
    assert result.content == "QUIET"
    assert result.recording.state["llm_content"] == "quiet"  # what the model said is kept

    for rule, decision in ((lambda c: deny("no"), "deny"), (lambda c: ask("ok?"), "ask"),
                           (boom, "deny")):
        agent, _ = agent_with(act("output", rule, id="gate"), script=["secret answer"])
        result = await agent.run("x")
        assert result.content == ""
        assert result.stopped_early == "output-denied"
        assert ledger(result)[0]["decision"] == decision


# -- recording and configuration -------------------------------------------------------------


async def test_ledger_rows_land_in_the_commit_log_and_events_fit_the_catalogue() -> None:
    agent, _ = agent_with(act("before_tool", lambda c: allow(), id="a"),
                          act("output", lambda c: allow(), id="b"),
                          script=[refund_call(1), "done"])
    events: list[AgentEvent] = []
    agent.on("act.decision", events.append)
    result = await agent.run("x")
    writers = [r for r in result.recording.records
               if any(c.key == LEDGER for c in r.changes)]
    assert [r.stage_id for r in writers] == ["tool_calls", "finalize"]
    assert [e.payload["rule"] for e in events] == ["a", "b"]
    for event in events:
        event.model()  # validates against the catalogue


def test_act_refuses_bad_configuration() -> None:
    with pytest.raises(ConfigurationError, match="not one of"):
        act("during", lambda c: allow(), id="w")  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="id="):
        act("input", lambda c: allow())
    with pytest.raises(ConfigurationError, match="reason"):
        allow("x")
    with pytest.raises(ConfigurationError, match="non-empty"):
        deny("")
    with pytest.raises(ConfigurationError, match="unique"):
        Agent(provider=mock(reply="x"), model="m",
              governance=Governance(act=[act("input", lambda c: allow(), id="a"),
                   act("output", lambda c: allow(), id="a")]))
    with pytest.raises(ConfigurationError, match="not a rule"):
        Agent(provider=mock(reply="x"), model="m", governance=Governance(act=["nope"]))  # type: ignore[list-item]
