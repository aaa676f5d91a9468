"""Property: the delta-encoded log replays to exactly the state a plain model of the run predicts.

Hypothesis draws a chart shape (linear, a stage that loops back, a looping decider with or
without a stage after it) and, for every stage, a plan of writes: scalars, lists that grow by
appends or shrink, dicts, deletes, writes of the value already there, write-then-revert, NaN,
and ``True`` / ``1`` / ``1.0``. A pure-Python model executes the same plans in the same order;
``state_at(i)`` must equal the model after step ``i`` under a strict equality (types exact,
NaN equal to NaN, dict order significant), ``value_at`` must agree with ``state_at``, and
every record must hold exactly the net change, as an ``append`` of the tail when a list grew.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.flow import Chart, flow_chart
from agentfootprint.flow._commitlog import CommitLog

KEYS = ("a", "b", "c", "d")
ABSENT = object()

# -- strict equality -------------------------------------------------------------------------


def _kind(value: Any) -> type:
    """Committed values are frozen list/dict subclasses; they count as lists and dicts."""
    if isinstance(value, list):
        return list
    if isinstance(value, dict):
        return dict
    return type(value)


def strict_equal(a: Any, b: Any) -> bool:
    """Equal as state values: same types all the way down, NaN == NaN, dict key order counts."""
    if _kind(a) is not _kind(b):
        return False
    if type(a) is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    if _kind(a) is list:
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if _kind(a) is dict:
        return list(a) == list(b) and all(strict_equal(a[k], b[k]) for k in a)
    return a == b


def strict_equal_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return set(a) == set(b) and all(strict_equal(a[k], b[k]) for k in a)


# -- plans -------------------------------------------------------------------------------------

SCALARS = st.sampled_from(
    [None, True, False, 0, 1, -1, 1.0, 0.5, math.nan, math.inf, "", "x", "1", "True"]
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["p", "q", "r"]), inner, max_size=3),
    max_leaves=6,
)

Op = tuple[Any, ...]

OPS = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), VALUES),
    st.tuples(st.just("append"), st.sampled_from(KEYS), st.lists(VALUES, min_size=1, max_size=3)),
    st.tuples(st.just("shrink"), st.sampled_from(KEYS), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.tuples(st.just("same"), st.sampled_from(KEYS)),
    st.tuples(st.just("revert"), st.sampled_from(KEYS), VALUES),
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.sampled_from(["p", "q", "r"]), VALUES),
)
PLANS = st.lists(OPS, max_size=4)


def apply_op(get: Any, put: Any, delete: Any, op: Op) -> None:
    """One op against a read/write/delete interface (the scope, or the model)."""
    name, key = op[0], op[1]
    current = get(key)
    if name == "set":
        put(key, copy.deepcopy(op[2]))
    elif name == "append":
        tail = copy.deepcopy(op[2])
        put(key, [*current, *tail] if isinstance(current, list) else tail)
    elif name == "shrink":
        if isinstance(current, list) and current:
            put(key, current[:-1] if op[2] else current[1:])
    elif name == "delete":
        delete(key)
    elif name == "same":
        if current is not ABSENT:
            put(key, current)
    elif name == "revert":
        put(key, copy.deepcopy(op[2]))
        if current is ABSENT:
            delete(key)
        else:
            put(key, current)
    elif name == "put":
        if type(current) is dict:
            put(key, {**current, op[2]: copy.deepcopy(op[3])})
        else:
            put(key, {op[2]: copy.deepcopy(op[3])})


def run_plan_on_scope(scope: Any, plan: list[Op]) -> None:
    def put(key: str, value: Any) -> None:
        scope[key] = value

    def delete(key: str) -> None:
        del scope[key]

    for op in plan:
        apply_op(lambda key: scope.get(key, ABSENT), put, delete, op)


def run_plan_on_model(state: dict[str, Any], plan: list[Op]) -> None:
    def put(key: str, value: Any) -> None:
        state[key] = copy.deepcopy(value)

    def delete(key: str) -> None:
        state.pop(key, None)

    for op in plan:
        apply_op(lambda key: copy.deepcopy(state[key]) if key in state else ABSENT, put, delete,
                 op)


# -- charts ------------------------------------------------------------------------------------


@dataclass
class Shape:
    kind: str  # "linear" | "stage_loop" | "decider_loop"
    plans: list[list[Op]]  # one per chain stage s0..s{n-1}
    loop_target: int  # index of the stage the loop goes back to
    passes: int  # how many times the loop body runs in total (>= 1)
    decider_plan: list[Op]
    again_plan: list[Op]
    done_plan: list[Op]
    tail_plan: list[Op] | None  # decider_loop only: a stage after the decider


@st.composite
def shapes(draw: Any) -> Shape:
    kind = draw(st.sampled_from(["linear", "stage_loop", "decider_loop"]))
    n = draw(st.integers(1, 4))
    return Shape(
        kind=kind,
        plans=[draw(PLANS) for _ in range(n)],
        loop_target=draw(st.integers(0, n - 1)),
        passes=draw(st.integers(1, 4)),
        decider_plan=draw(PLANS),
        again_plan=draw(PLANS),
        done_plan=draw(PLANS),
        tail_plan=draw(st.none() | PLANS),
    )


def build(shape: Shape) -> Chart:
    """The chart of ``shape``; loop counters live in closures, so they cost no state reads."""
    counters = {"loop": 0, "decide": 0}
    n = len(shape.plans)

    def stage_fn(i: int) -> Any:
        plan = shape.plans[i]
        last = i == n - 1

        def fn(scope: Any) -> None:
            run_plan_on_scope(scope, plan)
            if shape.kind == "stage_loop" and last:
                counters["loop"] += 1
                if counters["loop"] >= shape.passes:
                    scope.break_("enough")

        return fn

    def plain(plan: list[Op]) -> Any:
        return lambda scope: run_plan_on_scope(scope, plan)

    def decider(scope: Any) -> str:
        run_plan_on_scope(scope, shape.decider_plan)
        counters["decide"] += 1
        return "again" if counters["decide"] < shape.passes else "done"

    builder = flow_chart("s0", stage_fn(0), id="s0")
    for i in range(1, n):
        builder = builder.then(f"s{i}", stage_fn(i), id=f"s{i}")
    target = f"s{shape.loop_target}"
    if shape.kind == "stage_loop":
        builder = builder.loop_to(target)
    elif shape.kind == "decider_loop":
        builder = (
            builder.decide("more", decider, id="more")
            .branch("again", "again", plain(shape.again_plan), loop_to=target)
            .branch("done", "done", plain(shape.done_plan))
            .end()
        )
        if shape.tail_plan is not None:
            builder = builder.then("tail", plain(shape.tail_plan), id="tail")
    return builder.build()


def expected_steps(shape: Shape) -> list[tuple[str, list[Op]]]:
    """The (stage id, plan) of every step the run should execute, in order."""
    chain = [(f"s{i}", plan) for i, plan in enumerate(shape.plans)]
    loop_body = chain[shape.loop_target :]
    if shape.kind == "linear":
        return chain
    if shape.kind == "stage_loop":
        return chain + loop_body * (shape.passes - 1)
    steps = [*chain, ("more", shape.decider_plan)]
    for _ in range(shape.passes - 1):
        steps += [("again", shape.again_plan), *loop_body, ("more", shape.decider_plan)]
    steps.append(("done", shape.done_plan))
    if shape.tail_plan is not None:
        steps.append(("tail", shape.tail_plan))
    return steps


class CommitCollector:
    """A recorder that keeps every committed record it is shown."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def on_commit(self, event: Any) -> None:
        self.records.append(event.value)


