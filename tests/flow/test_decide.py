"""decide() and select(): rule evaluation, evidence, and how choices read in the narrative."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from agentfootprint.errors import ChartBuildError, ConfigurationError, RunError, StageError
from agentfootprint.flow import Decision, Selection, decide, flow_chart, select
from agentfootprint.flow._decide import OPERATORS


def noop(scope: Any) -> None:
    return None


async def decision_of(rules: Sequence[Any], state: dict[str, Any], default: str = "fallback"
                      ) -> dict[str, Any]:
    """Run a one-decider chart built from ``rules`` and return its recorded decision."""
    branches = {r["then"] for r in rules} | {default}
    builder = flow_chart("Start", noop).decide("Route", rules=rules, default=default)
    for branch in sorted(branches):
        builder.branch(branch, branch.title(), noop)
    run = await builder.end().build().run(state=state)
    decision = run.records[1].decision
    assert decision is not None
    return decision


async def evaluate_with(fn: Any, state: dict[str, Any]) -> Any:
    """Call ``fn(scope)`` inside a stage and return what it returned."""
    run = await flow_chart("Eval", fn).build().run(state=state)
    return run.output


def condition(op: str, threshold: Any) -> list[dict[str, Any]]:
    return [{"when": {"x": {op: threshold}}, "then": "hit"}]


# -- operators --------------------------------------------------------------------------------


def test_operator_table_is_complete() -> None:
    """Exactly the eight documented operators exist."""
    assert set(OPERATORS) == {"eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in"}


@pytest.mark.parametrize(
    ("op", "threshold", "actual", "expected"),
    [
        ("eq", 5, 5, True),
        ("eq", 5, 6, False),
        ("eq", "a", "a", True),
        ("ne", 5, 6, True),
        ("ne", 5, 5, False),
        ("gt", 5, 6, True),
        ("gt", 5, 5, False),
        ("gte", 5, 5, True),
        ("gte", 5, 4, False),
        ("lt", 5, 4, True),
        ("lt", 5, 5, False),
        ("lte", 5, 5, True),
        ("lte", 5, 6, False),
        ("in", ["a", "b"], "a", True),
        ("in", ["a", "b"], "c", False),
        ("in", "abc", "a", False),
        ("not_in", ["a", "b"], "c", True),
        ("not_in", ["a", "b"], "a", False),
        ("not_in", "abc", "a", True),
    ],
)
async def test_each_operator(op: str, threshold: Any, actual: Any, expected: bool) -> None:
    """Each operator compares the state value to the threshold as documented."""
    decision = await decision_of(condition(op, threshold), {"x": actual})
    assert decision["chosen"] == ("hit" if expected else "fallback")
    (cond,) = decision["evidence"]["rules"][0]["conditions"]
    assert cond["result"] is expected
    assert cond["op"] == op
    assert cond["threshold"] == threshold


async def test_conditions_are_anded_across_keys_and_ops() -> None:
    """All keys and all operators of a filter must hold for the rule to match."""
    rules = [{"when": {"a": {"gt": 1, "lt": 10}, "b": {"eq": "yes"}}, "then": "hit"}]
    assert (await decision_of(rules, {"a": 5, "b": "yes"}))["chosen"] == "hit"
    assert (await decision_of(rules, {"a": 5, "b": "no"}))["chosen"] == "fallback"
    missed = await decision_of(rules, {"a": 50, "b": "yes"})
    assert missed["chosen"] == "fallback"
    results = [c["result"] for c in missed["evidence"]["rules"][0]["conditions"]]
    assert results == [True, False, True]


async def test_empty_filter_never_matches() -> None:
    """An empty filter is not vacuously true: it never matches."""

    def route(scope: Any) -> Decision:
        return decide(scope, [{"when": {}, "then": "hit"}], default="fallback")

    decision = await evaluate_with(route, {})
    assert decision.branch == "fallback"
    assert decision.evidence["rules"][0]["matched"] is False
    assert decision.evidence["rules"][0]["conditions"] == []


@pytest.mark.parametrize(("when", "message"), [
    ({"x": 5}, r"key 'x' needs \{op: value\}, e.g. \{'eq': 5\}"),
    ({"x": {"about": 5}}, "unknown operator 'about' on 'x'; use one of eq"),
])
async def test_a_malformed_rule_is_refused_at_run_time(when: Any, message: str) -> None:
    """decide() given its rules at run time checks them as the builder does at build time:
    a misspelt operator or a bare value is a mistake in the code, not a non-match (the
    reference records it as false with a console warning; here it fails the step)."""

    def route(scope: Any) -> Decision:
        return decide(scope, [{"when": when, "then": "hit"}], default="fallback")

    with pytest.raises(StageError) as caught:
        await evaluate_with(route, {"x": 5})
    assert isinstance(caught.value.__cause__, ConfigurationError)
    assert re.search(message, str(caught.value.__cause__))
    with pytest.raises(ConfigurationError, match="must be a dict with 'when' and 'then'"):
        decide(None, [{"if": {"x": {"eq": 1}}, "then": "hit"}], default="no")


async def test_a_key_the_state_does_not_hold_fails_the_step_naming_the_keys() -> None:
    """A filter on an absent key (a typo, most often) is refused with the keys there are and
    the nearest one, never read as a non-match that sends the run down the default branch."""
    for op, threshold in (("eq", 1), ("ne", 1), ("not_in", [1]), ("lt", 5)):
        with pytest.raises(StageError) as caught:
            await decision_of([{"when": {"credit_scor": {op: threshold}}, "then": "hit"}],
                              {"credit_score": 700, "amount": 5})
        cause = caught.value.__cause__
        assert isinstance(cause, ConfigurationError)
        assert str(cause) == (
            "rule 0 reads 'credit_scor', which the state does not hold (did you mean "
            "'credit_score'?) (keys: 'amount', 'credit_score'); fix the key, or write it before "
            "this step (None when it may be absent)")
    decision = await decision_of(condition("ne", 1), {"x": None})  # written as None: a value
    assert decision["chosen"] == "hit"


def test_a_rule_with_an_unknown_key_is_refused() -> None:
    """A misspelt rule key ('lable', 'than') is named with the keys a rule has."""
    with pytest.raises(ChartBuildError, match=r"rule 0 has unknown key 'lable' \(did you mean "
                                              r"'label'\?\); a rule's keys are 'when', 'then'"):
        _loan_chart([{"when": {"x": {"eq": 1}}, "then": "reject", "lable": "X"}])


async def test_type_errors_make_the_condition_false() -> None:
    """Comparing incomparable types (str > int, None < int) is false, not an error."""
    for actual in ("text", None, [1]):
        decision = await decision_of(condition("gt", 5), {"x": actual})
        assert decision["chosen"] == "fallback"
        assert decision["evidence"]["rules"][0]["conditions"][0]["result"] is False


# -- first match vs all matches ---------------------------------------------------------------


async def test_decide_takes_the_first_matching_rule() -> None:
    """decide() picks the first matching rule and stops evaluating after it."""
    rules = [
        {"when": {"x": {"gt": 100}}, "then": "huge"},
        {"when": {"x": {"gt": 10}}, "then": "big", "label": "Big"},
        {"when": {"x": {"gt": 1}}, "then": "small"},
    ]
    decision = await decision_of(rules, {"x": 50})
    assert decision["chosen"] == "big"
    evaluated = decision["evidence"]["rules"]
    assert [r["rule"] for r in evaluated] == [0, 1]
    assert [r["matched"] for r in evaluated] == [False, True]


async def test_select_takes_every_matching_rule_once_in_order() -> None:
    """select() evaluates every rule and returns each matching branch once, in rule order."""

    def pick(scope: Any) -> Selection:
        return select(scope, [
            {"when": {"x": {"gt": 1}}, "then": "b"},
            {"when": {"x": {"gt": 100}}, "then": "c"},
            {"when": {"x": {"lt": 10}}, "then": "a"},
            {"when": {"x": {"gt": 2}}, "then": "b"},
        ])

    selection = await evaluate_with(pick, {"x": 5})
    assert selection.branches == ("b", "a")
    assert selection.evidence["selected"] == ["b", "a"]
    assert [r["matched"] for r in selection.evidence["rules"]] == [True, False, True, True]


async def test_select_with_no_match_selects_nothing() -> None:
    """A selector whose rules all miss runs no branch and continues to its next."""
    chart = (
        flow_chart("Start", noop)
        .select("Pick", rules=[{"when": {"x": {"gt": 1}}, "then": "a"}])
        .branch("a", "A", noop)
        .end()
        .then("After", noop)
        .build()
    )
    run = await chart.run(state={"x": 0})
    assert [r.stage_id for r in run.records] == ["Start", "Pick", "After"]
    assert run.records[1].decision["selected"] == []


# -- function rules ---------------------------------------------------------------------------


async def test_function_rule_captures_its_reads_as_evidence() -> None:
    """A predicate rule records every key it read, with the value summary, as inputs."""
    rules = [{"when": lambda s: s["score"] > 5 and s.get("vip", False), "then": "vip",
              "label": "VIP"}]
    decision = await decision_of(rules, {"score": 7, "vip": True})
    assert decision["chosen"] == "vip"
    (rule,) = decision["evidence"]["rules"]
    assert rule["type"] == "function"
    assert rule["inputs"] == [{"key": "score", "value": "7"}, {"key": "vip", "value": "True"}]


async def test_a_predicate_that_raises_fails_the_step() -> None:
    """A predicate that raises is an error naming the rule, never a non-match that lets a
    later rule or the default branch run."""
    rules = [
        {"when": lambda s: 1 / 0, "then": "broken"},
        {"when": {"x": {"eq": 1}}, "then": "ok"},
    ]
    with pytest.raises(StageError) as caught:
        await decision_of(rules, {"x": 1})
    cause = caught.value.__cause__
    assert isinstance(cause, RunError) and isinstance(cause.__cause__, ZeroDivisionError)
    assert str(cause).startswith("rule 0 (to 'broken') raised ZeroDivisionError: division by "
                                 "zero; fix its predicate")


async def test_rule_reads_are_tracked_on_the_decider_record() -> None:
    """Filter and predicate reads are ordinary tracked reads of the decider step."""
    rules = [
        {"when": {"a": {"gt": 100}}, "then": "x"},
        {"when": lambda s: s["b"] == 1, "then": "y"},
    ]
    builder = flow_chart("Start", noop).decide("Route", rules=rules, default="x")
    chart = builder.branch("x", "X", noop).branch("y", "Y", noop).end().build()
    run = await chart.run(state={"a": 1, "b": 1})
    assert run.records[1].reads == ("a", "b")


# -- evidence ---------------------------------------------------------------------------------


async def test_decision_evidence_structure() -> None:
    """Decision evidence: chosen, default, and per rule index, branch, type, label, conditions."""
    rules = [{"when": {"credit_score": {"lt": 620}}, "then": "reject", "label": "Low credit"}]
    decision = await decision_of(rules, {"credit_score": 580}, default="approve")
    assert decision == {
        "chosen": "reject",
        "evidence": {
            "chosen": "reject",
            "default": "approve",
            "rules": [{
                "rule": 0,
                "branch": "reject",
                "matched": True,
                "label": "Low credit",
                "type": "filter",
                "conditions": [{
                    "key": "credit_score", "op": "lt", "threshold": 620, "actual": "580",
                    "result": True,
                }],
            }],
        },
    }
    assert json.loads(json.dumps(decision)) == decision


async def test_selection_evidence_structure() -> None:
    """Selection evidence: selected plus every rule's evidence, stored on the selector record."""
    chart = (
        flow_chart("Start", noop)
        .select("Pick", rules=[
            {"when": {"x": {"gt": 1}}, "then": "a", "label": "Big x"},
            {"when": {"x": {"gt": 9}}, "then": "b"},
        ])
        .branch("a", "A", noop)
        .branch("b", "B", noop)
        .end()
        .build()
    )
    run = await chart.run(state={"x": 5})
    decision = run.records[1].decision
    assert decision["selected"] == ["a"]
    evidence = decision["evidence"]
    assert evidence["selected"] == ["a"]
    assert [(r["rule"], r["branch"], r["matched"]) for r in evidence["rules"]] == [
        (0, "a", True), (1, "b", False),
    ]
    assert json.loads(json.dumps(decision)) == decision


