"""Context integrity: each check fires on a real run that contradicts itself, stays quiet on a
clean one, and the disposition ledger tells "found nothing" from "could not run"."""

from __future__ import annotations

import json
from typing import Any

from agentfootprint import Agent, define_fact, define_instruction, define_skill, tool
from agentfootprint.agent import sliding_window
from agentfootprint.explain import ContextErrorReport, find_context_errors
from agentfootprint.explain._claims import claims_in
from agentfootprint.explain._integrity import CHECKS
from agentfootprint.flow import flow_chart
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, trace

PARKED, DANGLING, CONTRADICTS, AGAINST = CHECKS
GROUNDS = {"refund": ["lookup_order"]}


@tool
def balance(account: str) -> str:
    """The balance of an account."""
    return json.dumps({"account": account, "balance": 120.00, "currency": "EUR"})


@tool
def lookup_order(order: str) -> str:
    """Look up an order."""
    return json.dumps({"order": order, "total": 40})


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def _call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "args": args}]}


def _status(report: ContextErrorReport, check: str) -> str:
    return next(d.status for d in report.dispositions if d.check == check)


def _reason(report: ContextErrorReport, check: str) -> str:
    return next(d.reason for d in report.dispositions if d.check == check)


# -- (c) the answer contradicts the tool result or fact it was given ---------------------------


async def _balance_run(answer: str) -> Any:
    agent = Agent(provider=mock(script=[_call("c1", "balance", account="ACC-1"), answer]),
                  model="m", tools=[balance])
    return await agent.run("What is my balance?")


async def test_an_answer_contradicting_its_tool_result_is_found_with_its_sources() -> None:
    result = await _balance_run("Your balance is 250.00 EUR.")
    report = find_context_errors(result)
    [finding] = report.of(CONTRADICTS)
    assert finding.severity == "error"
    assert "tool_call:c1" in finding.sources
    assert any(s.startswith("step:call_llm#") for s in finding.sources)
    assert finding.evidence == "answer: balance = 250.00; tool 'balance' result: balance = 120.0"
    assert finding.explanation == ("The answer says balance is 250.00, but the tool 'balance' "
                                   "result it was given says 120.0.")
    assert _status(report, CONTRADICTS) == "found"
    assert report.run_id == result.run_id
    # the same from the recording, reloaded in another process
    reloaded = find_context_errors(Recording.from_json(Recording.of(result).to_json()))
    assert reloaded.findings == report.findings


async def test_an_answer_agreeing_with_its_tool_result_is_quiet_and_says_it_ran() -> None:
    report = find_context_errors(await _balance_run("Your balance is 120 EUR."))
    assert report.of(CONTRADICTS) == ()
    assert _status(report, CONTRADICTS) == "nothing"
    assert _reason(report, CONTRADICTS).startswith("compared 1 stated value(s)")


async def test_an_answer_contradicting_a_fact_is_found() -> None:
    fact = define_fact(id="refund-policy", data="Refund window: 30 days from delivery.")
    agent = Agent(provider=mock(reply="Sure. The refund window is 14 days."), model="m",
                  context=[fact])
    report = find_context_errors(await agent.run("How long can I return it?"))
    [finding] = report.of(CONTRADICTS)
    assert "injection:refund-policy" in finding.sources
    assert finding.explanation.endswith("the fact 'refund-policy' it was given says 30.")


async def test_an_answer_without_labelled_values_cannot_be_compared_and_says_why() -> None:
    report = find_context_errors(await _balance_run("You have plenty of money."))
    assert _status(report, CONTRADICTS) == "could-not-run"
    assert "states no labelled value" in _reason(report, CONTRADICTS)


def test_what_counts_as_a_stated_value_is_exact() -> None:
    """Labels with : = is/was; numbers, dates and ids; JSON keys; never bare prose."""
    found = [(c.label_text, c.value, c.kind) for c in claims_in(
        "Order id: ORD-7781; the total is $1,240.50 and delivery date = 2024-03-09.")]
    assert found == [("order id", "ORD-7781", "id"), ("total", "$1,240.50", "number"),
                     ("delivery date", "2024-03-09", "date")]
    assert claims_in("I called 3 tools and Paris is the capital.") == []
    assert [(c.label_text, c.value) for c in claims_in('{"a": {"unit_price": 9.5}}')] == [
        ("unit price", "9.5")]


async def test_a_source_giving_one_label_two_values_is_ambiguous_and_never_a_finding() -> None:
    @tool
    def quotes(symbol: str) -> str:
        """Two quotes."""
        return "price: 10 at open; price: 12 at close"

    agent = Agent(provider=mock(script=[_call("q", "quotes", symbol="X"), "The price is 11."]),
                  model="m", tools=[quotes])
    assert find_context_errors(await agent.run("price?")).of(CONTRADICTS) == ()