# -- the property ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes(), initial=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4))
def test_log_replays_to_the_model_state(shape: Shape, initial: dict[str, Any]) -> None:
    """For random charts and writes, state_at/value_at after every step equal a pure model, each
    record holds exactly the net change (appends as tails), and the commit events are the log."""
    collector = CommitCollector()
    run = build(shape).run_sync(state=copy.deepcopy(initial), recorders=[collector])
    log = run.log
    steps = expected_steps(shape)

    assert [r.stage_id for r in log.records] == [stage for stage, _ in steps]
    assert [r.idx for r in log.records] == list(range(len(steps)))
    assert collector.records == log.records
    assert all(a is b for a, b in zip(collector.records, log.records, strict=True))

    model = copy.deepcopy(initial)
    assert strict_equal_state(log.state_at(-1), model)
    last_change: dict[str, int] = {}
    for i, (_, plan) in enumerate(steps):
        before = copy.deepcopy(model)
        run_plan_on_model(model, plan)
        record = log.records[i]

        replayed = log.state_at(i)
        assert strict_equal_state(replayed, model), (i, replayed, model)
        for key in KEYS:
            got = log.value_at(key, i, default=ABSENT)
            want = replayed.get(key, ABSENT)
            assert (got is ABSENT and want is ABSENT) or strict_equal(got, want), (i, key)

        changes = {c.key: c for c in record.changes}
        assert len(changes) == len(record.changes), f"record {i} changes a key twice"
        for key in KEYS:
            old, new = before.get(key, ABSENT), model.get(key, ABSENT)
            if (old is ABSENT and new is ABSENT) or (
                old is not ABSENT and new is not ABSENT and strict_equal(old, new)
            ):
                assert key not in changes, (i, key, old, new, changes.get(key))
                continue
            assert key in changes, (i, key, old, new)
            change = changes[key]
            last_change[key] = i
            if new is ABSENT:
                assert change.op == "delete"
                continue
            grew = (
                type(old) is list and type(new) is list and 0 < len(old) < len(new)
                and strict_equal(new[: len(old)], old)
            )
            if grew:
                assert change.op == "append", (i, key, old, new, change)
                assert strict_equal(change.value, new[len(old) :])
            else:
                assert change.op == "set", (i, key, old, new, change)
                assert strict_equal(change.value, new)
        for key in KEYS:
            assert log.last_writer(key, i + 1) == last_change.get(key)

    assert strict_equal_state(run.state, model)
    assert strict_equal_state(log.state_at(len(log) - 1), model)

    reloaded = CommitLog.from_json(log.to_json())
    assert strict_equal_state(reloaded.state_at(len(log) - 1), model)


