"""The commit log: net changes, one record per executed step, point-in-time queries, JSON."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agentfootprint.errors import StageError
from agentfootprint.flow import FlowRun, flow_chart
from agentfootprint.flow._commitlog import Change, CommitLog, CommitRecord
from agentfootprint.flow._values import MISSING


def _run(*stages: Any, state: dict[str, Any] | None = None, **kwargs: Any) -> FlowRun:
    """Run stages ``s0, s1, ...`` in a line."""
    builder = flow_chart("s0", stages[0], id="s0")
    for i, fn in enumerate(stages[1:], start=1):
        builder = builder.then(f"s{i}", fn, id=f"s{i}")
    return builder.build().run_sync(state=state, **kwargs)


def _writes(**values: Any) -> Any:
    def fn(scope: Any) -> None:
        for key, value in values.items():
            scope[key] = value

    return fn


def _changes(record: CommitRecord) -> list[tuple[str, str, Any]]:
    return [(c.key, c.op, c.value) for c in record.changes]


# -- net change ------------------------------------------------------------------------------


def test_noop_write_leaves_a_record_without_changes() -> None:
    """Writing the values already in state records the step, its reads, and no change."""

    def rewrite(scope: Any) -> None:
        scope["n"] = scope["n"]
        scope["l"] = [1, [2, {"a": 3}]]
        scope["d"] = {"k": [1.5], "z": None}
        scope["nan"] = math.nan

    run = _run(rewrite, state={"n": 1, "l": [1, [2, {"a": 3}]], "d": {"k": [1.5], "z": None},
                               "nan": math.nan})
    assert len(run.records) == 1
    record = run.records[0]
    assert record.changes == ()
    assert record.reads == ("n",)
    assert run.log.last_writer("n") is None


@pytest.mark.parametrize(
    ("before", "after"),
    [(1, True), (1, 1.0), (True, 1.0), (0, False), ([1], [True]), ({"a": 1}, {"a": 1.0}),
     ([1, 2], [1, 2.0]), (None, 0), ("1", 1)],
)
def test_equal_but_differently_typed_write_is_a_change(before: Any, after: Any) -> None:
    """``1``, ``1.0`` and ``True`` are different state values, also nested: the write is kept."""
    run = _run(_writes(k=after), state={"k": before})
    assert _changes(run.records[0]) == [("k", "set", after)]
    got = run.log.value_at("k", 0)
    assert type(got) is type(after) and json.dumps(got) == json.dumps(after)


def test_write_then_revert_in_one_stage_vanishes() -> None:
    """A key written and then restored, created and then deleted, or deleted and then restored
    within one stage leaves no change; the other keys' net changes remain."""

    def churn(scope: Any) -> None:
        scope["x"] = 2
        scope["x"] = 1
        scope["tmp"] = "scratch"
        del scope["tmp"]
        del scope["l"]
        scope["l"] = [1, 2]
        scope["l"] = [*scope["l"], 3]
        scope["l"] = [1, 2]
        del scope["never"]
        scope["kept"] = "yes"

    run = _run(churn, state={"x": 1, "l": [1, 2]})
    assert _changes(run.records[0]) == [("kept", "set", "yes")]
    assert run.state == {"x": 1, "l": [1, 2], "kept": "yes"}


def test_net_change_kinds() -> None:
    """Growth of a non-empty list is an append of the tail; other list edits, new keys and
    growth from empty are sets; removals are deletes without a value."""

    def edit(scope: Any) -> None:
        scope["grow"] = [*scope["grow"], {"m": 2}, {"m": 3}]
        scope["shrink"] = scope["shrink"][:-1]
        scope["edit"] = [9, *scope["edit"][1:]]
        scope["empty"] = ["first"]
        scope["new"] = [1]
        del scope["gone"]

    run = _run(edit, state={"grow": [{"m": 1}], "shrink": [1, 2], "edit": [1, 2], "empty": [],
                            "gone": 0})
    assert _changes(run.records[0]) == [
        ("grow", "append", [{"m": 2}, {"m": 3}]),
        ("shrink", "set", [1]),
        ("edit", "set", [9, 2]),
        ("empty", "set", ["first"]),
        ("new", "set", [1]),
        ("gone", "delete", None),
    ]
    assert run.records[0].changes[-1].to_json() == {"key": "gone", "op": "delete"}


