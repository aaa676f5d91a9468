"""The builder: every invalid chart is refused with a message naming the stage and the fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfootprint import ChartBuildError, ConfigurationError
from agentfootprint.flow import Chart, flow_chart
from agentfootprint.flow._builder import FlowBuilder


def noop(scope: Any) -> None:
    return None


def rule(then: str, **when: Any) -> dict[str, Any]:
    return {"when": when or {"x": {"gt": 0}}, "then": then}


# -- build errors -----------------------------------------------------------------------------


def test_chart_build_error_is_a_configuration_error() -> None:
    """ChartBuildError is a ConfigurationError, so callers can catch user mistakes in one place."""
    assert issubclass(ChartBuildError, ConfigurationError)


def test_duplicate_stage_id_is_refused() -> None:
    """A repeated stage id is refused, naming the id, the chart and the id= fix."""
    with pytest.raises(ChartBuildError) as err:
        flow_chart("Load", noop).then("Load", noop)
    message = str(err.value)
    assert "'Load'" in message
    assert "used twice" in message
    assert "id=" in message


def test_duplicate_id_given_explicitly_is_refused() -> None:
    """An explicit id= that collides with an earlier stage id is refused too."""
    with pytest.raises(ChartBuildError, match="'first' is used twice"):
        flow_chart("A", noop, id="first").then("B", noop, id="first")


def test_repeated_names_with_distinct_ids_are_allowed() -> None:
    """Names may repeat as long as ids differ."""
    chart = flow_chart("Step", noop, id="s1").then("Step", noop, id="s2").build()
    assert [chart.nodes[i].name for i in ("s1", "s2")] == ["Step", "Step"]


def test_rule_naming_an_unknown_branch_is_refused() -> None:
    """A declarative rule whose then= is not a branch is refused, listing the real branches."""
    builder = flow_chart("Start", noop).decide(
        "Route", rules=[rule("nowhere")], default="approve"
    ).branch("approve", "Approve", noop)
    with pytest.raises(ChartBuildError) as err:
        builder.end()
    message = str(err.value)
    assert "'Route'" in message
    assert "'nowhere'" in message
    assert "'approve'" in message


def test_rule_with_unknown_operator_is_refused() -> None:
    """A filter with an unknown operator is refused, listing the valid operators."""
    builder = flow_chart("Start", noop).decide(
        "Route", rules=[{"when": {"x": {"bigger": 1}}, "then": "a"}], default="a"
    ).branch("a", "A", noop)
    with pytest.raises(ChartBuildError, match=r"unknown operator 'bigger'.*gte"):
        builder.end()


def test_rules_without_default_are_refused() -> None:
    """A declarative decider without default= is refused, naming the decider and default=."""
    with pytest.raises(ChartBuildError) as err:
        flow_chart("Start", noop).decide("Route", rules=[rule("a")])
    message = str(err.value)
    assert "'Route'" in message
    assert "default=" in message


def test_default_that_is_not_a_branch_is_refused() -> None:
    """A default that names no branch is refused, naming the decider, the default and the fix."""
    builder = flow_chart("Start", noop).decide(
        "Route", rules=[rule("a")], default="zzz"
    ).branch("a", "A", noop)
    with pytest.raises(ChartBuildError) as err:
        builder.end()
    message = str(err.value)
    assert "'Route'" in message
    assert "'zzz'" in message
    assert ".branch('zzz'" in message


def test_fluent_default_that_is_not_a_branch_is_refused() -> None:
    """BranchBuilder.default() naming no branch is refused at end()."""
    builder = flow_chart("Start", noop).decide("Route", lambda s: "a").branch(
        "a", "A", noop
    ).default("b")
    with pytest.raises(ChartBuildError, match="default 'b' is not one of its branches"):
        builder.end()


def test_decider_without_branches_is_refused_at_end() -> None:
    """end() on a decider with no branches is refused, naming the decider and .branch()."""
    with pytest.raises(ChartBuildError) as err:
        flow_chart("Start", noop).decide("Route", lambda s: "a").end()
    assert "'Route'" in str(err.value)
    assert ".branch(" in str(err.value)


def test_decider_without_branches_is_refused_at_build() -> None:
    """build() refuses a decider whose branch list was never filled (end() skipped)."""
    builder = flow_chart("Start", noop)
    builder.decide("Route", lambda s: "a")
    with pytest.raises(ChartBuildError, match=r"decider 'Route' has no branches.*\.branch\("):
        builder.build()


def test_selector_without_branches_is_refused() -> None:
    """A selector needs at least one branch too."""
    with pytest.raises(ChartBuildError, match="selector 'Pick' requires at least one branch"):
        flow_chart("Start", noop).select("Pick", lambda s: []).end()


def test_loop_to_unknown_target_is_refused() -> None:
    """loop_to() to an unknown id is refused, listing the known ids and that targets are ids."""
    with pytest.raises(ChartBuildError) as err:
        flow_chart("Start", noop).then("Work", noop).loop_to("Nowhere")
    message = str(err.value)
    assert "'Nowhere'" in message
    assert "'Work'" in message
    assert "'Start'" in message
    assert "stage ids, not names" in message


def test_loop_to_a_name_instead_of_an_id_is_refused() -> None:
    """loop_to() takes a stage id; the display name of a stage with another id is refused."""
    with pytest.raises(ChartBuildError, match="no stage with id 'Work'"):
        flow_chart("Start", noop).then("Work", noop, id="work").loop_to("Work")


def test_branch_loop_to_a_target_declared_later_is_refused() -> None:
    """A branch may only loop back to a stage declared before it, not to a later sibling."""
    branches = flow_chart("Start", noop).decide("Route", lambda s: "a")
    with pytest.raises(ChartBuildError) as err:
        branches.branch("a", "A", noop, loop_to="b")
    message = str(err.value)
    assert "branch 'a' of decider 'Route'" in message
    assert "declared before it" in message


def test_branch_loop_to_itself_is_refused() -> None:
    """A branch that loops to itself is refused."""
    branches = flow_chart("Start", noop).decide("Route", lambda s: "a")
    with pytest.raises(ChartBuildError, match="cannot loop to itself"):
        branches.branch("a", "A", noop, loop_to="a")


def test_selector_branch_cannot_loop() -> None:
    """A selector branch with loop_to is refused: selected branches run in parallel."""
    branches = flow_chart("Start", noop).select("Pick", lambda s: ["a"])
    with pytest.raises(ChartBuildError) as err:
        branches.branch("a", "A", noop, loop_to="Start")
    message = str(err.value)
    assert "selector 'Pick'" in message
    assert ".end().loop_to()" in message


def test_then_after_loop_to_is_refused() -> None:
    """then() after loop_to() is refused: the new stage would never run."""
    builder = flow_chart("Start", noop).then("Work", noop).loop_to("Start")
    with pytest.raises(ChartBuildError) as err:
        builder.then("After", noop)
    message = str(err.value)
    assert "'Work'" in message
    assert "'After'" in message
    assert "never run" in message


def test_loop_to_twice_is_refused() -> None:
    """A second loop_to() on the same stage is refused: loop_to() must be last."""
    builder = flow_chart("Start", noop).then("Work", noop).loop_to("Start")
    with pytest.raises(ChartBuildError, match="'Work' already continues; loop_to"):
        builder.loop_to("Start")


def test_parallel_after_decider_is_refused() -> None:
    """parallel() straight after a decider is refused, telling to add a stage with then()."""
    builder = flow_chart("Start", noop).decide("Route", lambda s: "a").branch(
        "a", "A", noop
    ).end()
    with pytest.raises(ChartBuildError) as err:
        builder.parallel(("C", noop))
    message = str(err.value)
    assert "decider 'Route'" in message
    assert "then()" in message


def test_parallel_without_children_is_refused() -> None:
    """parallel() with no children is refused, naming the stage it follows."""
    with pytest.raises(ChartBuildError, match=r"parallel\(\) after 'Start' needs at least one"):
        flow_chart("Start", noop).parallel()


def test_second_parallel_on_one_stage_is_refused() -> None:
    """Two parallel() calls on one stage are refused, telling to add a stage between them."""
    builder = flow_chart("Start", noop).parallel(("A", noop))
    with pytest.raises(ChartBuildError, match=r"already has parallel children.*then\(\)"):
        builder.parallel(("B", noop))


def test_malformed_parallel_child_is_refused() -> None:
    """A parallel child that is not (name, fn[, options]) or (id, chart) is refused."""
    with pytest.raises(ChartBuildError, match=r"must be \(name, fn\)"):
        flow_chart("Start", noop).parallel(["A", noop])


def test_empty_chart_is_refused() -> None:
    """Building a chart with no stage is refused, naming flow_chart(name, fn) as the fix."""
    with pytest.raises(ChartBuildError, match=r"empty chart.*flow_chart\(name, fn\)"):
        FlowBuilder("nothing").build()


def test_building_twice_is_refused() -> None:
    """A builder builds once; a second build() (or any further call) is refused."""
    builder = flow_chart("Start", noop)
    builder.build()
    with pytest.raises(ChartBuildError, match=r"'Start' was already built.*new flow_chart"):
        builder.build()
    with pytest.raises(ChartBuildError, match="already built"):
        builder.then("More", noop)


def test_non_callable_fn_is_refused() -> None:
    """A stage whose fn is not callable is refused, naming the stage and the value."""
    with pytest.raises(ChartBuildError, match="stage 'Start': fn must be callable, got 42"):
        flow_chart("Start", 42)  # type: ignore[arg-type]
    with pytest.raises(ChartBuildError, match="stage 'Next': fn must be callable"):
        flow_chart("Start", noop).then("Next", "not a function")  # type: ignore[arg-type]


def test_missing_fn_is_refused() -> None:
    """A stage without a function is refused, naming the stage."""
    with pytest.raises(ChartBuildError, match="stage 'Start' has no function; pass fn"):
        flow_chart("Start")


def test_non_callable_resume_is_refused() -> None:
    """resume= must be callable."""
    with pytest.raises(ChartBuildError, match="stage 'Ask': resume must be callable"):
        flow_chart("Ask", noop, resume=7)  # type: ignore[arg-type]


def test_rules_and_fn_together_are_refused() -> None:
    """A decider given both fn and rules= is refused, naming the decider."""
    with pytest.raises(ChartBuildError, match="decider 'Route': pass fn or rules=, not both"):
        flow_chart("Start", noop).decide(
            "Route", lambda s: "a", rules=[rule("a")], default="a"
        )


def test_decider_without_fn_or_rules_is_refused() -> None:
    """A decider with neither fn nor rules= is refused."""
    with pytest.raises(ChartBuildError, match="decider 'Route' needs fn or rules="):
        flow_chart("Start", noop).decide("Route")


def test_stage_id_with_hash_is_refused() -> None:
    """'#' is reserved for runtime ids, so a stage id containing it is refused."""
    with pytest.raises(ChartBuildError, match="without '#'"):
        flow_chart("Start", noop, id="a#1")


def test_duplicate_branch_id_is_refused() -> None:
    """A decider cannot have the same branch id twice."""
    branches = flow_chart("Start", noop).decide("Route", lambda s: "a").branch("a", "A", noop)
    with pytest.raises(ChartBuildError, match="already has branch 'a'"):
        branches.branch("a", "Again", noop, id="a2")


def test_subflow_needs_a_built_chart() -> None:
    """Mounting something that is not a built Chart is refused."""
    with pytest.raises(ChartBuildError, match="subflow 'sf' needs a built Chart"):
        flow_chart("Start", noop).subflow("sf", flow_chart("Inner", noop))  # type: ignore[arg-type]


# -- shapes that are allowed ------------------------------------------------------------------


async def test_two_deciders_back_to_back_run_in_sequence() -> None:
    """Two deciders in a row are allowed; the second runs after the first's chosen branch."""
    chart = (
        flow_chart("Start", noop)
        .decide("First", lambda s: "a")
        .branch("a", "A", lambda s: s.__setitem__("a", True))
        .branch("b", "B", noop)
        .end()
        .decide("Second", lambda s: "y" if s["a"] else "x")
        .branch("x", "X", noop)
        .branch("y", "Y", noop)
        .end()
        .build()
    )
    assert chart.nodes["First"].next == "Second"
    run = await chart.run()
    assert [r.stage_id for r in run.records] == ["Start", "First", "a", "Second", "y"]
    assert run.records[-1].control == run.records[3].runtime_stage_id


