"""The engine: commits, ordering, subflows, parallel children, control flow, scale, time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from event_capture import Events

from agentfootprint import (
    ConfigurationError,
    FlowTimeoutError,
    LoopLimitError,
    RunError,
    StageError,
)
from agentfootprint.flow import Chart, flow_chart
from agentfootprint.flow._commitlog import Change


def noop(scope: Any) -> None:
    return None


def setter(**values: Any) -> Any:
    def fn(scope: Any) -> None:
        for key, value in values.items():
            scope[key] = value

    return fn


def boom(scope: Any) -> None:
    raise ValueError("boom")


# == 1. commits ===============================================================================


async def test_raising_stage_commits_its_writes() -> None:
    """A stage that raises still commits what it wrote; the record carries the error text."""

    def half(scope: Any) -> None:
        scope["x"] = 1
        scope["y"] = [1, 2]
        raise ValueError("half way")

    chart = flow_chart("Start", noop).then("Half", half).then("Never", noop).build()
    with pytest.raises(StageError) as err:
        await chart.run()
    run = err.value.run
    assert run is not None
    assert run.status == "failed"
    assert run.state == {"x": 1, "y": [1, 2]}
    last = run.records[-1]
    assert last.stage_id == "Half"
    assert last.error == "ValueError: half way"
    assert last.changes == (Change("x", "set", 1), Change("y", "set", [1, 2]))
    assert [r.stage_id for r in run.records] == ["Start", "Half"]


async def test_stage_error_identifies_the_step_and_keeps_the_cause() -> None:
    """StageError has stage_id, runtime_stage_id, the original exception as __cause__ and .run."""
    chart = flow_chart("Start", noop).then("Bad", boom, id="bad").build()
    with pytest.raises(StageError) as err:
        await chart.run()
    exc = err.value
    assert exc.stage_id == "bad"
    assert exc.runtime_stage_id == "bad#1"
    assert isinstance(exc.__cause__, ValueError)
    assert "'Bad'" in str(exc)
    assert "bad#1" in str(exc)
    assert exc.run.error == str(exc)
    assert exc.run.log.find("bad#1").error == "ValueError: boom"


async def test_failing_stage_fires_neither_stage_end_nor_stage_executed() -> None:
    """A raising stage gets stage_start, commit and error, but no stage_end/stage_executed."""
    events = Events()
    chart = flow_chart("Start", noop).then("Bad", boom).build()
    with pytest.raises(StageError):
        await chart.run(recorders=[events])
    bad = [e.name for e in events.events if e.runtime_stage_id == "Bad#1"]
    assert bad == ["stage_start", "commit", "error"]


async def test_no_op_write_leaves_no_change_but_a_record() -> None:
    """Writing the value a key already has leaves no change, yet the step still has a record."""
    events = Events()
    chart = flow_chart("Same", setter(x=1, items=[1, 2])).build()
    run = await chart.run(state={"x": 1, "items": [1, 2]}, recorders=[events])
    assert len(run.records) == 1
    assert run.records[0].changes == ()
    assert [e.key for e in events.named("write")] == ["x", "items"]


async def test_write_then_revert_leaves_no_change() -> None:
    """A change reverted inside the stage (or a key written then deleted) is no net change."""

    def churn(scope: Any) -> None:
        scope["x"] = 2
        scope["x"] = 1
        scope["tmp"] = "scratch"
        del scope["tmp"]

    run = await flow_chart("Churn", churn).build().run(state={"x": 1})
    assert run.records[0].changes == ()
    assert run.state == {"x": 1}


async def test_type_change_is_a_change() -> None:
    """1, 1.0 and True are different values: rewriting 1 as True is recorded."""
    run = await flow_chart("Flip", setter(x=True)).build().run(state={"x": 1})
    assert run.records[0].changes == (Change("x", "set", True),)


async def test_list_growth_is_recorded_as_append() -> None:
    """A list that grew by a suffix is stored as an append of the tail, not the whole list."""
    run = await flow_chart("Grow", setter(items=[1, 2, 3])).build().run(state={"items": [1]})
    assert run.records[0].changes == (Change("items", "append", [2, 3]),)
    assert run.value_at("items", 0) == [1, 2, 3]


async def test_every_executed_step_appends_one_record() -> None:
    """Every executed stage (deciders and selectors included) appends exactly one record."""
    events = Events()
    chart = (
        flow_chart("Start", noop)
        .decide("Route", lambda s: "a")
        .branch("a", "A", noop)
        .branch("b", "B", noop)
        .end()
        .select("Pick", lambda s: ["x", "y"])
        .branch("x", "X", noop)
        .branch("y", "Y", noop)
        .end()
        .build()
    )
    run = await chart.run(recorders=[events])
    assert [r.stage_id for r in run.records] == ["Start", "Route", "a", "Pick", "x", "y"]
    assert [r.kind for r in run.records] == [
        "stage", "decider", "stage", "selector", "stage", "stage",
    ]
    started = [e.runtime_stage_id for e in events.named("stage_start")]
    assert started == [r.runtime_stage_id for r in run.records]


async def test_decider_commits_before_its_branch_runs() -> None:
    """A decider's writes are committed (and visible) before the chosen branch starts."""
    events = Events()

    def route(scope: Any) -> str:
        scope["routed_by"] = "Route"
        return "a"

    seen: list[Any] = []
    chart = (
        flow_chart("Start", noop)
        .decide("Route", route)
        .branch("a", "A", lambda s: seen.append(s["routed_by"]))
        .end()
        .build()
    )
    run = await chart.run(recorders=[events])
    assert seen == ["Route"]
    decider, branch = run.records[1], run.records[2]
    assert decider.changes == (Change("routed_by", "set", "Route"),)
    assert decider.decision == {"chosen": "a"}
    assert branch.reads == ("routed_by",)
    trace = events.trace()
    assert trace.index(("commit", "Route#1")) < trace.index(("stage_start", "a#2"))