def test_every_executed_step_appends_a_record() -> None:
    """Empty stages, deciders, branch stages, selectors, parallel children, subflow mounts
    (enter and exit) and a stage that raised each leave their own record, in execution order."""
    inner = flow_chart("inner", lambda scope: None, id="inner").build()

    def boom(scope: Any) -> None:
        scope["partial"] = True
        raise ValueError("no")

    chart = (
        flow_chart("empty", lambda scope: None, id="empty")
        .decide("pick", lambda scope: "left", id="pick")
        .branch("left", "left", lambda scope: None)
        .branch("right", "right", lambda scope: None)
        .end()
        .select("fan", lambda scope: ["x", "y"], id="fan")
        .branch("x", "x", lambda scope: None)
        .branch("y", "y", lambda scope: None)
        .branch("z", "z", lambda scope: None)
        .end()
        .then("fork", lambda scope: None, id="fork")
        .parallel(("c1", lambda scope: None), ("c2", lambda scope: None))
        .subflow("sub", inner)
        .then("boom", boom, id="boom")
        .then("never", lambda scope: None, id="never")
        .build()
    )
    with pytest.raises(StageError) as caught:
        chart.run_sync()
    run = caught.value.run
    assert [(r.stage_id, r.kind) for r in run.records] == [
        ("empty", "stage"),
        ("pick", "decider"),
        ("left", "stage"),
        ("fan", "selector"),
        ("x", "stage"),
        ("y", "stage"),
        ("fork", "stage"),
        ("c1", "stage"),
        ("c2", "stage"),
        ("sub", "subflow-enter"),
        ("sub/inner", "stage"),
        ("sub", "subflow-exit"),
        ("boom", "stage"),
    ]
    assert all(r.changes == () for r in run.records[:-1])
    assert run.records[1].decision == {"chosen": "left"}
    assert run.records[-1].error == "ValueError: no"
    assert _changes(run.records[-1]) == [("partial", "set", True)]
    assert [r.idx for r in run.records] == list(range(len(run.records)))


# -- point-in-time queries -------------------------------------------------------------------


def test_last_writer_is_exclusive_and_ignores_reads_and_noops() -> None:
    """``last_writer(key, before)`` is the latest record strictly before ``before`` that changed
    the key; reads, no-op writes and other namespaces do not count."""
    inner = flow_chart("inner", _writes(k="inner"), id="inner").build()
    run = _run(
        _writes(k=1),  # 0: writes
        lambda scope: scope["k"],  # 1: reads only
        _writes(k=1),  # 2: no-op write
        _writes(other=1),  # 3: another key
        _writes(k=2),  # 4: writes
        state={"k": 0},
    )
    log = run.log
    assert log.last_writer("k") == 4
    assert log.last_writer("k", 5) == 4
    assert log.last_writer("k", 4) == 0
    assert log.last_writer("k", 1) == 0
    assert log.last_writer("k", 0) is None
    assert log.last_writer("missing") is None
    assert log.last_writer("other", 3) is None
    assert log.last_writer("other", 4) == 3

    nested = (
        flow_chart("first", _writes(k="outer"), id="first")
        .subflow("sub", inner)
        .build()
        .run_sync()
    )
    ns = nested.records[1].ns
    assert ns != ""
    assert nested.log.last_writer("k") == 0
    assert nested.log.last_writer("k", ns=ns) == 2
    assert nested.log.last_writer("k", 2, ns=ns) is None


def test_value_at_follows_appends_deletes_and_initial_state() -> None:
    """``value_at`` rebuilds a key at any step from the initial state, sets, appended tails and
    deletes, and agrees with ``state_at`` everywhere."""

    def add(text: str) -> Any:
        return lambda scope: scope.__setitem__("msgs", [*scope["msgs"], text])

    run = _run(
        add("a"),  # 0: append
        lambda scope: scope.__delitem__("gone"),  # 1: delete
        add("b"),  # 2: append
        _writes(msgs=[]),  # 3: set to empty
        lambda scope: None,  # 4: nothing
        _writes(msgs=["c"]),  # 5: set (growth from empty)
        add("d"),  # 6: append
        _writes(gone=[1]),  # 7: re-created
        lambda scope: scope.__delitem__("msgs"),  # 8: delete
        _writes(msgs=["e"]),  # 9: set after delete
        state={"msgs": ["hi"], "gone": 1},
    )
    log = run.log
    expected_msgs = [["hi"], ["hi", "a"], ["hi", "a"], ["hi", "a", "b"], [], [], ["c"],
                     ["c", "d"], ["c", "d"], MISSING, ["e"]]
    expected_gone = [1, 1, MISSING, MISSING, MISSING, MISSING, MISSING, MISSING, [1], [1], [1]]
    for step in range(-1, len(log)):
        assert log.value_at("msgs", step) == expected_msgs[step + 1], step
        assert log.value_at("gone", step) == expected_gone[step + 1], step
        state = log.state_at(step)
        assert state.get("msgs", MISSING) == expected_msgs[step + 1]
        assert state.get("gone", MISSING) == expected_gone[step + 1]
    assert [c.op for r in log for c in r.changes if c.key == "msgs"] == [
        "append", "append", "set", "set", "append", "delete", "set",
    ]
    assert log.value_at("gone", 3, default="absent") == "absent"
    assert log.value_at("never", 5, default=None) is None
    assert log.value_at("msgs", 100) == ["e"]


