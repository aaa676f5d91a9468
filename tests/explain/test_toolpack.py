"""The trace toolpack: a debugger reads a slice at a time, never a secret, always capped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, Governance, Tracing, tool
from agentfootprint.agent._moments import act, allow
from agentfootprint.explain._toolpack import (
    TRACE_DEBUG_METHODOLOGY,
    TRACE_TOOL_NAMES,
    call_trace_tool,
    trace_debug_agent,
    trace_toolpack,
)
from agentfootprint.flow import Chart, FlowRun, Scope, flow_chart
from agentfootprint.flow._redact import RedactionPolicy
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import Recording, RunStore
from agentfootprint.tools._tool import Tool

SECRET = "SSN-987-65-4321-XQZ"
TOKEN = "tok_live_7f3a9c1e5b"
NOTES = "watchlist-hit-Q77Z"
LEAK_MARKS = (SECRET, "987-65-4321", "4321-XQZ", TOKEN, "7f3a9c1e5b", NOTES, "Q77Z")
LENDERS = ("Northwind Bank", "Contoso Credit", "Fabrikam Finance", "Tailspin Card", "Woodgrove")
APPLICANT = {"name": "Dana Reyes", "annual_income": 84000, "monthly_debt": 1400,
             "requested": 15000, "credit_score": 612, "ssn": SECRET}


# -- a loan pipeline with a planted bug ---------------------------------------------------------


def intake(scope: Scope) -> None:
    raw = scope.args["applicant"]
    scope["applicant"] = {k: raw[k] for k in ("name", "annual_income", "monthly_debt",
                                              "requested", "ssn")}
    scope["ssn"] = raw["ssn"]


def pull_bureau(scope: Scope) -> None:
    scope["bureau_report"] = {
        "subject": scope["applicant"]["name"], "credit_score": scope.args["applicant"][
            "credit_score"],
        "tradelines": [{"account": f"TL-{i:04d}", "lender": LENDERS[i % 5],
                        "opened": f"20{10 + i % 14}-0{1 + i % 9}-15", "balance": 250 * (i % 17),
                        "limit": 1000 + 500 * (i % 7),
                        "status": "current" if i % 11 else "30-days-late",
                        "payment_history": "OK" * 12} for i in range(70)]}


def verify_income(scope: Scope) -> None:
    income = scope["applicant"]["annual_income"]
    scope["income_documents"] = [
        {"kind": "paystub", "month": m, "gross": round(income / 12, 2),
         "employer": "Blue Yonder Airlines", "text": "Regular earnings, federal withholding, "
         "state withholding, medicare, social security, 401k contribution. " * 2}
        for m in range(1, 7)]
    scope["income_verified"] = True


def load_policy(scope: Scope) -> None:
    scope["policy"] = {"product": "prime-personal", "max_dti": 0.36, "min_credit_score": 680}
    scope["min_credit_score"] = 680


def apply_promotion(scope: Scope) -> None:
    scope["promo_banner"] = "Spring offer: 0.5% off APR for returning customers"
    scope["min_credit_score"] = 560  # the planted bug: meant 'promo_min_credit_score'


def compute_dti(scope: Scope) -> None:
    applicant = scope["applicant"]
    scope["dti"] = round(applicant["monthly_debt"] * 12 / applicant["annual_income"], 3)


def check_credit(scope: Scope) -> None:
    scope["credit_ok"] = scope["bureau_report"]["credit_score"] >= scope["min_credit_score"]


def approve(scope: Scope) -> None:
    scope["decision"] = "approve"


def decline(scope: Scope) -> None:
    scope["decision"] = "decline"


def notify(scope: Scope) -> None:
    scope["letter"] = (f"Dear {scope['applicant']['name']}, your application was "
                       f"{scope['decision']}d. " + "Terms and conditions apply. " * 12)


def loan_chart() -> Chart:
    return (
        flow_chart("Intake", intake, id="intake", description="Read the application")
        .then("PullBureau", pull_bureau, id="pull_bureau", description="Fetch the bureau report")
        .then("VerifyIncome", verify_income, id="verify_income", description="Check paystubs")
        .then("LoadPolicy", load_policy, id="load_policy", description="Load the lending policy")
        .then("ApplyPromotion", apply_promotion, id="apply_promotion",
              description="Apply seasonal marketing offers")
        .then("ComputeDTI", compute_dti, id="compute_dti", description="Debt-to-income ratio")
        .then("CheckCredit", check_credit, id="check_credit",
              description="Compare the score with the policy minimum")
        .decide("Adjudicate", id="adjudicate", description="Approve or decline", rules=[
            {"when": {"credit_ok": {"eq": True}, "dti": {"lte": 0.36}}, "then": "approve",
             "label": "credit at or above the minimum and affordable"}], default="decline")
        .branch("approve", "Approve", approve, description="Approve the loan")
        .branch("decline", "Decline", decline, description="Decline the loan")
        .end()
        .then("Notify", notify, id="notify", description="Write the letter")
        .build(description="Loan decision"))


async def loan_run() -> FlowRun:
    return await loan_chart().run({"applicant": APPLICANT},
                                  redaction=RedactionPolicy(keys=["ssn"]))


# -- the scripted debugger ----------------------------------------------------------------------


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def scripted_debugger(request: LLMRequest) -> dict[str, Any] | str:
    """A model that reads each answer and picks its next call from the ids it was shown."""
    seen = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
    last = seen[-1] if seen else ""
    if not seen:
        return _call("run_overview", {})
    if len(seen) == 1:  # the overview lists 'decision' among the keys: who set it?
        assert "decision" in last
        return _call("who_wrote", {"key": "decision"})
    if len(seen) == 2:  # the writer of the wrong decision: slice back from it
        return _call("trace_slice", {"runtime_stage_id": _first(r"last written by (\S+)", last)})
    if len(seen) == 3:  # the question is about a threshold: open the step that fed it
        writer = _first(r"\((\S+#\d+)\) ← via min_credit_score", last)
        return _call("trace_node", {"runtime_stage_id": writer})
    if len(seen) == 4:  # a promotion wrote a credit threshold: was it overwriting the policy?
        return _call("who_wrote", {"key": "min_credit_score"})
    culprit = _first(r"last written by (\S+)", last)
    value = _first(r"\(set\): (\d+)", last)
    policy = _first(r"- \S+ \"LoadPolicy\" \(set\): (\d+)", last)
    return (f"CULPRIT: {culprit} — it overwrote min_credit_score with {value}, replacing the "
            f"policy minimum {policy}, so check_credit passed a 612 score.\n"
            "FIX: write the promotion threshold under its own key.")


def _first(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} not in:\n{text}"
    return found.group(1)


async def test_a_scripted_debugger_finds_the_planted_bug_reading_under_30_percent() -> None:
    """Five bounded calls name the step that overwrote the threshold; ≤ 30 % of the trace read."""
    run = await loan_run()
    recording = Recording.of(run)
    full = len(recording.to_json())
    debugger = trace_debug_agent(recording, mock(respond=scripted_debugger), "mock-debugger")
    result = await debugger.run("Dana Reyes (score 612) was approved although the policy "
                                "minimum is 680. Why?")

    outputs = [m for m in result.history if m["role"] == "tool"]
    calls = [c["name"] for m in result.history for c in m.get("tool_calls", ())]
    read = sum(len(m["content"]) for m in outputs)
    culprit = run.log[run.log.last_writer("min_credit_score")].runtime_stage_id
    assert calls == ["run_overview", "who_wrote", "trace_slice", "trace_node", "who_wrote"]
    assert culprit == "apply_promotion#4"
    assert result.content.startswith(f"CULPRIT: {culprit} ")
    assert "with 560, replacing the policy minimum 680" in result.content
    assert all(len(m["content"]) <= 2000 for m in outputs)
    assert read / full <= 0.30, f"read {read} of {full} chars"
    print(f"\ndebugger read {read} of {full} trace chars = {read / full:.1%}")


# -- redaction ----------------------------------------------------------------------------------


def _secret_chart() -> Chart:
    def seed(scope: Scope) -> None:
        raw = scope.args["applicant"]
        scope["ssn"] = raw["ssn"]
        scope["applicant"] = {"name": raw["name"], "ssn": raw["ssn"]}  # nested, not redacted
        scope["risk_notes"] = [NOTES]  # redacted only by the reader's policy
        scope.emit("kyc.ssn_checked", {"ssn": raw["ssn"]})

    def screen(scope: Scope) -> None:
        scope["screened"] = scope["ssn"] != "" and scope["api_token"] != ""

    inner = flow_chart("Mask", lambda s: s.__setitem__("masked", s["ssn"][:3] + "-***"),
                       id="mask").build()
    return (
        flow_chart("Seed", seed, id="seed", description="Take the applicant")
        .then("Screen", screen, id="screen")
        .subflow("kyc", inner, input=lambda s: {"ssn": s["ssn"]},
                 output=lambda s: {"masked_ssn": s["masked"]})
        .decide("Route", id="route", rules=[
            {"when": {"ssn": {"ne": ""}}, "then": "ok", "label": "has an ssn"},
            {"when": lambda s: s["api_token"] == TOKEN, "then": "ok", "label": "token"}],
            default="stop")
        .branch("ok", "Ok", lambda s: s.__setitem__("done", True))
        .branch("stop", "Stop", lambda s: s.__setitem__("done", False))
        .end()
        .build())


async def _secret_run() -> FlowRun:
    policy = RedactionPolicy(keys=["ssn"], patterns=[r"^api_"], emit_patterns=[r"kyc\."])
    return await _secret_chart().run({"applicant": APPLICANT}, state={"api_token": TOKEN},
                                     redaction=policy)


def _every_answer(tools: list[Tool], recording: Recording) -> list[str]:
    """Every tool, over every step and key, with paging followed to the end."""
    log = recording.commit_log()
    rids = list(dict.fromkeys(r.runtime_stage_id for r in log.records))
    keys = sorted({k for state in log.initial.values() for k in state}
                  | {c.key for r in log.records for c in r.changes})
    keys += ["applicant.ssn", "applicant.name", "ssn.0", SECRET]
    calls: list[tuple[str, dict[str, Any]]] = [("run_overview", {})]
    for query in (SECRET, SECRET[:9], SECRET[-9:], "987-65", TOKEN, NOTES, "Q77Z", "ssn",
                  "api_token", "REDACTED", "applicant", "kyc", "ok", "tok_"):
        calls.append(("find_in_trace", {"query": query, "max_hits": 25}))
    for rid in [*rids, SECRET, "seed", "kyc/mask"]:
        calls += [("trace_node", {"runtime_stage_id": rid}),
                  ("trace_slice", {"runtime_stage_id": rid, "max_nodes": 100})]
        calls += [("trace_slice", {"runtime_stage_id": rid, "key": k}) for k in keys]
    for key in keys:
        calls += [("who_wrote", {"key": key}), ("get_value", {"key": key}),
                  ("get_value", {"key": key, "at": "initial"})]
        for rid in rids:
            calls += [("who_wrote", {"key": key, "at": rid}),
                      ("get_value", {"key": key, "at": rid})]
    calls += [("inspect_tool_call", {"tool_call_id": SECRET}),
              ("inspect_tool_call", {"tool_call_id": "call_1"})]
    answers = []
    for name, args in calls:
        offset = 0
        while True:
            text = call_trace_tool(tools, name, {**args, "offset": offset})
            answers.append(text)
            found = re.search(r"with offset=(\d+) for the next part", text)
            if found is None:
                break
            offset = int(found.group(1))
    return answers


def _assert_no_leak(answers: list[str]) -> None:
    for text in answers:
        low = text.lower()
        for mark in LEAK_MARKS:
            assert mark.lower() not in low, f"{mark!r} leaked in:\n{text}"
        assert "could not answer" not in text, text


async def test_no_redacted_value_appears_in_any_tool_output() -> None:
    """Secrets redacted by the run, nested under a redacted key or declared by the reader are
    absent from every answer of every tool, live and reloaded from JSON."""
    run = await _secret_run()
    assert run.state["ssn"] == SECRET and run.state["api_token"] == TOKEN  # real values exist
    recording = Recording.of(run)
    assert SECRET not in recording.to_json()  # its copy nested under 'applicant' is masked too
    assert NOTES in recording.to_json()  # redacted by the reader's policy only
    reader = RedactionPolicy(keys=["ssn", "risk_notes"])
    for source in (run, Recording.from_json(recording.to_json())):
        tools = trace_toolpack(source, redaction=reader)
        answers = _every_answer(tools, recording)
        assert len(answers) > 250
        _assert_no_leak(answers)
        assert any("[REDACTED]" in a for a in answers)
        overview = call_trace_tool(tools, "run_overview")
        assert "REDACTED KEYS: api_token, risk_notes, ssn" in overview


async def test_an_agents_redacted_tool_calls_and_history_never_surface() -> None:
    """With history and tool calls redacted, a secret the model passed as an argument appears
    in no answer — nor in the recording (emit payloads are scrubbed of redacted values)."""

    @tool
    def balance(account: str) -> str:
        """The balance of an account."""
        return f"balance of {account}: 120.00 EUR"

    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"id": "c1", "name": "balance", "args": {"account": SECRET}}]},
        "Your balance is 120.00 EUR."]), model="m", tools=[balance],
                  tracing=Tracing(redaction=RedactionPolicy(keys=["history", "llm_tool_calls"])))
    result = await agent.run("What is my balance?")
    recording = Recording.of(result)
    assert SECRET not in recording.to_json()
    tools = trace_toolpack(result)
    answers = _every_answer(tools, recording)
    answers += [call_trace_tool(tools, "inspect_tool_call", {"tool_call_id": "c1"})]
    _assert_no_leak(answers)
    assert "tool calls are redacted" in answers[-1]


# -- caps and corrective messages ---------------------------------------------------------------


async def test_every_answer_fits_the_cap_and_pages_reassemble_the_whole() -> None:
    """At a 300-char cap every answer fits; following offsets rebuilds the uncut answer."""
    run = await loan_run()
    small = trace_toolpack(run, max_chars=300)
    whole = trace_toolpack(run, max_chars=1_000_000)
    answers = _every_answer(small, Recording.of(run))
    assert all(len(a) <= 300 for a in answers)
    full = call_trace_tool(whole, "get_value", {"key": "bureau_report"})
    parts, offset = [], 0
    while True:
        text = call_trace_tool(small, "get_value", {"key": "bureau_report", "offset": offset})
        assert len(text) <= 300
        found = re.search(r"\n⚠ truncated: showed chars \d+–(\d+) of (\d+); call "
                          r"get_value\('bureau_report'\) with offset=\d+ for the next part\.$",
                          text)
        if found is None:
            parts.append(re.sub(r"\n\(end of answer: chars \d+–\d+ of \d+\)$", "", text))
            break
        assert int(found.group(2)) == len(full)
        parts.append(text[: found.start()])
        offset = int(found.group(1))
    assert "".join(parts) == full
    assert len(parts) > 10
    past = call_trace_tool(small, "get_value", {"key": "bureau_report", "offset": 10**6})
    assert past.startswith("⚠ offset 1000000 is past the end")


async def test_bad_ids_and_keys_get_corrections_naming_real_ones_never_the_input() -> None:
    """Unknown steps, keys, fields and call ids get a sentence naming real ids to retry with."""
    tools = trace_toolpack(await loan_run())

    def ask(name: str, **args: Any) -> str:
        return call_trace_tool(tools, name, args)

    wrong = ask("trace_node", runtime_stage_id="approve#2")
    assert wrong == ("unknown runtime_stage_id. Stage 'approve' has 1 execution(s): approve#8. "
                     "Retry with one of those ids.")
    assert ask("trace_node", runtime_stage_id="approve").startswith(
        "(stage 'approve' ran once; showing its execution approve#8)\nSTEP approve#8")
    made_up = ask("trace_node", runtime_stage_id="aprove#99-zzz")
    assert "aprove#99-zzz" not in made_up and "Closest ids: approve" in made_up
    key = ask("who_wrote", key="min_score")
    assert key.startswith("no state key by that name") and "Closest keys: min_credit_score" in key
    assert "min_score" not in key.replace("min_credit_score", "")
    field = ask("get_value", key="applicant.zzz_field")
    assert "zzz" not in field and "its fields: name, annual_income" in field
    assert ask("find_in_trace", query="x").startswith("find_in_trace needs a query of at least 2")
    assert ask("find_in_trace", query="no-such-text-anywhere").startswith("No hit for your query")
    not_read = ask("trace_slice", runtime_stage_id="approve#8", key="dti")
    assert not_read.startswith("approve#8 did not read a key by that name; it read: nothing")
    assert ask("inspect_tool_call", tool_call_id="c1") == (
        "this run recorded no tool calls (a flow run: tool call ids exist in agent runs).")
    assert ask("trace_node", runtime_stage_id=42).startswith("Invalid arguments for tool "
                                                             "'trace_node'")
    assert ask("get_value", key="dti", extra=1).startswith("Invalid arguments")
    assert "'key' is required but missing" in ask("who_wrote")


async def test_an_agent_runs_tool_calls_and_looping_stages() -> None:
    """inspect_tool_call joins proposal, rule, outcome and result; loops need a step id."""

    @tool
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"order {order}: shipped"

    def uppercase(call: Any) -> Any:
        order = call.args["order"]
        if not isinstance(order, str):
            return allow()
        return allow({"order": order.upper()}, reason="ids are upper case")

    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"order": "a1"}},
                        {"id": "c2", "name": "lookup", "args": {"order": 5}}]},
        "Shipped."]), model="m", tools=[lookup],
                  governance=Governance(act=[act("before_tool", uppercase, id="upper-ids")]))
    tools = trace_toolpack(await agent.run("where is a1?"))
    first = call_trace_tool(tools, "inspect_tool_call", {"tool_call_id": "c1"})
    assert "proposed by the model at call_llm#5 with args: {\"order\": \"a1\"}" in first
    assert "ran with: {\"order\": \"A1\"} — CHANGED at before_tool by 'upper-ids'" in first
    assert "outcome: ok" in first and 'result: "order A1: shipped"' in first
    assert "duration: ⚠ not recorded" in first and "⚠ boundary" in first
    second = call_trace_tool(tools, "inspect_tool_call", {"tool_call_id": "c2"})
    assert "outcome: invalid arguments (not run)" in second
    unknown = call_trace_tool(tools, "inspect_tool_call", {"tool_call_id": "c9"})
    assert unknown.startswith("unknown tool_call_id. Closest: ")
    assert unknown.endswith("tool calls (2): c1 (lookup) at call_llm#5; c2 (lookup) at call_llm#5.")
    loops = call_trace_tool(tools, "trace_node", {"runtime_stage_id": "call_llm"})
    assert loops.startswith("unknown runtime_stage_id. Stage 'call_llm' has 2 execution(s): "
                            "call_llm#5, call_llm#")


def test_configuration_mistakes_raise_before_any_model_sees_them(tmp_path: Path) -> None:
    """A tiny cap, a run id without a store, an odd source and an unknown tool name raise."""
    run = loan_chart().run_sync({"applicant": APPLICANT})
    with pytest.raises(ConfigurationError, match="max_chars=50 is too small"):
        trace_toolpack(run, max_chars=50)
    with pytest.raises(ConfigurationError, match="needs a run store"):
        trace_toolpack(run.run_id)
    with pytest.raises(ConfigurationError, match="cannot read a trace from dict"):
        trace_toolpack({"run": 1})
    with pytest.raises(ConfigurationError, match="no trace tool 'dump_all'; available: "
                                                 "run_overview, find_in_trace"):
        call_trace_tool(trace_toolpack(run), "dump_all")


# -- recordings reloaded from JSON --------------------------------------------------------------


async def test_a_recording_reloaded_from_json_or_a_run_store_answers_the_same(
        tmp_path: Path) -> None:
    """The tools give byte-identical answers on the live run, its JSON and the run store."""
    run = await loan_run()
    recording = Recording.of(run)
    store = RunStore(tmp_path / "runs.db")
    store.save(recording)
    live = trace_toolpack(run)
    reloaded = trace_toolpack(Recording.from_json(recording.to_json()))
    stored = trace_toolpack(run.run_id, store=store)
    answers = [_every_answer(tools, recording) for tools in (live, reloaded, stored)]
    assert answers[0] == answers[1] == answers[2]
    store.close()


def test_the_debug_agent_holds_only_the_toolpack_and_the_method() -> None:
    """trace_debug_agent is an Agent whose catalog is the seven tools, in order."""
    run = loan_chart().run_sync({"applicant": APPLICANT})
    agent = trace_debug_agent(run, mock(reply="ok"), "m", instruction="Be brief.")
    assert [t.name for t in agent.spec.static_tools] == list(TRACE_TOOL_NAMES)
    assert agent.spec.system == TRACE_DEBUG_METHODOLOGY + "\n\nBe brief."
    assert all("capped at 2000 chars" in t.description for t in agent.spec.static_tools)