async def test_then_after_branch_end_runs_after_the_chosen_branch() -> None:
    """A then() after end() runs once, after whichever branch ran."""
    chart = (
        flow_chart("Start", noop)
        .decide("Route", lambda s: "b")
        .branch("a", "A", noop)
        .branch("b", "B", noop)
        .end()
        .then("After", noop)
        .build()
    )
    run = await chart.run()
    assert [r.stage_id for r in run.records] == ["Start", "Route", "b", "After"]


# -- self-description -------------------------------------------------------------------------


def _rich_chart() -> Chart:
    inner = flow_chart("Lookup", noop, description="Look it up").then("Format", noop).build()
    return (
        flow_chart("Receive", noop, description="Receive the request")
        .subflow("search", inner, input=lambda v: {})
        .then("Fan", noop)
        .parallel(("Left", noop), ("Right", noop), fail_fast=True)
        .decide("Route", rules=[{"when": {"n": {"gt": 2}}, "then": "big", "label": "Big"}],
                default="small", description="Route by size")
        .branch("big", "Big", noop, description="Handle big")
        .branch("small", "Small", noop, loop_to="Fan")
        .end()
        .build(description="A test chart")
    )


def test_spec_round_trips_through_json() -> None:
    """chart.spec() is plain JSON: json.dumps/json.loads gives back an equal dict."""
    spec = _rich_chart().spec()
    assert json.loads(json.dumps(spec)) == spec