def test_queries_return_copies() -> None:
    """Mutating what ``value_at`` or ``state_at`` returned does not change the log."""
    run = _run(_writes(l=[1, {"a": [2]}]), lambda scope: scope.__setitem__("l", [*scope["l"], 3]))
    log = run.log
    got = log.value_at("l", 1)
    got.append("x")
    got[1]["a"].append("y")
    state = log.state_at(0)
    state["l"].append("z")
    state["l"][1]["a"].clear()
    assert log.value_at("l", 1) == [1, {"a": [2]}, 3]
    assert log.state_at(1) == {"l": [1, {"a": [2]}, 3]}


def test_mutating_the_final_state_does_not_rewrite_the_log() -> None:
    """The log is evidence: changing ``run.state`` after the run leaves every past value, the
    JSON form and the checkpointable history unchanged."""
    run = _run(_writes(l=[1, 2], d={"k": [1]}), lambda scope: scope.__setitem__("m", [{"x": 1}]))
    before = json.dumps(run.log.to_json())
    run.state["l"].append(99)
    run.state["d"]["k"].append(99)
    run.state["m"][0]["x"] = 99
    assert run.log.value_at("l", 0) == [1, 2]
    assert run.log.state_at(1) == {"l": [1, 2], "d": {"k": [1]}, "m": [{"x": 1}]}
    assert json.dumps(run.log.to_json()) == before


def test_mutating_a_written_object_later_does_not_rewrite_the_log() -> None:
    """A stage that keeps a reference to a list it wrote and mutates it in a later stage
    (outside the scope) changes neither the recorded past nor, silently, the state."""
    kept: list[Any] = []

    def write(scope: Any) -> None:
        kept.append(["first"])
        scope["l"] = kept[0]

    def sneak(scope: Any) -> None:
        kept[0].append("sneaked in")

    run = _run(write, sneak, lambda scope: scope.__setitem__("seen", scope["l"]))
    assert run.log.value_at("l", 0) == ["first"]
    assert run.records[1].changes == ()
    assert run.log.state_at(len(run.log) - 1) == run.state
    assert run.state["seen"] == run.state["l"] == ["first"]


# -- JSON ----------------------------------------------------------------------------------


def _rich_run() -> FlowRun:
    inner = (
        flow_chart("draft", lambda scope: scope.__setitem__("doc", [scope.args["n"]]), id="draft")
        .build()
    )

    def decide_fn(scope: Any) -> str:
        return "big" if scope["n"] > 1 else "small"

    def emit_and_break(scope: Any) -> None:
        scope.emit("note", {"n": scope["n"], "why": [1, 2]})
        scope["msgs"] = [*scope["msgs"], {"role": "user", "content": "hi"}]
        if scope["n"] >= 3:
            scope.break_("done")

    return (
        flow_chart("seed", lambda scope: scope.__setitem__("n", scope.get("n", 0) + 1), id="seed")
        .decide("size", decide_fn, id="size")
        .branch("big", "big", lambda scope: scope.__setitem__("size", "big"))
        .branch("small", "small", lambda scope: scope.__setitem__("size", math.nan))
        .end()
        .subflow("sub", inner, input=lambda view: {"n": view["n"]},
                 output=lambda view: {"doc": view["doc"]})
        .then("talk", emit_and_break, id="talk")
        .loop_to("seed")
        .build()
        .run_sync(state={"msgs": [{"role": "system", "content": "be brief"}], "gone": True})
    )