def test_decider_loop_followed_by_a_stage_runs_that_stage_once() -> None:
    """A decider whose looping branch goes back upstream, with a stage after the decider, runs
    the loop to its end and then that stage exactly once (not once per pass)."""
    passes = {"n": 0}

    def more(scope: Any) -> str:
        passes["n"] += 1
        return "again" if passes["n"] < 3 else "done"

    chart = (
        flow_chart("start", lambda scope: None, id="start")
        .then("count", lambda scope: scope.__setitem__("n", scope.get("n", 0) + 1), id="count")
        .decide("more", more, id="more")
        .branch("again", "again", lambda scope: None, loop_to="count")
        .branch("done", "done", lambda scope: None)
        .end()
        .then("after", lambda scope: scope.__setitem__("after", scope.get("after", 0) + 1),
              id="after")
        .build()
    )
    run = chart.run_sync()
    assert [r.stage_id for r in run.records] == [
        "start", "count", "more", "again", "count", "more", "again", "count", "more", "done",
        "after",
    ]
    assert run.state == {"n": 3, "after": 1}


def test_decider_loop_with_a_following_stage_is_not_bounded_by_max_depth() -> None:
    """A looping decider with a stage after it may loop more times than max_depth allows
    nesting: a loop pass must not cost a level of recursion."""
    chart = (
        flow_chart("count", lambda scope: scope.__setitem__("n", scope.get("n", 0) + 1), id="count")
        .decide("more", lambda scope: "again" if scope["n"] < 50 else "done", id="more")
        .branch("again", "again", lambda scope: None, loop_to="count")
        .branch("done", "done", lambda scope: None)
        .end()
        .then("after", lambda scope: scope.__setitem__("finished", True), id="after")
        .build()
    )
    run = chart.run_sync(max_depth=10)
    assert run.state == {"n": 50, "finished": True}