def test_spec_shape() -> None:
    """spec() nests next, subflow, parallel, branches, default and loop_to by stage id."""
    spec = _rich_chart().spec()
    assert spec["id"] == "Receive"
    assert spec["description"] == "Receive the request"
    mount = spec["next"]
    assert mount["type"] == "subflow"
    assert mount["subflow"]["id"] == "search/Lookup"
    assert mount["subflow"]["next"]["id"] == "search/Format"
    fan = mount["next"]
    assert [c["id"] for c in fan["parallel"]] == ["Left", "Right"]
    assert fan["fail_fast"] is True
    route = fan["next"]
    assert route["type"] == "decider"
    assert set(route["branches"]) == {"big", "small"}
    assert route["default"] == "small"
    assert route["branches"]["small"]["loop_to"] == "Fan"


def test_spec_of_a_long_chain_does_not_recurse() -> None:
    """spec() and fingerprint() of a 5,000-stage chain work (no RecursionError)."""
    builder = flow_chart("s0", noop)
    for i in range(1, 5000):
        builder.then(f"s{i}", noop)
    chart = builder.build()
    spec = chart.spec()
    depth = 0
    while "next" in spec:
        spec = spec["next"]
        depth += 1
    assert depth == 4999
    assert len(chart.fingerprint()) == 16