def test_json_round_trip_keeps_records_and_queries() -> None:
    """``CommitLog.from_json(to_json())`` through JSON text gives equal records, the same JSON,
    and the same answers from ``state_at``, ``value_at``, ``last_writer`` and ``find``."""
    run = _rich_run()
    log = run.log
    kinds = {r.kind for r in log}
    assert {"stage", "decider", "subflow-enter", "subflow-exit"} <= kinds
    assert any(r.emits for r in log) and any(r.break_reason for r in log)
    assert any(r.loop_pass for r in log) and any(r.read_ns is not None for r in log)

    text = json.dumps(log.to_json())
    loaded = CommitLog.from_json(json.loads(text))
    assert json.dumps(loaded.to_json()) == text
    assert len(loaded) == len(log)
    for a, b in zip(log, loaded, strict=True):
        assert json.dumps(a.to_json()) == json.dumps(b.to_json())
        assert (a.idx, a.runtime_stage_id, a.kind, a.ns, a.reads, a.parent, a.loop_pass) == (
            b.idx, b.runtime_stage_id, b.kind, b.ns, b.reads, b.parent, b.loop_pass)
        assert [(c.key, c.op) for c in a.changes] == [(c.key, c.op) for c in b.changes]
    namespaces = {r.ns for r in log}
    keys = {c.key for r in log for c in r.changes} | {"n", "absent"}
    for ns in namespaces:
        for step in range(-1, len(log)):
            assert json.dumps(loaded.state_at(step, ns=ns)) == json.dumps(log.state_at(step, ns=ns))
            for key in keys:
                want = log.value_at(key, step, ns=ns, default="<absent>")
                got = loaded.value_at(key, step, ns=ns, default="<absent>")
                assert json.dumps(got) == json.dumps(want)
                assert loaded.last_writer(key, step, ns=ns) == log.last_writer(key, step, ns=ns)
    for record in log:
        assert loaded.find(record.runtime_stage_id) is not None
        assert [r.idx for r in loaded.records_for(record.runtime_stage_id)] == [
            r.idx for r in log.records_for(record.runtime_stage_id)]


def test_from_json_of_a_hand_written_log() -> None:
    """A minimal hand-written log loads with defaults and replays its initial state and changes."""
    log = CommitLog.from_json({
        "initial": {"": {"l": [1]}},
        "records": [
            {"idx": 0, "runtime_stage_id": "a#0", "stage_id": "a", "stage": "A",
             "changes": [{"key": "l", "op": "append", "value": [2]}]},
            {"idx": 1, "runtime_stage_id": "b#1", "stage_id": "b", "stage": "B",
             "changes": [{"key": "l", "op": "delete"}]},
        ],
    })
    assert log[0].kind == "stage" and log[0].ns == "" and log[0].reads == ()
    assert log[0].changes == (Change("l", "append", [2]),)
    assert log.value_at("l", 0) == [1, 2]
    assert log.state_at(1) == {}
    assert log.last_writer("l") == 1


# -- size ----------------------------------------------------------------------------------


def _append_loop(iterations: int) -> FlowRun:
    message = {"role": "assistant", "content": "x" * 40}

    def step(scope: Any) -> None:
        history = scope["history"]
        scope["history"] = [*history, dict(message)]
        scope["turns"] = scope["turns"] + 1
        if len(history) >= iterations:
            scope.break_("enough")

    chart = flow_chart("step", step, id="step").loop_to("step").build()
    return chart.run_sync(state={"history": [{"role": "system", "content": "go"}], "turns": 0},
                          max_loop_iterations=iterations + 10)


def test_log_size_grows_linearly_with_an_append_loop() -> None:
    """A 1000-iteration loop that appends one message per pass logs one message per record:
    JSON bytes per iteration at 1000 are within 10% of those at 100."""
    small, large = _append_loop(100), _append_loop(1000)
    assert len(small.records) == 100 and len(large.records) == 1000
    assert len(large.state["history"]) == 1001
    for record in large.records:
        ops = {c.key: (c.op, c.value) for c in record.changes}
        assert ops["history"][0] == "append"
        assert ops["history"][1] == [{"role": "assistant", "content": "x" * 40}]
    per_small = len(json.dumps(small.log.to_json())) / 100
    per_large = len(json.dumps(large.log.to_json())) / 1000
    assert per_large <= per_small * 1.10, (per_small, per_large)
    assert large.log.value_at("history", 999) == large.state["history"]
    assert len(large.log.value_at("history", 499)) == 501