async def test_a_value_one_of_several_results_gives_is_not_contradicted_by_another() -> None:
    """Two balances were read; the answer quotes one of them: no finding (and a value
    neither gives is ambiguous between them, so no finding either)."""

    @tool
    def account(number: str) -> str:
        """One account."""
        return json.dumps({"balance": {"ACC-1": 120, "ACC-2": 300}[number]})

    async def answer(text: str) -> ContextErrorReport:
        agent = Agent(provider=mock(script=[
            {"tool_calls": [{"id": "a", "name": "account", "args": {"number": "ACC-1"}},
                            {"id": "b", "name": "account", "args": {"number": "ACC-2"}}]},
            text]), model="m", tools=[account])
        return find_context_errors(await agent.run("balances?"))

    quoted = await answer("Your balance is 300 EUR.")
    assert quoted.of(CONTRADICTS) == () and _status(quoted, CONTRADICTS) == "nothing"
    assert (await answer("Your balance is 999 EUR.")).of(CONTRADICTS) == ()


# -- (d) an instruction that fired against its condition ---------------------------------------


def _first_only() -> Any:
    return define_instruction(id="first-only", prompt="Answer in one line.",
                              active_when=lambda ctx: ctx.iteration == 1)


async def _instruction_run(mode: str) -> Any:
    agent = Agent(provider=mock(script=[_call("c1", "balance", account="ACC-1"),
                                        "Your balance is 120 EUR."]),
                  model="m", tools=[balance], context=[_first_only()],
                  react_mode=mode)  # type: ignore[arg-type]
    return await agent.run("balance?")


async def test_a_frozen_prompt_carrying_an_instruction_whose_rule_no_longer_holds_is_found(
        ) -> None:
    """react_mode='classic' keeps call 1's system prompt; at call 2 the rule evaluated false."""
    report = find_context_errors(await _instruction_run("classic"))
    [finding] = report.of(AGAINST)
    assert "injection:first-only" in finding.sources
    assert finding.explanation.startswith("instruction 'first-only' reached call_llm#")
    assert "fired=False ('its rule did not hold')" in finding.evidence


async def test_the_same_instruction_in_a_dynamic_run_is_consistent() -> None:
    report = find_context_errors(await _instruction_run("dynamic"))
    assert report.of(AGAINST) == ()
    assert _status(report, AGAINST) == "nothing"


async def test_a_tool_return_trigger_that_fired_without_the_return_is_found() -> None:
    """Edit the recorded previous batch away: the row says it fired on a return no longer there."""
    after = define_instruction(id="after-balance", prompt="Quote the currency.",
                               on_tool_return="balance")
    agent = Agent(provider=mock(script=[_call("c1", "balance", account="ACC-1"),
                                        "Your balance is 120 EUR."]),
                  model="m", tools=[balance], context=[after])
    recording = Recording.of(await agent.run("balance?"))
    assert find_context_errors(recording).of(AGAINST) == ()
    data = json.loads(recording.to_json())
    for record in data["log"]["records"]:
        for change in record["changes"]:
            if change["key"] == trace.TOOL_RESULTS:
                change["value"] = []
    [finding] = find_context_errors(Recording.model_validate(data)).of(AGAINST)
    assert "fired on a return of 'balance'" in finding.explanation


# -- (b) a tool offered after the results grounding it were evicted ------------------------------


async def _two_turns(*, window: bool, refetch: bool = False) -> tuple[Any, Any]:
    second: list[Any] = [_call("c2", "lookup_order", order="ORD-1")] if refetch else []
    agent = Agent(provider=mock(script=[
        _call("c1", "lookup_order", order="ORD-1"), "Order ORD-1 total is 40.",
        *second, "Noted."]), model="m", tools=[lookup_order, refund],
        window=sliding_window(turns=1) if window else None)
    first = await agent.run("Look up ORD-1")
    return first, await agent.follow_up("Thanks, anything else?")


async def test_a_tool_offered_after_its_grounding_result_left_the_window_is_found() -> None:
    first, second = await _two_turns(window=True)
    assert _status(find_context_errors(first, grounds=GROUNDS), DANGLING) == "nothing"
    report = find_context_errors(second, grounds=GROUNDS)
    [finding] = report.of(DANGLING)
    assert finding.severity == "warning"
    assert {"tool:refund", "tool_call:c1"} <= set(finding.sources)
    assert "evicted every result of 'lookup_order'" in finding.explanation
    assert "(sliding_window)" in finding.evidence