async def test_collection_thresholds_are_recorded_as_json_lists() -> None:
    """An in/not_in threshold given as a set or tuple is recorded as a JSON list."""
    rules = [
        {"when": {"x": {"in": {"b", "a"}}}, "then": "hit"},
    ]
    decision = await decision_of(rules, {"x": "a"})
    assert decision["chosen"] == "hit"
    (cond,) = decision["evidence"]["rules"][0]["conditions"]
    assert sorted(cond["threshold"]) == ["a", "b"]
    assert json.loads(json.dumps(decision)) == decision

    by_tuple = await decision_of([{"when": {"x": {"not_in": ("a", "b")}}, "then": "hit"}],
                                 {"x": "c"})
    assert by_tuple["evidence"]["rules"][0]["conditions"][0]["threshold"] == ["a", "b"]


async def test_decision_event_carries_the_evidence() -> None:
    """The decision event's data is the recorded decision, evidence included."""
    seen: list[Any] = []

    class Rec:
        def on_decision(self, event: Any) -> None:
            seen.append(event.data)

    rules = [{"when": {"x": {"eq": 1}}, "then": "a"}]
    chart = flow_chart("Start", noop).decide("Route", rules=rules, default="a").branch(
        "a", "A", noop
    ).end().build()
    run = await chart.run(state={"x": 1}, recorders=[Rec()])
    assert seen == [run.records[1].decision]
    assert seen[0]["evidence"]["rules"][0]["matched"] is True


