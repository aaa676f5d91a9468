"""A paused run is explained as its pause, never as an empty answer traced to a sentence.

Three shapes pause differently — a check-in before a consequential tool, a tool that asks a
person (``ask_human``), and a pausable stage of a plain flow chart — and each is read from the
commit log alone, so the live result, a stored recording and every surface (CLI ``explain``,
the HTML report, ``self_explain``, the trace toolpack) say the same thing: PAUSED first, then
the pending tool call traced to the context of the call that asked for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_html_report import by_id, parse

from agentfootprint import Agent, Tracing, check_in_approved, define_fact, tool
from agentfootprint.cli import main
from agentfootprint.explain import backtrack, render_html_report, self_explain, trace_toolpack
from agentfootprint.explain._toolpack import call_trace_tool
from agentfootprint.flow import flow_chart, pause
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs import Recording, RedactionPolicy, RunStore
from agentfootprint.tools import ask_human


@tool(check_in=lambda args: args["amount"] > 1000)
async def issue_refund(order_id: str, amount: float) -> str:
    """Issue a refund for an order."""
    return f"refund of {amount:.2f} issued on {order_id}"


def _refund_model(request: LLMRequest) -> Any:
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"id": "r1", "name": "issue_refund",
                                "args": {"order_id": "A-9", "amount": 5000.0}}]}
    return f"Done — {results[0]}."


def _refund_agent(store: RunStore | None = None) -> Agent:
    return Agent(provider=mock(respond=_refund_model), model="mock", name="Refunds",
                 tools=[issue_refund],
                 context=[define_fact(id="goodwill",
                                      data="Order A-9 was lost in transit; refund in full.")],
                 tracing=Tracing(run_store=store) if store is not None else None)


def _reloaded(result: Any) -> Recording:
    """The run as another process reads it: a recording through JSON."""
    return Recording.model_validate_json(Recording.of(result).model_dump_json())


async def test_a_check_in_pause_explains_the_pending_tool_call() -> None:
    """PAUSED names the step, the tool and its arguments as recorded; the chain then follows
    the context of the call that asked for it, ranked against that call — the same ranking the
    check-in's evidence pack shows — and no ANSWER hop traces the empty answer."""
    agent = _refund_agent()
    result = await agent.run("Refund 5000 on A-9")
    assert result.paused
    chain = backtrack(result)
    kinds = [hop.kind for hop in chain.hops]
    assert kinds == ["PAUSED", "READ", "LANDED", "ALLOWED", "BORN"]
    assert chain.paused and chain.answer == "" and not chain.no_overlap
    pause_info = chain.pause
    assert pause_info is not None and pause_info.kind == "check_in"
    assert (pause_info.tool, pause_info.tool_call_id) == ("issue_refund", "r1")
    assert pause_info.args == {"order_id": "A-9", "amount": 5000.0}
    paused_hop = chain.hops[0]
    assert paused_hop.runtime_stage_id is not None
    assert paused_hop.runtime_stage_id.startswith("tool_calls#")
    assert ("check-in before tool 'issue_refund' {\"amount\": 5000.0, \"order_id\": \"A-9\"} "
            "(tool call r1)") in paused_hop.text
    asking = pause_info.call
    assert asking is not None and [c["id"] for c in asking.tool_calls] == ["r1"]
    assert chain.hops[1].runtime_stage_id == asking.runtime_stage_id
    assert chain.hops[1].text.startswith(f"{asking.runtime_stage_id} — the model asked for it")
    assert result.check_in is not None
    drivers = {d["id"]: d["score"] for d in result.check_in.evidence["drivers"]}
    assert {item.suspect.id: round(item.score, 3) for item in chain.ranked} == drivers
    assert chain.suspect is not None and chain.suspect.id == "goodwill"
    assert chain.hops[-1].text == "define_fact('goodwill')"
    text = str(chain)
    assert text.startswith("RUN PAUSED at tool_calls#")
    assert "ANSWER" not in text and '""' not in text
    assert "proxy scores against the pending tool call" in text
    assert "paused=" in repr(chain)
    assert str(backtrack(_reloaded(result))) == text  # the same from the log alone

    final = await _refund_agent().resume(json.loads(json.dumps(result.checkpoint)),
                                         check_in_approved(by="alice@ops"))
    done = backtrack(final)
    assert not done.paused and done.hops[0].kind == "ANSWER"
    assert done.answer == "Done — refund of 5000.00 issued on A-9."