async def test_decider_choosing_an_unknown_branch_fails_with_a_record() -> None:
    """A decider answer that is no branch (and no default) raises, with decision and error."""
    chart = (
        flow_chart("Start", noop).decide("Route", lambda s: "zzz").branch("a", "A", noop).end()
        .build()
    )
    with pytest.raises(StageError,
                       match=r"chose 'zzz'.*a rule's 'then'.*\.default\(branch\)") as err:
        await chart.run()
    record = err.value.run.records[-1]
    assert record.decision == {"chosen": "zzz"}
    assert record.error is not None and record.error.startswith("ValueError:")


async def test_decider_unknown_answer_falls_back_to_default() -> None:
    """A decider answer that is no branch goes to the default, recorded as a fallback."""
    chart = (
        flow_chart("Start", noop).decide("Route", lambda s: "zzz")
        .branch("a", "A", noop).branch("b", "B", noop).default("b").end().build()
    )
    run = await chart.run()
    assert run.records[1].decision == {"chosen": "zzz", "fallback": "b"}
    assert run.records[2].stage_id == "b"


# == 2. ordering and identity =================================================================


async def test_runtime_ids_are_stamped_in_order_and_shared_with_subflows() -> None:
    """Runtime ids are 'id#N' with one counter shared by the parent and its subflows."""
    inner = flow_chart("X", noop).then("Y", noop).build()
    chart = (
        flow_chart("A", noop).subflow("sf", inner).then("B", noop).subflow("sf2", inner)
        .build()
    )
    run = await chart.run()
    assert [r.runtime_stage_id for r in run.records] == [
        "A#0", "sf#1", "sf/X#2", "sf/Y#3", "sf#1", "B#4",
        "sf2#5", "sf2/X#6", "sf2/Y#7", "sf2#5",
    ]