# -- narrative --------------------------------------------------------------------------------


def _loan_chart(rules: list[dict[str, Any]]) -> Any:
    return (
        flow_chart("Receive", noop)
        .decide("Route", rules=rules, default="approve")
        .branch("reject", "Reject", noop)
        .branch("approve", "Approve", noop)
        .end()
        .build()
    )


async def test_decision_narrative_text() -> None:
    """A matched filter rule reads: It evaluated "<label>": key actual op threshold ✓, and chose."""
    chart = _loan_chart([
        {"when": {"credit_score": {"lt": 620}}, "then": "reject", "label": "Low credit"},
    ])
    run = await chart.run(state={"credit_score": 580})
    assert (
        '  [Condition]: It evaluated "Low credit": credit_score 580 lt 620 ✓, and chose Reject.'
        in run.narrative().splitlines()
    )


async def test_decision_narrative_without_label_names_the_rule() -> None:
    """An unlabeled rule is named by its index; multiple conditions are listed."""
    chart = _loan_chart([{"when": {"score": {"gte": 1, "lte": 9}}, "then": "reject"}])
    run = await chart.run(state={"score": 3})
    assert (
        "  [Condition]: It evaluated rule 0: score 3 gte 1 ✓, score 3 lte 9 ✓, and chose Reject."
        in run.narrative().splitlines()
    )


