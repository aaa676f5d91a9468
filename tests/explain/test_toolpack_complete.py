"""The toolpack, complete: find_context_errors, backtrack, read_narrative and inspect_tool_run
answer from the recording (capped, redaction-safe), and self_explain sums a run up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, ProviderError, Tracing, define_fact, tool
from agentfootprint.explain import self_explain, trace_debug_agent, trace_toolpack
from agentfootprint.explain._toolpack import TRACE_TOOL_NAMES, call_trace_tool
from agentfootprint.flow import flow_chart
from agentfootprint.flow._redact import RedactionPolicy
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore, trace

SECRET = "inner-secret-Z93"


@tool
def balance(account: str) -> str:
    """The balance of an account."""
    return json.dumps({"account": account, "balance": 120.00, "currency": "EUR"})


def _call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "args": args}]}


async def _contradicting_run(**tracing: Any) -> Any:
    fact = define_fact(id="house-currency", data="We always quote amounts in EUR.")
    agent = Agent(provider=mock(script=[_call("c1", "balance", account="ACC-1"),
                                        "Your balance is 250.00 EUR."]),
                  model="m", tools=[balance], context=[fact], tracing=Tracing(**tracing))
    return await agent.run("What is my balance?")


async def _nested_run() -> Any:
    @tool
    def ledger(account: str) -> str:
        """The ledger of an account."""
        return f"ledger of {account}: 3 entries"

    inner = Agent(provider=mock(script=[_call("i1", "ledger", account="ACC-9"),
                                        "ACC-9 has 3 ledger entries."]),
                  model="m", name="auditor", tools=[ledger])
    outer = Agent(provider=mock(script=[_call("o1", "audit", request="check ACC-9"),
                                        "The auditor found 3 entries."]),
                  model="m", tools=[inner.as_tool(name="audit", description="Ask the auditor."),
                                    balance])
    return await outer.run("Audit ACC-9")


def test_the_pack_holds_eleven_tools_each_capped() -> None:
    run = flow_chart("Only", lambda s: s.__setitem__("x", 1), id="only").build().run_sync({})
    tools = trace_toolpack(run)
    assert [t.name for t in tools] == list(TRACE_TOOL_NAMES)
    assert len(tools) == 11
    assert {"find_context_errors", "backtrack", "inspect_tool_run", "read_narrative"} <= {
        t.name for t in tools}
    assert all("capped at 2000 chars" in t.description for t in tools)


async def test_find_context_errors_reports_the_contradiction_and_the_ledger() -> None:
    tools = trace_toolpack(await _contradicting_run())
    text = call_trace_tool(tools, "find_context_errors")
    assert text.startswith("CONTEXT ERRORS — 1 finding(s) from 1 of 4 checks")
    assert "The answer says balance is 250.00, but the tool 'balance' result it was given " \
           "says 120.0." in text
    assert "dangling-tool-offer                COULD NOT RUN — no grounds declared" in text
    one = call_trace_tool(tools, "find_context_errors", {"check": "dangling-tool-offer"})
    assert one.startswith("dangling-tool-offer: 0 finding(s)") and "COULD NOT RUN" in one
    bad = call_trace_tool(tools, "find_context_errors", {"check": "made-up"})
    assert bad.startswith("Invalid arguments for tool 'find_context_errors'")


async def test_backtrack_names_the_chain_and_corrects_an_unknown_suspect() -> None:
    tools = trace_toolpack(await _contradicting_run())
    text = call_trace_tool(tools, "backtrack")
    assert text.startswith('ANSWER   "Your balance is 250.00 EUR."')
    assert "\nREAD     call_llm#" in text and "\nBORN     " in text
    assert "evidence, not a cause" in text
    fact = call_trace_tool(tools, "backtrack", {"suspect": "house-currency"})
    assert "fact 'house-currency'" in fact and "evidence, not a cause" not in fact
    wrong = call_trace_tool(tools, "backtrack", {"suspect": "no-such-source"})
    assert wrong.startswith("unknown suspect: no source by that id reached the answering call")
    assert "house-currency" in wrong and "no-such-source" not in wrong
    flow = flow_chart("Only", lambda s: s.__setitem__("x", 1), id="only").build().run_sync({})
    assert "this run made no LLM call" in call_trace_tool(trace_toolpack(flow), "backtrack")


async def test_read_narrative_pages_by_line() -> None:
    tools = trace_toolpack(await _contradicting_run())
    first = call_trace_tool(tools, "read_narrative", {"max_lines": 5})
    lines = first.splitlines()
    total = int(lines[0].rsplit(" of ", 1)[1])
    assert lines[0] == f"NARRATIVE lines 0–4 of {total}" and total > 5
    assert lines[1].startswith("   0 ") and lines[-1] == "more: read_narrative(from_line=5)"
    nxt = call_trace_tool(tools, "read_narrative", {"from_line": 5, "max_lines": 5})
    assert nxt.splitlines()[1].startswith("   5 ")
    last = call_trace_tool(tools, "read_narrative", {"from_line": total - 1})
    assert last.endswith("(end of narrative)")
    past = call_trace_tool(tools, "read_narrative", {"from_line": total + 3})
    assert past.startswith(f"from_line={total + 3} is past the end")


async def test_inspect_tool_run_descends_into_the_agent_used_as_a_tool() -> None:
    result = await _nested_run()
    tools = trace_toolpack(Recording.from_json(Recording.of(result).to_json()))
    outer_view = call_trace_tool(tools, "inspect_tool_call", {"tool_call_id": "o1"})
    assert "i1" not in outer_view  # the outer call alone does not show the inner run's calls
    assert f"inside: agent run {result.recording.state[trace.SUB_RUNS]['o1']['run_id']} — " \
           "inspect_tool_run('o1') shows its steps" in outer_view
    assert "⚠ boundary" not in outer_view
    text = call_trace_tool(tools, "inspect_tool_run", {"tool_call_id": "o1"})
    assert text.startswith("INNER RUN ") and "agent tool 'audit', called by o1" in text
    assert "LLM CALLS (2): call_llm#" in text
    assert "- i1 'ledger' args {\"account\": \"ACC-9\"} → success: \"ledger of ACC-9: 3 " \
           "entries\"" in text
    assert 'ANSWER: "ACC-9 has 3 ledger entries."' in text
    inner_call = call_trace_tool(tools, "inspect_tool_run",
                                 {"tool_call_id": "o1", "inner_tool_call_id": "i1"})
    assert "TOOL CALL i1 — tool 'ledger'" in inner_call
    step = call_trace_tool(tools, "inspect_tool_run",
                           {"tool_call_id": "o1", "runtime_stage_id": "finalize"})
    assert "STEP finalize#" in step
    assert "inspect_tool_call('o1')" not in step
    assert call_trace_tool(tools, "trace_node", {"runtime_stage_id": "ledger"}).startswith(
        "unknown runtime_stage_id")  # inner ids are not outer ids
    plain = call_trace_tool(trace_toolpack(await _contradicting_run()), "inspect_tool_run",
                            {"tool_call_id": "c1"})
    assert plain.startswith("tool call c1 ('balance') did not run an agent")
    unknown = call_trace_tool(tools, "inspect_tool_run", {"tool_call_id": "zz"})
    assert unknown == ("unknown tool_call_id for an inner run. Tool calls that ran an agent "
                       "(1): o1 (audit).")


async def test_whole_run_tools_refuse_when_the_reader_masks_what_the_run_left_readable(
        ) -> None:
    result = await _contradicting_run()
    tools = trace_toolpack(result, redaction=RedactionPolicy(keys=["history"]))
    for name in ("find_context_errors", "backtrack", "read_narrative"):
        text = call_trace_tool(tools, name)
        assert text.startswith(f"⚠ {name} quotes the run's answer"), text
        assert "120" not in text and "ACC-1" not in text
    nested = trace_toolpack(await _nested_run(), redaction=RedactionPolicy(keys=["history"]))
    inner = call_trace_tool(nested, "inspect_tool_run",
                            {"tool_call_id": "o1", "inner_tool_call_id": "i1"})
    assert "3 entries" not in inner and "[REDACTED]" in inner


async def test_self_explain_sums_up_answer_chain_integrity_and_proof(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    result = await _contradicting_run(run_store=store)
    text = self_explain(result)
    lines = text.splitlines()
    assert lines[0] == "ANSWER: 'Your balance is 250.00 EUR.'"
    assert lines[1].startswith("RESTS ON (backtrack;") and "not a proven cause" in lines[1]
    assert any(line.startswith("  READ     call_llm#") for line in lines)
    assert "INTEGRITY: 1 contradiction(s) in the run:" in text
    assert "  - answer-contradicts-source: The answer says balance is 250.00" in text
    assert "⚠ 3 check(s) could not run" in text
    assert "PROOF: not proven yet — nothing above is a cause. Prove it:" in text
    assert f"  agentfootprint prove {result.run_id} --budget" in text
    store.add_proof(result.run_id, {"kind": "localize", "suspects": [], "causes": [{
        "kind": "single", "verdict": "CAUSAL", "members": ["house-currency"],
        "labels": ["fact 'house-currency'"], "why": "flipped every time"}]})
    kept = self_explain(result)
    assert "PROOF (kept with the run):" in kept and "not proven yet" not in kept
    quiet = self_explain(flow_chart("Only", lambda s: s.__setitem__("x", 1), id="only").build()
                         .run_sync({}))
    assert "INTEGRITY: ⚠ no check could run — no evidence either way" in quiet
    store.close()


def test_a_failed_run_explains_its_error_and_has_nothing_to_prove(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        agent = Agent(provider=mock(script=[
            _call("c1", "balance", account="ACC-1"),
            ProviderError("upstream 503: overloaded", status=503, provider="mock")]),
            model="m", tools=[balance], tracing=Tracing(run_store=store))
        with pytest.raises(ProviderError):
            agent.run_sync("balance?")
        recording = store.load(store.list()[0].run_id)
    text = self_explain(recording)
    assert text.startswith("ANSWER: none — the run failed: ")
    assert "upstream 503" in text and "\nWHERE IT FAILED:\n  FAILED" in text
    assert text.endswith("PROOF: nothing to prove — the run gave no model answer.")


async def test_a_debug_agent_calls_the_new_tools_and_reads_their_answers() -> None:
    """A scripted debugger: find_context_errors, then backtrack, then its verdict."""
    run = await _contradicting_run()
    debugger = trace_debug_agent(run, mock(script=[
        _call("d1", "find_context_errors"), _call("d2", "backtrack"),
        "CULPRIT: call_llm#12 — the answer contradicts tool call c1."]), "mock-debugger")
    result = await debugger.run("Why is the balance wrong?")
    outputs = [m["content"] for m in result.history if m["role"] == "tool"]
    assert outputs[0].startswith("CONTEXT ERRORS — 1 finding(s)")
    assert outputs[1].startswith('ANSWER   "Your balance is 250.00 EUR."')
    assert result.content.startswith("CULPRIT: call_llm#12")


async def test_an_inner_run_whose_recording_was_not_kept_says_so() -> None:
    inner = Agent(provider=mock(reply="inner answer"), model="m", name="helper")
    outer = Agent(provider=mock(script=[_call("o1", "ask", request="hi"), "done"]), model="m",
                  tools=[inner.as_tool(name="ask", description="Ask the helper.")],
                  tracing=Tracing(redaction=RedactionPolicy(keys=[trace.SUB_RECORDINGS])))
    tools = trace_toolpack(await outer.run("go"))
    text = call_trace_tool(tools, "inspect_tool_run", {"tool_call_id": "o1"})
    assert "its recording was not kept with this run" in text
    assert "inner answer" not in text
    assert "its recording was not kept" in call_trace_tool(tools, "inspect_tool_call",
                                                            {"tool_call_id": "o1"})