def test_describe_lists_numbered_steps() -> None:
    """describe() is a numbered step list with branches, parallel children, loops and subflows."""
    assert _rich_chart().describe() == "\n".join([
        "FlowChart: Receive — A test chart",
        "Steps:",
        "1. Receive — Receive the request",
        "2. [Sub-Execution: Lookup]",
        "   1. Lookup — Look it up",
        "   2. Format",
        "3. Fan",
        "   then in parallel: Left, Right",
        "4. Route — Route by size (Decides between: big, small)",
        "   → big: Handle big",
        "   → small: Small (loops back to Fan)",
    ])


def test_describe_mentions_a_stage_loop() -> None:
    """A stage-level loop_to shows as '→ loops back to <id>'."""
    chart = flow_chart("A", noop).then("B", noop).loop_to("A").build()
    assert chart.describe().splitlines()[-1] == "   → loops back to A"


def test_to_mcp_tool_shape() -> None:
    """to_mcp_tool() gives name, description (= describe()) and inputSchema."""
    chart = flow_chart("Receive order!", noop, id="receive order!").build()
    tool = chart.to_mcp_tool()
    assert set(tool) == {"name", "description", "inputSchema"}
    assert tool["name"] == "receive_order"
    assert tool["description"] == chart.describe()
    assert tool["inputSchema"] == {
        "type": "object", "properties": {}, "additionalProperties": False,
    }