async def test_once_the_grounding_result_is_fetched_again_the_offer_is_grounded() -> None:
    """Turn 2's first call is flagged; after the model re-fetched, the next call is not."""
    _, second = await _two_turns(window=True, refetch=True)
    report = find_context_errors(second, grounds=GROUNDS)
    [finding] = report.of(DANGLING)
    calls = [c for c in second.recording.log.records if c.stage_id == trace.CALL_LLM]
    assert f"step:{calls[0].runtime_stage_id}" in finding.sources
    assert next(d for d in report.dispositions if d.check == DANGLING).checked == 2


async def test_without_window_data_or_grounds_the_check_says_it_could_not_run() -> None:
    _, second = await _two_turns(window=False)
    report = find_context_errors(second, grounds=GROUNDS)
    assert _status(report, DANGLING) == "could-not-run"
    assert _reason(report, DANGLING).startswith("the recording lacks the window data")
    _, windowed = await _two_turns(window=True)
    assert _reason(find_context_errors(windowed), DANGLING).startswith("no grounds declared")


# -- (a) a parked tool still offered -------------------------------------------------------------


async def _procedure_run() -> Any:
    skill = define_skill(id="refunds", description="Refund an order", body="Look up, refund.",
                         tools=[lookup_order, refund],
                         steps=[("lookup_order", "find the order"), ("refund", "refund it")])
    agent = Agent(provider=mock(script=[
        _call("s1", "read_skill", id="refunds"), _call("c1", "lookup_order", order="ORD-1"),
        _call("c2", "refund", order="ORD-1"), "Refunded."]), model="m", context=[skill])
    return await agent.run("Refund ORD-1")


async def test_a_tool_held_by_a_step_procedure_but_offered_is_found() -> None:
    """A real run, then its recording edited so step 1's tool is offered at step 2."""
    recording = Recording.of(await _procedure_run())
    clean = find_context_errors(recording)
    assert clean.of(PARKED) == () and _status(clean, PARKED) == "nothing"
    data = json.loads(recording.to_json())
    lookup_schema: Any = None
    edited = None
    for record in data["log"]["records"]:
        for change in record["changes"]:
            if change["key"] != trace.TOOL_SCHEMAS:
                continue
            names = [s["name"] for s in change["value"]]
            if "lookup_order" in names and lookup_schema is None:
                lookup_schema = change["value"][names.index("lookup_order")]
            elif "refund" in names and "lookup_order" not in names and edited is None:
                change["value"].append(lookup_schema)
                edited = record["runtime_stage_id"]
    assert edited is not None
    report = find_context_errors(Recording.model_validate(data))
    [finding] = report.of(PARKED)
    assert {"tool:lookup_order", "injection:refunds"} <= set(finding.sources)
    assert "held it (it is step 1, the run stood at step 2)" in finding.explanation


async def test_a_run_without_a_procedure_says_nothing_parks_a_tool() -> None:
    report = find_context_errors(await _balance_run("Your balance is 120 EUR."))
    assert _status(report, PARKED) == "could-not-run"
    assert "nothing in this run parks a tool" in _reason(report, PARKED)


# -- the ledger and its renderings -------------------------------------------------------------


async def test_no_check_ran_reads_differently_from_no_findings() -> None:
    run = await flow_chart("Only", lambda s: s.__setitem__("x", 1), id="only").build().run({})
    idle = find_context_errors(run)
    assert not idle.findings and not idle.clean and idle.ran == ()
    assert [d.status for d in idle.dispositions] == ["could-not-run"] * 4
    assert str(idle).startswith("⚠ NO CHECK RAN — this is no evidence either way")
    partial = find_context_errors(await _balance_run("Your balance is 120 EUR."))
    assert str(partial).startswith("No context error found by the 1 of 4 checks that ran; ⚠ 3 "
                                   "could not run")
    assert "ran, found nothing — compared 1" in str(partial)
    assert "COULD NOT RUN — no grounds declared" in str(partial)


async def test_the_report_serialises_its_findings_and_dispositions() -> None:
    report = find_context_errors(await _balance_run("Your balance is 250 EUR."))
    data = json.loads(report.to_json())
    assert [d["check"] for d in data["dispositions"]] == list(CHECKS)
    assert data["findings"][0]["check"] == CONTRADICTS
    assert data["findings"][0]["sources"][1] == "tool_call:c1"
    assert "CONTEXT ERRORS — 1 finding(s) from 1 of 4 checks" in str(report)