async def test_runtime_ids_keep_climbing_in_a_loop() -> None:
    """Each pass of a loop gets a new runtime id and a growing loop_pass."""

    def count(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1
        if scope["n"] == 3:
            scope.break_()

    run = await flow_chart("Count", count).loop_to("Count").build().run()
    assert [r.runtime_stage_id for r in run.records] == ["Count#0", "Count#1", "Count#2"]
    assert [r.loop_pass for r in run.records] == [0, 1, 2]
    assert [r.parent for r in run.records] == [None, "Count#0", "Count#1"]


async def test_event_order_of_a_linear_stage() -> None:
    """Linear: stage_start → live reads/writes/emits → stage_end → commit → executed → next."""
    events = Events()

    def work(scope: Any) -> None:
        scope.get("seed")
        scope["x"] = 1
        scope.emit("progress", 50)

    chart = flow_chart("Work", work).then("Done", noop).build()
    await chart.run(recorders=[events])
    assert [(e.name, e.runtime_stage_id, e.key) for e in events.events] == [
        ("run_start", "__root__#0", None),
        ("stage_start", "Work#0", None),
        ("read", "Work#0", "seed"),
        ("write", "Work#0", "x"),
        ("emit", "Work#0", "progress"),
        ("stage_end", "Work#0", None),
        ("commit", "Work#0", None),
        ("stage_executed", "Work#0", None),
        ("next", "Work#0", None),
        ("stage_start", "Done#1", None),
        ("stage_end", "Done#1", None),
        ("commit", "Done#1", None),
        ("stage_executed", "Done#1", None),
        ("run_end", "__root__#0", None),
    ]
    assert events.named("next")[0].data == {"target": "Done"}


async def test_event_order_of_a_decider() -> None:
    """Decider: start → reads → end → commit → decision → executed → branch stage_start."""
    events = Events()
    chart = (
        flow_chart("Start", noop)
        .decide("Route", rules=[{"when": {"n": {"gt": 1}}, "then": "big"}], default="small")
        .branch("big", "Big", noop)
        .branch("small", "Small", noop)
        .end()
        .build()
    )
    await chart.run(state={"n": 5}, recorders=[events])
    route = events.trace().index(("stage_start", "Route#1"))
    assert events.trace()[route:route + 7] == [
        ("stage_start", "Route#1"),
        ("read", "Route#1"),
        ("stage_end", "Route#1"),
        ("commit", "Route#1"),
        ("decision", "Route#1"),
        ("stage_executed", "Route#1"),
        ("stage_start", "big#2"),
    ]
    assert events.named("decision")[0].data["chosen"] == "big"


async def test_event_order_of_a_failing_stage() -> None:
    """Failing stage: start → reads/writes → commit → error → run_failed, nothing else."""
    events = Events()

    def bad(scope: Any) -> None:
        scope.get("a")
        scope["b"] = 1
        raise RuntimeError("nope")

    chart = flow_chart("Start", noop).then("Bad", bad).then("Never", noop).build()
    with pytest.raises(StageError):
        await chart.run(recorders=[events])
    start = events.trace().index(("stage_start", "Bad#1"))
    assert [(e.name, e.runtime_stage_id) for e in events.events[start:]] == [
        ("stage_start", "Bad#1"),
        ("read", "Bad#1"),
        ("write", "Bad#1"),
        ("commit", "Bad#1"),
        ("error", "Bad#1"),
        ("run_failed", "__root__#0"),
    ]
    assert events.named("error")[0].data == {"error": "RuntimeError: nope"}


async def test_records_link_to_their_parent_step() -> None:
    """Each record's parent is the step that led to it; a branch also points at its decider."""
    chart = (
        flow_chart("Start", noop).decide("Route", lambda s: "a").branch("a", "A", noop).end()
        .build()
    )
    run = await chart.run()
    assert [(r.parent, r.control) for r in run.records] == [
        (None, None), ("Start#0", None), ("Route#1", "Route#1"),
    ]


# == 3. subflow boundary ======================================================================


async def test_subflow_has_its_own_namespace() -> None:
    """A subflow cannot see the parent's keys; its writes stay in its own namespace."""
    seen: dict[str, Any] = {}

    def peek(scope: Any) -> None:
        seen["has_secret"] = "secret" in scope
        seen["secret"] = scope.get("secret", "absent")
        scope["inner_only"] = 1

    inner = flow_chart("Peek", peek).build()
    chart = flow_chart("Start", setter(secret="s3")).subflow("sf", inner).build()
    run = await chart.run()
    assert seen == {"has_secret": False, "secret": "absent"}
    assert "inner_only" not in run.state
    inner_record = run.log.find("sf/Peek")
    assert inner_record.ns == "sf#1"
    assert run.state_at(inner_record.idx, ns="sf#1") == {"inner_only": 1}


async def test_input_mapper_reads_are_tracked_on_the_enter_record() -> None:
    """The enter record reads the parent's keys (read_ns = parent ns) and seeds the input."""
    inner = flow_chart("Use", lambda s: s.__setitem__("out", s["q"] * 2)).build()
    chart = (
        flow_chart("Start", setter(q=21, other=0))
        .subflow("sf", inner, input=lambda view: {"q": view["q"]})
        .build()
    )
    run = await chart.run()
    enter = run.records[1]
    assert enter.kind == "subflow-enter"
    assert enter.runtime_stage_id == "sf#1"
    assert enter.reads == ("q",)
    assert enter.read_ns == ""
    assert enter.read_namespace == ""
    assert enter.ns == "sf#1"
    assert enter.changes == (Change("q", "set", 21),)


async def test_subflow_input_is_visible_as_args_and_state() -> None:
    """The mapped input is both scope.args and state inside the subflow."""
    seen: list[Any] = []
    inner = flow_chart("Use", lambda s: seen.append((dict(s.args), s["q"]))).build()
    chart = flow_chart("Start", setter(q=7)).subflow(
        "sf", inner, input=lambda v: {"q": v["q"]}
    ).build()
    await chart.run()
    assert seen == [({"q": 7}, 7)]


async def test_subflow_input_keys_are_read_only_inside() -> None:
    """Writing (or deleting) a mapped input key inside the subflow raises KeyError."""
    for body in (setter(q=2), lambda s: s.__delitem__("q")):
        inner = flow_chart("Write", body).build()
        chart = flow_chart("Start", setter(q=1)).subflow(
            "sf", inner, input=lambda v: {"q": v["q"]}
        ).build()
        with pytest.raises(StageError) as err:
            await chart.run()
        assert isinstance(err.value.__cause__, KeyError)
        assert "read-only" in str(err.value.__cause__) or "cannot be deleted" in str(
            err.value.__cause__
        )
        assert err.value.run.state == {"q": 1}


async def test_output_mapper_writes_land_on_the_parent_with_write_events() -> None:
    """The output mapper's keys are written on the parent by the exit record, firing writes."""
    events = Events()
    inner = flow_chart("Work", setter(answer=42, scratch="x")).build()
    chart = (
        flow_chart("Start", noop)
        .subflow("sf", inner, output=lambda v: {"result": v["answer"]})
        .then("Use", lambda s: s["result"])
        .build()
    )
    run = await chart.run(recorders=[events])
    assert run.state == {"result": 42}
    assert run.output == 42
    exit_record = run.records[3]
    assert exit_record.kind == "subflow-exit"
    assert exit_record.ns == ""
    assert exit_record.read_ns == "sf#1"
    assert exit_record.reads == ("answer",)
    assert exit_record.changes == (Change("result", "set", 42),)
    writes = [(e.runtime_stage_id, e.key, e.value) for e in events.named("write")]
    assert ("sf#1", "result", 42) in writes


async def test_output_arrays_concat_by_default() -> None:
    """A list returned by the output mapper is appended to an existing parent list."""
    inner = flow_chart("Work", setter(found=["c", "d"])).build()
    chart = flow_chart("Start", noop).subflow(
        "sf", inner, output=lambda v: {"items": v["found"]}
    ).build()
    run = await chart.run(state={"items": ["a", "b"]})
    assert run.state["items"] == ["a", "b", "c", "d"]
    assert run.records[-1].changes == (Change("items", "append", ["c", "d"]),)


async def test_output_arrays_replace_when_asked() -> None:
    """array_merge='replace' overwrites the parent list with the returned one."""
    inner = flow_chart("Work", setter(found=["c"])).build()
    chart = flow_chart("Start", noop).subflow(
        "sf", inner, output=lambda v: {"items": v["found"]}, array_merge="replace"
    ).build()
    run = await chart.run(state={"items": ["a", "b"]})
    assert run.state["items"] == ["c"]


async def test_output_mapper_is_skipped_when_the_subflow_fails() -> None:
    """An inner error skips the output mapper; the exit record carries the error."""
    events = Events()
    called: list[bool] = []

    def output(view: Any) -> dict[str, Any]:
        called.append(True)
        return {"result": 1}

    inner = flow_chart("Half", setter(partial=1)).then("Bad", boom).build()
    chart = flow_chart("Start", noop).subflow("sf", inner, output=output).then(
        "Never", noop
    ).build()
    with pytest.raises(StageError) as err:
        await chart.run(recorders=[events])
    assert called == []
    run = err.value.run
    assert "result" not in run.state
    exit_record = run.records[-1]
    assert exit_record.kind == "subflow-exit"
    assert exit_record.error is not None and exit_record.error.startswith("StageError:")
    assert exit_record.changes == ()
    assert "error" in events.named("subflow_exit")[0].data
    assert err.value.stage_id == "sf/Bad"


def _breaking_subflow() -> Chart:
    def stop(scope: Any) -> None:
        scope["inner"] = 1
        scope.break_("inner done")

    return flow_chart("Stop", stop).then("InnerNever", noop).build()


async def test_subflow_break_stops_only_the_subflow_by_default() -> None:
    """Without propagate_break an inner break ends the subflow and the parent goes on."""
    chart = (
        flow_chart("Start", noop)
        .subflow("sf", _breaking_subflow(), output=lambda v: {"out": v["inner"]})
        .then("After", noop)
        .build()
    )
    run = await chart.run()
    ids = [r.stage_id for r in run.records]
    assert "sf/InnerNever" not in ids
    assert ids[-1] == "After"
    assert run.state == {"out": 1}


async def test_subflow_break_propagates_when_asked() -> None:
    """With propagate_break the parent stops too; the output mapper still runs."""
    events = Events()
    chart = (
        flow_chart("Start", noop)
        .subflow("sf", _breaking_subflow(), output=lambda v: {"out": v["inner"]},
                 propagate_break=True)
        .then("After", noop)
        .build()
    )
    run = await chart.run(recorders=[events])
    ids = [r.stage_id for r in run.records]
    assert "After" not in ids
    assert run.state == {"out": 1}
    assert run.records[-1].break_reason == "inner done"
    breaks = [e.data for e in events.named("break")]
    assert {"reason": "inner done", "propagated_from": "sf"} in breaks


# == 4. parallel children =====================================================================


async def test_join_reads_what_parallel_children_wrote() -> None:
    """Children share the parent's state: the join stage reads keys both children wrote."""

    async def left(scope: Any) -> None:
        await asyncio.sleep(0)
        scope["left"] = "L"

    chart = (
        flow_chart("Fork", noop)
        .parallel(("Left", left), ("Right", setter(right="R")))
        .then("Join", lambda s: s["left"] + s["right"])
        .build()
    )
    run = await chart.run()
    assert run.output == "LR"
    assert run.state == {"left": "L", "right": "R"}
    join = run.records[-1]
    assert join.stage_id == "Join"
    assert set(join.reads) == {"left", "right"}
    assert all(r.ns == "" for r in run.records)


async def test_each_parallel_child_step_has_exactly_one_record() -> None:
    """A parallel child step commits once: one record per runtime id."""
    chart = flow_chart("Fork", noop).parallel(
        ("A", setter(a=1)), ("B", setter(b=2))
    ).then("Join", noop).build()
    run = await chart.run()
    rids = [r.runtime_stage_id for r in run.records]
    assert len(rids) == len(set(rids)) == 4
    for child in ("A", "B"):
        (record,) = [r for r in run.records if r.stage_id == child]
        assert len(run.log.records_for(record.runtime_stage_id)) == 1
        assert record.parent == "Fork#0"


async def test_parallel_child_error_becomes_its_result() -> None:
    """By default a failing child's error is its result and the run goes on to the join."""
    chart = flow_chart("Fork", noop).parallel(("Bad", boom), ("Good", lambda s: "ok")).build()
    run = await chart.run()
    assert run.status == "done"
    assert run.output["Good"] == "ok"
    assert isinstance(run.output["Bad"], StageError)
    assert isinstance(run.output["Bad"].__cause__, ValueError)
    assert run.log.find("Bad").error == "ValueError: boom"

    with_join = flow_chart("Fork", noop).parallel(("Bad", boom), ("Good", noop)).then(
        "Join", lambda s: "joined"
    ).build()
    assert (await with_join.run()).output == "joined"


async def test_parallel_fail_fast_raises_and_cancels_siblings() -> None:
    """fail_fast: the first child error is raised and the still-running siblings are cancelled."""
    finished: list[str] = []

    async def failing(scope: Any) -> None:
        await asyncio.sleep(0.01)
        raise ValueError("first")

    async def slow(scope: Any) -> None:
        scope["started"] = True
        await asyncio.sleep(5)
        finished.append("slow")

    chart = flow_chart("Fork", noop).parallel(
        ("Failing", failing), ("Slow", slow), fail_fast=True
    ).then("Join", noop).build()
    t0 = time.monotonic()
    with pytest.raises(StageError, match="first") as err:
        await chart.run()
    assert time.monotonic() - t0 < 2
    assert finished == []
    run = err.value.run
    slow_record = run.log.find("Slow")
    assert slow_record.error is not None and slow_record.error.startswith("CancelledError")
    assert slow_record.changes == (Change("started", "set", True),)
    assert "Join" not in [r.stage_id for r in run.records]


async def test_parallel_child_break_does_not_stop_the_parent() -> None:
    """A child's break ends that child only; the join still runs."""

    def stop(scope: Any) -> None:
        scope["stopped"] = True
        scope.break_("child stop")

    chart = flow_chart("Fork", noop).parallel(("Stop", stop), ("Other", noop)).then(
        "Join", lambda s: "joined"
    ).build()
    run = await chart.run()
    assert run.output == "joined"
    assert run.log.find("Stop").break_reason == "child stop"


async def test_selector_branches_run_in_parallel_on_shared_state() -> None:
    """Selected branches all run, share the state, and the next stage reads their writes."""
    chart = (
        flow_chart("Start", noop)
        .select("Pick", lambda s: ["a", "c"])
        .branch("a", "A", setter(a=1))
        .branch("b", "B", setter(b=2))
        .branch("c", "C", setter(c=3))
        .end()
        .then("Join", lambda s: s["a"] + s["c"])
        .build()
    )
    run = await chart.run()
    assert run.output == 4
    assert "b" not in run.state
    assert run.records[1].decision == {"selected": ["a", "c"]}
    assert {r.control for r in run.records if r.stage_id in ("a", "c")} == {"Pick#1"}


# == 5. control flow ==========================================================================


async def test_break_lets_the_stage_finish_and_commit() -> None:
    """break_() is a flag: the stage runs to its end, its writes commit, nothing after runs."""

    def stop(scope: Any) -> str:
        scope["before"] = 1
        scope.break_("enough")
        scope["after"] = 2
        return "stopped"

    chart = flow_chart("Start", noop).then("Stop", stop).then("Never", noop).build()
    run = await chart.run()
    assert run.status == "done"
    assert run.output == "stopped"
    assert run.state == {"before": 1, "after": 2}
    assert [r.stage_id for r in run.records] == ["Start", "Stop"]
    assert run.records[-1].break_reason == "enough"


async def test_break_fires_after_stage_executed() -> None:
    """The break event follows the stage's stage_executed and no next event fires."""
    events = Events()
    chart = flow_chart("Stop", lambda s: s.break_("why")).then("Never", noop).build()
    await chart.run(recorders=[events])
    names = [e.name for e in events.events]
    assert names[names.index("stage_executed"):] == ["stage_executed", "break", "run_end"]
    assert events.named("break")[0].data == {"reason": "why"}


async def test_first_break_reason_wins() -> None:
    """A second break_() keeps the first reason."""

    def stop(scope: Any) -> None:
        scope.break_("first")
        scope.break_("second")

    run = await flow_chart("Stop", stop).build().run()
    assert run.records[0].break_reason == "first"


async def test_break_without_reason_is_recorded_as_empty() -> None:
    """break_() without a reason records an empty reason (not None)."""
    run = await flow_chart("Stop", lambda s: s.break_()).then("Never", noop).build().run()
    assert run.records[0].break_reason == ""
    assert len(run.records) == 1


async def test_break_inside_a_decider_keeps_its_reason() -> None:
    """A decider that breaks keeps its reason, fires a break event and runs no branch."""
    events = Events()

    def route(scope: Any) -> str:
        scope.break_("no route")
        return "a"

    chart = (
        flow_chart("Start", noop).decide("Route", route).branch("a", "A", noop).end()
        .then("After", noop).build()
    )
    run = await chart.run(recorders=[events])
    assert [r.stage_id for r in run.records] == ["Start", "Route"]
    assert run.records[-1].break_reason == "no route"
    assert [(e.runtime_stage_id, e.data) for e in events.named("break")] == [
        ("Route#1", {"reason": "no route"}),
    ]


async def test_loop_runs_forward_with_state_carried() -> None:
    """loop_to goes back to a stage; state accumulates and nothing is rewound."""

    def inc(scope: Any) -> None:
        scope["n"] = scope["n"] + 1
        scope["seen"] = [*scope["seen"], scope["n"]]

    chart = (
        flow_chart("Init", setter(n=0, seen=[]))
        .then("Inc", inc)
        .decide("Check", lambda s: "again" if s["n"] < 3 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", lambda s: s["n"])
        .end()
        .build()
    )
    run = await chart.run()
    assert run.output == 3
    assert run.state == {"n": 3, "seen": [1, 2, 3]}
    inc = [r for r in run.records if r.stage_id == "Inc"]
    assert [r.loop_pass for r in inc] == [0, 1, 2]
    assert [r.changes[1] for r in inc][1:] == [
        Change("seen", "append", [2]), Change("seen", "append", [3]),
    ]


async def test_loop_fires_loop_events_with_the_pass() -> None:
    """Each back edge fires a loop event naming the target and the pass number."""
    events = Events()

    def count(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1
        if scope["n"] == 3:
            scope.break_()

    await flow_chart("Count", count).loop_to("Count").build().run(recorders=[events])
    assert [e.data for e in events.named("loop")] == [
        {"target": "Count", "pass": 1}, {"target": "Count", "pass": 2},
    ]


async def test_default_loop_limit_is_1000_back_edges() -> None:
    """An endless loop stops after 1,000 back edges with a LoopLimitError that names the fix."""
    chart = flow_chart("Spin", noop).then("Again", noop).loop_to("Spin").build()
    with pytest.raises(LoopLimitError) as err:
        await chart.run()
    message = str(err.value)
    assert "'Spin'" in message
    assert "'Again'" in message
    assert "max_loop_iterations=1000" in message
    assert "break_()" in message
    run = err.value.run
    assert run.status == "failed"
    assert sum(1 for r in run.records if r.stage_id == "Spin") == 1001


async def test_loop_limit_is_configurable() -> None:
    """max_loop_iterations=N allows exactly N back edges."""
    chart = flow_chart("Spin", noop).loop_to("Spin").build()
    with pytest.raises(LoopLimitError, match="max_loop_iterations=3"):
        await chart.run(max_loop_iterations=3)
    with pytest.raises(ConfigurationError, match="max_loop_iterations=0"):
        await chart.run(max_loop_iterations=0)


async def test_loop_limit_is_per_target() -> None:
    """The cap counts back edges per target, not in total."""
    calls = {"n": 0}

    def count(scope: Any) -> None:
        calls["n"] += 1
        if calls["n"] >= 8:
            scope.break_()

    chart = (
        flow_chart("A", noop)
        .decide("Which", lambda s: "to_a" if calls["n"] % 2 else "to_b")
        .branch("to_a", "ToA", count, loop_to="A")
        .branch("to_b", "ToB", count, loop_to="Which")
        .end()
        .build()
    )
    run = await chart.run(max_loop_iterations=4)
    assert run.status == "done"
    assert calls["n"] == 8


async def test_decider_with_next_nests_its_branch() -> None:
    """A decider with its own next runs the branch first, then continues from the decider."""
    events = Events()
    chart = (
        flow_chart("Start", noop).decide("Route", lambda s: "a").branch("a", "A", noop).end()
        .then("After", noop).build()
    )
    run = await chart.run(recorders=[events])
    assert [r.stage_id for r in run.records] == ["Start", "Route", "a", "After"]
    assert run.records[-1].parent == "Route#1"
    nexts = [(e.runtime_stage_id, e.data) for e in events.named("next")]
    assert nexts[-1] == ("Route#1", {"target": "After"})
    trace = events.trace()
    assert trace.index(("stage_executed", "a#2")) < trace.index(("next", "Route#1"))


async def test_decider_without_next_hops_flat() -> None:
    """A decider without next is a tail hop: a long loop through it needs no nesting depth."""

    def inc(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1

    chart = (
        flow_chart("Inc", inc)
        .decide("Check", lambda s: "again" if s["n"] < 2000 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .build()
    )
    run = await chart.run(max_depth=1, max_loop_iterations=5000)
    assert run.state == {"n": 2000}


async def test_loop_back_from_a_branch_of_a_decider_with_next_runs_next_once() -> None:
    """A branch looping back past a decider that has a next runs that next once, at the end."""

    def inc(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1

    chart = (
        flow_chart("Inc", inc)
        .decide("Check", lambda s: "again" if s["n"] < 3 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .then("After", lambda s: s["n"])
        .build()
    )
    run = await chart.run()
    assert run.output == 3
    assert [r.stage_id for r in run.records] == [
        "Inc", "Check", "again", "Inc", "Check", "again", "Inc", "Check", "done", "After",
    ]


async def test_long_loop_through_a_decider_with_next_completes() -> None:
    """2,000 passes through a decider that has a next neither nest nor hit RecursionError."""

    def inc(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1

    chart = (
        flow_chart("Inc", inc)
        .decide("Check", lambda s: "again" if s["n"] < 2000 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .then("After", noop)
        .build()
    )
    run = await chart.run(max_loop_iterations=5000)
    assert run.state == {"n": 2000}
    assert sum(1 for r in run.records if r.stage_id == "After") == 1


async def test_nesting_beyond_max_depth_is_refused() -> None:
    """Real nesting (a subflow inside a subflow) is bounded by max_depth with a RunError."""
    leaf = flow_chart("Leaf", noop).build()
    middle = flow_chart("Mid", noop).subflow("in", leaf).build()
    chart = flow_chart("Top", noop).subflow("out", middle).build()
    assert (await chart.run(max_depth=2)).status == "done"
    with pytest.raises(RunError, match="max_depth=1") as err:
        await chart.run(max_depth=1)
    assert err.value.run is not None
    assert err.value.run.status == "failed"


# == engine: scale, time, cancellation ========================================================


async def test_ten_thousand_stage_chain_runs_without_recursion_error() -> None:
    """A 10,000-stage linear chain completes (linear hops are iterative)."""

    def inc(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1

    builder = flow_chart("s0", inc)
    for i in range(1, 10_000):
        builder.then(f"s{i}", inc)
    run = await builder.build().run()
    assert run.state == {"n": 10_000}
    assert len(run.records) == 10_000
    assert run.records[-1].runtime_stage_id == "s9999#9999"


async def test_ten_thousand_iteration_loop_runs_without_recursion_error() -> None:
    """A 10,000-iteration loop (stage loop and decider loop) completes."""

    def inc(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1
        if scope["n"] == 10_000:
            scope.break_("done")

    run = await flow_chart("Inc", inc).loop_to("Inc").build().run(max_loop_iterations=10_000)
    assert run.state == {"n": 10_000}
    assert len(run.records) == 10_000

    via_decider = (
        flow_chart("Inc", lambda s: s.__setitem__("n", s.get("n", 0) + 1))
        .decide("Check", lambda s: "again" if s["n"] < 10_000 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .build()
    )
    run = await via_decider.run(max_loop_iterations=10_000)
    assert run.state == {"n": 10_000}


async def test_timeout_on_a_slow_async_stage_commits_its_writes() -> None:
    """timeout= raises FlowTimeoutError; the slow stage's staged writes commit with an error."""

    async def slow(scope: Any) -> None:
        scope["x"] = 1
        await asyncio.sleep(5)
        scope["y"] = 2

    chart = flow_chart("Start", noop).then("Slow", slow).then("Never", noop).build()
    t0 = time.monotonic()
    with pytest.raises(FlowTimeoutError) as err:
        await chart.run(timeout=0.05)
    assert time.monotonic() - t0 < 2
    assert isinstance(err.value, TimeoutError)
    assert "timeout=" in str(err.value)
    run = err.value.run
    assert run.status == "failed"
    assert run.state == {"x": 1}
    slow_record = run.records[-1]
    assert slow_record.stage_id == "Slow"
    assert slow_record.changes == (Change("x", "set", 1),)
    assert slow_record.error is not None and slow_record.error.startswith("CancelledError")


async def test_timeout_is_enforced_between_sync_stages() -> None:
    """Sync stages never yield, so the deadline is also checked before each stage starts."""

    def sleepy(scope: Any) -> None:
        time.sleep(0.04)

    builder = flow_chart("s0", sleepy)
    for i in range(1, 6):
        builder.then(f"s{i}", sleepy)
    with pytest.raises(FlowTimeoutError, match="before stage") as err:
        await builder.build().run(timeout=0.06)
    assert 1 <= len(err.value.run.records) < 6


async def test_invalid_timeout_is_refused() -> None:
    """timeout must be positive."""
    with pytest.raises(ConfigurationError, match="timeout=0"):
        await flow_chart("A", noop).build().run(timeout=0)


async def test_cancelling_the_run_task_cancels_the_stage() -> None:
    """Cancelling the run task raises CancelledError; the running stage commits with an error."""
    events = Events()
    started = asyncio.Event()

    async def slow(scope: Any) -> None:
        scope["x"] = 1
        started.set()
        await asyncio.sleep(5)

    chart = flow_chart("Slow", slow).then("Never", noop).build()
    task = asyncio.create_task(chart.run(recorders=[events]))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (commit,) = events.named("commit")
    assert commit.value.changes == (Change("x", "set", 1),)
    assert commit.value.error.startswith("CancelledError")
    assert [e.runtime_stage_id for e in events.named("error")] == ["Slow#0"]
    assert not events.named("run_end")
    assert not events.named("stage_start")[1:]


async def test_emit_is_recorded_and_delivered() -> None:
    """scope.emit lands on the step's record and reaches on_emit recorders."""
    events = Events()

    def work(scope: Any) -> None:
        scope.emit("app.progress", {"pct": 50})
        scope.emit("app.done")

    run = await flow_chart("Work", work).build().run(recorders=[events])
    assert run.records[0].emits == (("app.progress", {"pct": 50}), ("app.done", None))
    assert [(e.key, e.value, e.runtime_stage_id) for e in events.named("emit")] == [
        ("app.progress", {"pct": 50}, "Work#0"), ("app.done", None, "Work#0"),
    ]


async def test_sync_and_async_stage_functions_both_work() -> None:
    """Plain functions and coroutine functions can be mixed in one chart."""

    async def async_stage(scope: Any) -> str:
        await asyncio.sleep(0)
        scope["a"] = scope["s"] + 1
        return "async"

    def sync_stage(scope: Any) -> str:
        scope["b"] = scope["a"] + 1
        return "sync"

    chart = flow_chart("S", setter(s=1)).then("A", async_stage).then("B", sync_stage).build()
    run = await chart.run()
    assert run.state == {"s": 1, "a": 2, "b": 3}
    assert run.output == "sync"


async def test_async_callable_object_is_awaited() -> None:
    """A callable object returning an awaitable is awaited too."""

    class Stage:
        async def __call__(self, scope: Any) -> int:
            scope["x"] = 1
            return 5

    run = await flow_chart("S", Stage()).build().run()
    assert run.output == 5
    assert run.state == {"x": 1}


async def test_run_sync_works_inside_a_running_loop() -> None:
    """run_sync inside a running event loop (a notebook) runs on a worker loop and returns."""
    run = flow_chart("A", lambda s: s.args["v"] * 2).build().run_sync({"v": 21})
    assert (run.output, run.status) == (42, "done")


def test_run_sync_runs_outside_a_loop() -> None:
    """run_sync works from plain synchronous code."""
    run = flow_chart("A", lambda s: s.args["v"] * 2).build().run_sync({"v": 21})
    assert run.output == 42
    assert run.status == "done"


async def test_args_and_env_are_read_only_and_untracked() -> None:
    """scope.args / scope.env expose the run input and env, read-only and not recorded."""
    seen: dict[str, Any] = {}

    def look(scope: Any) -> None:
        seen["args"] = dict(scope.args)
        seen["env"] = dict(scope.env)
        with pytest.raises(TypeError):
            scope.args["q"] = 2

    run = await flow_chart("Look", look).build().run({"q": 1}, env={"tenant": "t"})
    assert seen == {"args": {"q": 1}, "env": {"tenant": "t"}}
    assert run.records[0].reads == ()


async def test_one_chart_runs_concurrently() -> None:
    """A built chart is shareable: concurrent runs keep separate state and logs."""

    async def work(scope: Any) -> int:
        await asyncio.sleep(0.001)
        scope["v"] = scope.args["v"]
        return int(scope.args["v"])

    chart = flow_chart("Work", work).then("Echo", lambda s: s["v"]).build()
    runs = await asyncio.gather(*(chart.run({"v": i}) for i in range(20)))
    assert [r.output for r in runs] == list(range(20))
    assert len({r.run_id for r in runs}) == 20


# == scope ====================================================================================


async def test_scope_attribute_access() -> None:
    """scope.x reads, scope.x = v writes, del scope.x deletes, missing attribute raises."""
    seen: dict[str, Any] = {}

    def attrs(scope: Any) -> None:
        seen["a"] = scope.a
        scope.b = 2
        seen["b"] = scope.b
        del scope.a
        seen["a_gone"] = "a" not in scope
        with pytest.raises(AttributeError, match="no key 'missing'"):
            scope.missing

    run = await flow_chart("Attrs", attrs).build().run(state={"a": 1})
    assert seen == {"a": 1, "b": 2, "a_gone": True}
    assert run.state == {"b": 2}
    assert run.records[0].changes == (Change("b", "set", 2), Change("a", "delete"))


async def test_scope_reserved_names_cannot_be_assigned() -> None:
    """Assigning a reserved name (scope.emit = 1, scope.args = ...) raises AttributeError."""
    errors: list[str] = []

    def clash(scope: Any) -> None:
        for name in ("emit", "args", "break_", "get", "_staged"):
            try:
                setattr(scope, name, 1)
            except AttributeError as exc:
                errors.append(str(exc))
        scope["emit"] = "fine as an item"

    run = await flow_chart("Clash", clash).build().run()
    assert len(errors) == 5
    assert "scope['emit'] = ..." in errors[0]
    assert run.state == {"emit": "fine as an item"}


async def test_scope_item_access_and_missing_key() -> None:
    """scope['k'] on a missing key raises KeyError naming get(); get() gives the default."""
    seen: dict[str, Any] = {}

    def look(scope: Any) -> None:
        seen["default"] = scope.get("nope", 5)
        with pytest.raises(KeyError, match=r"scope\.get"):
            scope["nope"]
        with pytest.raises(TypeError):
            scope[1] = 2

    await flow_chart("Look", look).build().run()
    assert seen == {"default": 5}


async def test_reads_return_copies() -> None:
    """Mutating a value read from scope does not change state; writing it back does."""

    def mutate_only(scope: Any) -> None:
        items = scope["items"]
        items.append("sneaky")
        scope["cfg"]["x"] = "sneaky"

    def write_back(scope: Any) -> None:
        items = scope["items"]
        items.append("c")
        scope["items"] = items

    chart = (
        flow_chart("Mutate", mutate_only)
        .then("Check", lambda s: (list(s["items"]), dict(s["cfg"])))
        .then("WriteBack", write_back)
        .build()
    )
    run = await chart.run(state={"items": ["a", "b"], "cfg": {"x": 1}})
    assert run.records[0].changes == ()
    assert run.records[1].changes == ()
    assert run.state == {"items": ["a", "b", "c"], "cfg": {"x": 1}}
    assert run.records[2].changes == (Change("items", "append", ["c"]),)


async def test_stage_reads_its_own_staged_writes() -> None:
    """A stage reads its own writes; those reads are not counted as reads of committed state."""
    seen: list[Any] = []

    def rw(scope: Any) -> None:
        scope["x"] = 5
        seen.append(scope["x"])

    run = await flow_chart("RW", rw).build().run()
    assert seen == [5]
    assert run.records[0].reads == ()


async def test_written_values_are_not_aliased_into_state_or_the_log() -> None:
    """A value is copied when written: mutating the caller's object later rewrites nothing."""
    kept: list[list[int]] = []

    def write(scope: Any) -> None:
        items = [1]
        scope["items"] = items
        kept.append(items)

    def mutate_behind_the_logs_back(scope: Any) -> None:
        kept[0].append(99)

    chart = flow_chart("Write", write).then("Mutate", mutate_behind_the_logs_back).build()
    run = await chart.run()
    assert run.state == {"items": [1]}
    assert run.records[0].changes == (Change("items", "set", [1]),)
    assert run.value_at("items", 0) == [1]
    assert run.records[1].changes == ()


async def test_history_is_unchanged_by_later_writes() -> None:
    """value_at / state_at rebuild each step's values, unaffected by later appends."""
    chart = flow_chart("A", lambda s: s.__setitem__("items", [1])).then(
        "B", lambda s: s.__setitem__("items", [*s["items"], 2])
    ).build()
    run = await chart.run()
    assert run.value_at("items", 0) == [1]
    assert run.value_at("items", 1) == [1, 2]
    assert run.state_at(0) == {"items": [1]}


async def test_a_hand_built_stage_without_a_function_fails_as_a_stage_error() -> None:
    """A Node of kind "stage" with no fn (the builder never makes one) is a StageError naming it."""
    from dataclasses import replace

    built = flow_chart("Start", noop).then("Empty", noop, id="empty").build()
    nodes = {**built.nodes, "empty": replace(built.nodes["empty"], fn=None)}
    chart = Chart(name=built.name, root=built.root, nodes=nodes)
    with pytest.raises(StageError, match="'Empty' has no function to run") as err:
        await chart.run()
    assert isinstance(err.value.__cause__, TypeError)
