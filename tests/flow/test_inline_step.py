"""The engine's inline step and the scope's inline reads behave exactly like the general paths.

``walk`` runs a plain stage or decider step inline (its scope built field by field, its record
committed without ``ended``), the scope's ``[]``, ``get`` and ``peek`` read committed values
without ``_read``/``thaw``, and a change is built without ``new_change``. A recorder that
watches reads and writes forces the general paths, so Hypothesis runs random plans of reads
and writes both ways and requires the same values read, the same commit log and the same
final state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.flow import Decision, FlowEvent, Scope, flow_chart
from agentfootprint.flow._scope import _ScopeState, open_scope, peek
from agentfootprint.flow._values import DraftList, FrozenList, copy_value

KEYS = ("a", "b", "c")

values = st.one_of(
    st.integers(-3, 3), st.text(max_size=3), st.none(), st.booleans(),
    st.lists(st.integers(0, 9), max_size=4),
    st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 3), max_size=2),
)
actions = st.one_of(
    st.tuples(st.just("getitem"), st.sampled_from(KEYS)),
    st.tuples(st.just("get"), st.sampled_from(KEYS)),
    st.tuples(st.just("peek"), st.sampled_from(KEYS)),
    st.tuples(st.just("set"), st.sampled_from(KEYS), values),
    st.tuples(st.just("grow"), st.sampled_from(KEYS), st.integers(0, 9)),
    st.tuples(st.just("append"), st.sampled_from(KEYS), st.integers(0, 9)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
)


def _run_plan(scope: Scope, plan: list[tuple[Any, ...]], seen: list[Any]) -> None:
    for action in plan:
        op, key = action[0], action[1]
        if op == "getitem":
            try:
                value = scope[key]
            except KeyError:
                value = "<absent>"
        elif op == "get":
            value = scope.get(key, "<absent>")
        elif op == "peek":
            value = peek(scope, key, "<absent>")
        elif op == "set":
            scope[key] = copy_value(action[2])
            continue
        elif op == "grow":  # read, append, write back (the DraftList path)
            current = scope.get(key)
            if isinstance(current, list):
                current.append(action[2])
                scope[key] = current
            continue
        elif op == "append":
            current = scope.get(key)
            if current is None or isinstance(current, list):
                scope.append(key, action[2])
            continue
        else:
            if key in scope:
                del scope[key]
            continue
        seen.append((key, copy_value(value), type(value).__name__))


class Watcher:
    """Watches every read and write, which sends the scope down its general paths."""

    id = "watcher"

    def on_read(self, event: FlowEvent) -> None:
        pass

    def on_write(self, event: FlowEvent) -> None:
        pass


def _build(plans: list[list[tuple[Any, ...]]], seen: list[Any]) -> Any:
    def stage_fn(plan: list[tuple[Any, ...]]) -> Any:
        def run(scope: Scope) -> None:
            _run_plan(scope, plan, seen)
        return run

    def decide(scope: Scope) -> Decision:
        _run_plan(scope, plans[-1], seen)
        return Decision("end", {"why": "always"})

    builder = flow_chart("S0", stage_fn(plans[0]), id="s0")
    for index, plan in enumerate(plans[1:-1], start=1):
        builder = builder.then(f"S{index}", stage_fn(plan), id=f"s{index}")
    return (builder.decide("D", decide, id="d")
            .branch("end", "End", lambda scope: None, id="end").end().build())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(actions, max_size=6), min_size=2, max_size=4),
       st.dictionaries(st.sampled_from(KEYS), values, max_size=3))
def test_inline_paths_match_the_general_paths(plans: list[list[tuple[Any, ...]]],
                                              initial: dict[str, Any]) -> None:
    fast_seen: list[Any] = []
    slow_seen: list[Any] = []
    fast = asyncio.run(_build(plans, fast_seen).run(state=copy_value(initial)))
    slow = asyncio.run(_build(plans, slow_seen).run(state=copy_value(initial),
                                                    recorders=[Watcher()]))
    assert fast_seen == slow_seen
    fast_log, slow_log = fast.log.to_json(), slow.log.to_json()
    for record in (*fast_log["records"], *slow_log["records"]):
        record.pop("runtime_stage_id")
        record.pop("parent", None)
        record.pop("control", None)
    assert fast_log == slow_log
    assert fast.state == slow.state


def test_a_step_scope_has_the_fields_open_scope_gives() -> None:
    """The scope ``walk`` builds field by field is the one ``open_scope`` builds."""
    held: list[Scope] = []
    chart = flow_chart("Only", lambda scope: held.append(scope), id="only").build()
    run = asyncio.run(chart.run())
    (scope,) = held
    assert type(scope) is Scope
    reference = open_scope(scope._frame, "only#0", "only", "Only")
    for name in _ScopeState.__slots__:
        ours, theirs = getattr(scope, name), getattr(reference, name)
        assert ours == theirs and type(ours) is type(theirs), name
    assert run.log.records[0].runtime_stage_id == "only#0"


def test_reads_of_a_committed_list_are_drafts_of_it() -> None:
    """``[]`` and ``get`` hand back the stage's own ``DraftList`` of the committed list; ``peek``
    the committed list itself; all three are recorded as reads."""
    got: dict[str, Any] = {}

    def first(scope: Scope) -> None:
        scope["items"] = [1, 2]

    def second(scope: Scope) -> None:
        got["item"], got["get"], got["peek"] = scope["items"], scope.get("items"), peek(
            scope, "items")

    run = asyncio.run(flow_chart("A", first, id="a").then("B", second, id="b").build().run())
    committed = run.final("items")
    assert type(committed) is FrozenList
    for name in ("item", "get"):
        assert type(got[name]) is DraftList and got[name] == [1, 2]
        assert got[name] is not committed and got[name]._base is committed
        got[name].append(3)  # the stage's own copy
    assert got["peek"] is committed
    assert run.log.records[1].reads == ("items",)
    assert run.state["items"] == [1, 2]