@tool
def ask_customer(question: str, order_id: str) -> str:
    """Ask the customer something about an order."""
    ask_human(question, order_id=order_id)


async def test_a_tool_that_asks_a_person_explains_its_question_and_what_led_to_it() -> None:
    """An agent whose tool calls ask_human: PAUSED says which tool asked what, and the chain
    follows the fact the model's call overlaps."""
    agent = Agent(
        provider=mock(script=[{"tool_calls": [{"id": "q1", "name": "ask_customer", "args": {
            "question": "Which colour of lamp B-7 do you want?", "order_id": "B-7"}}]}]),
        model="m", tools=[ask_customer],
        context=[define_fact(id="lamp", data="Lamp B-7 comes in two colours."),
                 define_fact(id="hours", data="The shop opens at nine.")])
    result = await agent.run("Exchange my lamp")
    assert result.paused
    for source in (result, _reloaded(result)):
        chain = backtrack(source)
        assert chain.pause is not None and chain.pause.kind == "ask"
        assert chain.pause.question == "Which colour of lamp B-7 do you want?"
        assert [hop.kind for hop in chain.hops] == ["PAUSED", "READ", "LANDED", "ALLOWED",
                                                    "BORN"]
        assert ("tool 'ask_customer' {\"order_id\": \"B-7\", \"question\": \"Which colour of "
                "lamp B-7 do you want?\"} (tool call q1) asked a person \"Which colour of lamp "
                "B-7 do you want?\"") in chain.hops[0].text
        assert chain.suspect is not None and chain.suspect.id == "lamp"
        assert chain.sentence == "Lamp B-7 comes in two colours."
        scores = {item.suspect.id: item.score for item in chain.ranked}
        assert scores["lamp"] > 0 and scores["hours"] == 0


def _approval_flow() -> Any:
    def seed(scope: Any) -> None:
        scope["amount"] = 2400
        scope["customer"] = "Maya"

    def approve(scope: Any) -> Any:
        if scope["amount"] > 1000:
            return pause({"question": "approve a refund of 2400?"})
        return None

    def resumed(scope: Any, answer: Any) -> None:
        scope["approved"] = answer

    return flow_chart("Seed", seed).then("Approve", approve, resume=resumed).build()