async def test_decision_narrative_for_a_function_rule() -> None:
    """A matched predicate rule reads: It examined "<label>": key=value, and chose <name>."""
    chart = _loan_chart([{"when": lambda s: s["flag"], "then": "reject", "label": "Flagged"}])
    run = await chart.run(state={"flag": True})
    assert (
        '  [Condition]: It examined "Flagged": flag=True, and chose Reject.'
        in run.narrative().splitlines()
    )


async def test_no_match_narrative_falls_back_to_default() -> None:
    """No matching rule reads: No rules matched, fell back to default: <name>."""
    chart = _loan_chart([
        {"when": {"credit_score": {"lt": 620}}, "then": "reject", "label": "Low credit"},
    ])
    run = await chart.run(state={"credit_score": 700})
    assert (
        "  [Condition]: No rules matched, fell back to default: Approve."
        in run.narrative().splitlines()
    )


async def test_no_match_narrative_counts_thrown_rules() -> None:
    """Rules recorded with an error (a decider's own evidence) are counted in the fallback
    sentence."""
    def route(scope: Any) -> Decision:
        rule = {"rule": 0, "branch": "reject", "matched": False, "error": "KeyError: 'x'"}
        return Decision("approve", {"chosen": "approve", "default": "approve", "rules": [rule]})

    chart = (flow_chart("Receive", noop).decide("Route", route)
             .branch("reject", "Reject", noop).branch("approve", "Approve", noop).end().build())
    run = await chart.run()
    assert (
        "  [Condition]: No rules matched (1 rule threw errors), fell back to default: Approve."
        in run.narrative().splitlines()
    )


async def test_plain_decider_narrative() -> None:
    """A decider returning a bare branch id reads: A decision was made ... <name>."""
    chart = flow_chart("Start", noop).decide("Route", lambda s: "b").branch(
        "a", "Alpha", noop
    ).branch("b", "Beta", noop).end().build()
    run = await chart.run()
    assert (
        "  [Condition]: A decision was made, and the path taken was Beta."
        in run.narrative().splitlines()
    )


async def test_selector_narrative() -> None:
    """A selector reads: [Selected]: n of total paths selected: id "label" (conditions); ..."""
    chart = (
        flow_chart("Start", noop)
        .select("Pick", rules=[
            {"when": {"x": {"gt": 1}}, "then": "a", "label": "Big x"},
            {"when": lambda s: s["y"] == 2, "then": "b"},
            {"when": {"x": {"eq": 1}}, "then": "c"},
        ])
        .branch("a", "A", noop)
        .branch("b", "B", noop)
        .branch("c", "C", noop)
        .end()
        .build()
    )
    run = await chart.run(state={"x": 5, "y": 2})
    assert (
        '  [Selected]: 2 of 3 paths selected: a "Big x" (x 5 gt 1 ✓); b (y=2).'
        in run.narrative().splitlines()
    )


async def test_selector_narrative_without_evidence_uses_names() -> None:
    """A selector returning plain ids lists the chosen branch names."""
    chart = flow_chart("Start", noop).select("Pick", lambda s: ["a"]).branch(
        "a", "Alpha", noop
    ).branch("b", "Beta", noop).end().build()
    run = await chart.run()
    assert "  [Selected]: 1 of 2 paths selected: Alpha." in run.narrative().splitlines()