def test_to_mcp_tool_uses_the_input_schema() -> None:
    """build(input_schema=...) becomes the tool's inputSchema."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = flow_chart("Search", noop).build(input_schema=schema).to_mcp_tool()
    assert tool["inputSchema"] == schema
    assert json.loads(json.dumps(tool)) == tool


async def test_subflow_stage_ids_are_prefixed_with_the_mount_id() -> None:
    """A mounted chart's stages get ids 'sf/stage' in the chart and in runtime ids."""
    inner = flow_chart("Lookup", noop).then("Format", noop).build()
    chart = flow_chart("Start", noop).subflow("sf", inner).then("End", noop).build()
    assert {"sf", "sf/Lookup", "sf/Format"} <= set(chart.nodes)
    assert chart.nodes["sf/Lookup"].next == "sf/Format"
    run = await chart.run()
    assert [r.runtime_stage_id for r in run.records] == [
        "Start#0", "sf#1", "sf/Lookup#2", "sf/Format#3", "sf#1", "End#4",
    ]
    assert [r.stage_id for r in run.records if r.kind == "stage"] == [
        "Start", "sf/Lookup", "sf/Format", "End",
    ]


async def test_nested_subflow_ids_are_prefixed_twice() -> None:
    """A subflow inside a subflow gets 'outer/inner/stage' ids."""
    leaf = flow_chart("Leaf", noop).build()
    middle = flow_chart("Mid", noop).subflow("in", leaf).build()
    chart = flow_chart("Top", noop).subflow("out", middle).build()
    assert "out/in/Leaf" in chart.nodes
    run = await chart.run()
    assert "out/in/Leaf" in [r.stage_id for r in run.records]


def test_one_chart_can_be_mounted_twice_under_different_ids() -> None:
    """The same chart mounted under two ids gives two independent prefixed copies."""
    inner = flow_chart("Work", noop).build()
    chart = flow_chart("Start", noop).subflow("one", inner).subflow("two", inner).build()
    assert {"one/Work", "two/Work"} <= set(chart.nodes)


def test_build_with_the_branch_list_open_says_end_first() -> None:
    """Forgetting .end() is named as such, not an AttributeError on BranchBuilder."""
    open_list = flow_chart("A", noop).decide("Route", lambda s: "a").branch("a", "A2", noop)
    with pytest.raises(ChartBuildError, match=r"branch list open; call \.end\(\) before"):
        open_list.build()


def test_run_refuses_args_that_are_not_a_dict() -> None:
    """chart.run_sync('hello') names the fix instead of failing on str.items."""
    chart = flow_chart("A", noop).build()
    with pytest.raises(ConfigurationError, match=r"args='hello'\) must be a dict.*'message'"):
        chart.run_sync("hello")  # type: ignore[arg-type]