def test_a_pausable_stage_of_a_flow_chart_is_explained_by_what_it_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain flow chart has no LLM call: its pause is the stage and the state it read (with
    the step that wrote each value) — not "no answer to explain" — on every surface."""
    run = _approval_flow().run_sync()
    assert run.paused
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        store.save(run)
        recording = store.load(run.run_id)
    for source in (run, recording):
        chain = backtrack(source)
        assert [hop.kind for hop in chain.hops] == ["PAUSED", "STATE"]
        assert chain.pause is not None and chain.pause.kind == "stage"
        assert chain.hops[0].runtime_stage_id == "Approve#1"
        assert "stage 'Approve' paused the run" in chain.hops[0].text
        assert chain.hops[1].text == "the step read: amount = 2400 (written by Seed#0)"
        assert chain.suspect is None and chain.ranked == []
    with pytest.raises(KeyError, match="without an LLM call"):
        backtrack(run, suspect="customer")
    assert "ANSWER: none yet — the run is paused: stage 'Approve'" in self_explain(run)
    assert main(["--store", str(path), "explain", run.run_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith("RUN PAUSED at Approve#1") and "Nothing to prove yet" in out
    root = parse(render_html_report(recording))
    assert "Why did" in root.one("h1").text and "pause?" in root.one("h1").text
    assert "RUN PAUSED" in by_id(root, "pause").text
    assert [h.attrs["data-kind"] for h in by_id(root, "board").find_all("li", cls="hop")] == [
        "PAUSED", "STATE"]


def test_every_surface_shows_the_pause_of_a_stored_agent_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CLI explain, the HTML report, self_explain and the trace toolpack all lead with the
    pause and the pending tool call; none offers to prove an answer the run never gave."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        result = _refund_agent(store).run_sync("Refund 5000 on A-9")
        assert result.paused
        recording = store.load(result.run_id)
    assert recording.status == "paused"
    chain = backtrack(recording)
    assert main(["--store", str(path), "explain", result.run_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith("RUN PAUSED at tool_calls#")
    assert "PAUSED   tool_calls#" in out and "check-in before tool 'issue_refund'" in out
    assert "READ     call_llm#" in out and "the model asked for it" in out
    assert "Nothing to prove yet" in out and "ANSWER" not in out
    assert "agentfootprint prove" not in out
    assert out.startswith(str(chain))

    root = parse(render_html_report(recording))
    assert "pause?" in root.one("h1").text
    assert "RUN PAUSED" in by_id(root, "lead").text
    assert "issue_refund" in by_id(root, "pause").text
    board = by_id(root, "board")
    assert [h.attrs["data-kind"] for h in board.find_all("li", cls="hop")] == [
        hop.kind for hop in chain.hops]
    assert len(board.find_all("li", cls="suspect")) == len(chain.ranked)
    assert "Not proven yet" not in root.text
    assert "the call that produced the answer" not in root.text
    asking = [v for v in by_id(root, "model-view").find_all("article", cls="call-view")
              if "the call that asked for the pending tool call" in v.text]
    assert len(asking) == 1 and "hidden" not in asking[0].attrs

    said = self_explain(recording)
    assert "ANSWER: none yet — the run is paused: check-in before tool 'issue_refund'" in said
    assert "PROOF: nothing to prove yet" in said

    tools = trace_toolpack(recording)
    told = call_trace_tool(tools, "backtrack")
    assert told.startswith(str(chain))
    assert "similarity to the pending tool call" in told
    second = call_trace_tool(tools, "run_overview").splitlines()[1]
    assert second.startswith("PAUSED: at tool_calls#")
    assert "a check-in before tool 'issue_refund' (tool call r1)" in second


def test_the_pending_call_is_shown_masked_as_the_run_recorded_it() -> None:
    """Under a redaction of tool arguments the PAUSED hop quotes the recorded mask, never the
    value the model asked for."""

    @tool(check_in=True)
    async def wire(account: str, amount: float) -> str:
        """Wire money to an account."""
        return "sent"

    agent = Agent(
        provider=mock(script=[{"tool_calls": [{"id": "w1", "name": "wire", "args": {
            "account": "IBAN-SECRET-42", "amount": 900.0}}]}]),
        model="m", tools=[wire], context=[define_fact(id="payee", data="Wire to the payee.")],
        tracing=Tracing(redaction=RedactionPolicy(kinds=["tool_args"])))
    result = agent.run_sync("Wire 900 to the payee")
    for source in (result, _reloaded(result)):
        chain = backtrack(source)
        assert chain.hops[0].kind == "PAUSED"
        assert '"account": "[REDACTED]"' in chain.hops[0].text
        assert "IBAN-SECRET-42" not in str(chain)


async def test_a_member_that_pauses_is_traced_across_the_composition() -> None:
    """The second member of a Sequence pauses at a check-in: PAUSED names its step, and the
    pending call's chain crosses into the first member whose answer it was sent (FROM) — the
    same from the composition's result and from its recording."""
    from agentfootprint.compose import Sequence

    @tool(check_in=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    first = Agent(provider=mock(reply="Order A-9 needs a refund"), model="m",
                  context=[define_fact(id="lost", data="Order A-9 was lost in transit.")])
    second = Agent(provider=mock(script=[{"tool_calls": [{"id": "r1", "name": "refund",
                                                          "args": {"order_id": "A-9"}}]}]),
                   model="m", tools=[refund])
    result = await Sequence(("first", first), ("second", second)).run("Handle A-9")
    texts = {str(backtrack(source)) for source in (result, _reloaded(result))}
    assert len(texts) == 1
    chain = backtrack(_reloaded(result))
    assert chain.pause is not None and chain.pause.scope.startswith("second")
    assert chain.hops[0].text.startswith("second/tool_calls#")
    assert [hop.kind for hop in chain.hops] == ["PAUSED", "READ", "FROM", "READ", "LANDED",
                                                "ALLOWED", "BORN"]
    assert "the answer of member 'first'" in chain.hops[2].text
    assert chain.suspect is not None and chain.suspect.id == "lost"
