"""A commit costs what changed, not the size of the state, and still records exactly the net change.

Issue 21: a long history used to be frozen and compared again, element by element, at every
commit. Reads of a committed list now return a ``DraftList`` that remembers its origin, so an
append is frozen, compared and recorded in time proportional to the tail. These tests count
the work (calls into ``freeze`` / ``same_value``, objects that fail when compared) and check
with Hypothesis that every mix of appends, in-place edits, rebuilt lists, sets and deletes
still yields the state and the commit log of a naive reference.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.flow import _values, flow_chart
from agentfootprint.flow._values import (
    DraftList,
    FrozenDict,
    FrozenList,
    extends,
    freeze,
    same_value,
    settle,
    thaw,
)
from agentfootprint.providers._base import WireMemo, wire_messages


class Untouchable:
    """A value that fails the test if anything compares or copies it."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("an element of the shared prefix was compared")

    __hash__ = object.__hash__

    def __deepcopy__(self, memo: dict[int, Any]) -> Untouchable:
        raise AssertionError("an element of the shared prefix was copied")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts calls to ``freeze`` and ``same_value`` (recursive calls included)."""
    calls = {"freeze": 0, "same_value": 0}
    real_freeze, real_same = _values.freeze, _values.same_value

    def freeze_counted(value: object) -> Any:
        calls["freeze"] += 1
        return real_freeze(value)

    def same_counted(a: Any, b: Any) -> bool:
        calls["same_value"] += 1
        return real_same(a, b)

    monkeypatch.setattr(_values, "freeze", freeze_counted)
    monkeypatch.setattr(_values, "same_value", same_counted)
    return calls


def long_history(n: int = 2000) -> FrozenList:
    return freeze([{"role": "user", "content": f"m{i}", "x": Untouchable()} for i in range(n)])


def test_an_append_to_a_read_list_freezes_and_compares_only_the_tail(
        counted: dict[str, int]) -> None:
    base = long_history()
    read = thaw(base)
    assert type(read) is DraftList and read == base and read is not base
    read.append({"role": "assistant", "content": "hi", "tool_calls": [{"id": "c1"}]})
    counted.update(freeze=0, same_value=0)
    settled = settle(base, read)
    assert settled is not None
    frozen, grown = settled
    assert grown == len(base)  # recorded as an append of the tail
    assert type(frozen) is FrozenList and len(frozen) == len(base) + 1
    assert all(x is y for x, y in zip(frozen, base, strict=False))  # the prefix is shared
    assert type(frozen[-1]) is FrozenDict and type(frozen[-1]["tool_calls"]) is FrozenList
    assert counted["freeze"] <= 3  # the new message and its nested parts, not 2,000 messages
    assert counted["same_value"] == 0
    assert extends(frozen, base) and not extends(base, frozen)


def test_a_rebuilt_list_is_compared_by_identity_before_any_deep_comparison(
        counted: dict[str, int]) -> None:
    base = long_history()
    counted.update(freeze=0, same_value=0)
    for rebuilt in ([*base, {"role": "user", "content": "new"}],
                    base + [{"role": "user", "content": "new"}],  # noqa: RUF005 (the case)
                    thaw(base) + [{"role": "user", "content": "new"}]):  # noqa: RUF005
        settled = settle(base, rebuilt)
        assert settled is not None and settled[1] == len(base)
    assert counted["same_value"] == 0
    assert counted["freeze"] <= 6


def test_rewriting_the_same_list_is_no_change_and_costs_no_comparison(
        counted: dict[str, int]) -> None:
    base = long_history()
    counted.update(freeze=0, same_value=0)
    assert settle(base, thaw(base)) is None
    assert settle(base, list(base)) is None
    assert same_value(base, thaw(base)) and same_value(list(base), base)
    assert counted == {"freeze": 0, "same_value": 0}  # (the direct calls above are not counted)
    assert freeze(thaw(base)) is base  # an unchanged read freezes back to the committed list


@pytest.mark.parametrize("edit", [
    lambda d: d.__setitem__(3, {"role": "user", "content": "changed"}),
    lambda d: d.insert(0, {"role": "system", "content": "first"}),
    lambda d: d.pop(5),
    lambda d: d.__delitem__(slice(2, 4)),
    lambda d: d.reverse(),
    lambda d: d.__setitem__(slice(0, 1), [1, 2]),
    lambda d: d.__setitem__(-1, 1.0),
])
def test_an_edit_inside_the_prefix_is_seen(edit: Any) -> None:
    base = freeze([{"role": "user", "content": f"m{i}"} for i in range(30)])
    read = thaw(base)
    edit(read)
    read.append({"role": "user", "content": "tail"})
    expected = copy.deepcopy(list(read))
    settled = settle(base, read)
    assert settled is not None
    frozen, grown = settled
    assert grown == 0  # not an append: the prefix changed
    assert same_value(frozen, expected)


def test_an_equal_but_different_element_is_not_taken_for_the_old_one() -> None:
    base = freeze(list(range(40)))
    rebuilt = [*base[:-1], 39.0, 40]  # 39.0 == 39, but it is another state value
    settled = settle(base, rebuilt)
    assert settled is not None and settled[1] == 0
    assert type(settled[0][39]) is float


def test_a_draft_list_behaves_as_a_plain_list_outside_the_engine() -> None:
    import json
    import pickle

    read = thaw(freeze([1, [2, 3], {"a": 4}]))
    assert isinstance(read, list) and json.dumps(read) == '[1, [2, 3], {"a": 4}]'
    assert type(pickle.loads(pickle.dumps(read))) is list
    assert type(copy.deepcopy(read)) is list and copy.deepcopy(read) == read
    assert type(read.copy()) is DraftList and type(read[:]) is list
    read.append(5)
    read += [6]
    assert read == [1, [2, 3], {"a": 4}, 5, 6]
    with pytest.raises(TypeError, match="read-only"):
        read[1].append(9)  # nested values stay frozen


def test_wire_memo_equals_wire_messages_and_converts_only_new_messages() -> None:
    history = freeze([{"role": "user", "content": "q"},
                      {"role": "user", "content": "nudge", "injected_by": "step-nudge"}])
    memo = WireMemo()
    first = memo(thaw(history))
    assert first == wire_messages(history) and "injected_by" not in first[1]
    for i in range(30):
        read = thaw(history)
        read.append({"role": "assistant", "content": f"a{i}"})
        if i % 7 == 0:
            read.append({"role": "user", "content": "hint", "injected_by": "x"})
        settled = settle(history, read)
        assert settled is not None
        history = settled[0]
        got = memo(thaw(history))
        assert got == wire_messages(history)
        got[1]["content"] = "changed by a provider"  # each call gets its own cleaned copies
    assert memo(thaw(history))[1]["content"] == "nudge"
    edited = thaw(history)
    edited[0] = {"role": "user", "content": "other"}  # not an extension: converted whole
    assert memo(edited) == wire_messages(edited)


# -- property: the engine against a naive reference -------------------------------------------

KEYS = ("h", "u", "s")
ABSENT = object()
SCALAR = st.sampled_from([None, True, 0, 1, 1.0, math.nan, "x", "y"])
ITEM = st.one_of(SCALAR, st.dictionaries(st.sampled_from(["a", "b"]), SCALAR, max_size=2),
                 st.lists(SCALAR, max_size=2))

OPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(KEYS), ITEM),
    st.tuples(st.just("extend"), st.sampled_from(KEYS), st.lists(ITEM, max_size=3)),
    st.tuples(st.just("rebuild"), st.sampled_from(KEYS), ITEM),
    st.tuples(st.just("concat"), st.sampled_from(KEYS), ITEM),
    st.tuples(st.just("setitem"), st.sampled_from(KEYS), st.integers(-30, 30), ITEM),
    st.tuples(st.just("insert"), st.sampled_from(KEYS), st.integers(-30, 30), ITEM),
    st.tuples(st.just("pop"), st.sampled_from(KEYS), st.integers(-30, 30)),
    st.tuples(st.just("delslice"), st.sampled_from(KEYS), st.integers(-30, 30),
              st.integers(-30, 30)),
    st.tuples(st.just("reverse"), st.sampled_from(KEYS)),
    st.tuples(st.just("same"), st.sampled_from(KEYS)),
    st.tuples(st.just("set"), st.sampled_from(KEYS), st.lists(ITEM, max_size=20)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
)


def apply(current: Any, op: tuple[Any, ...]) -> Any:
    """The new value of the key after ``op`` (``ABSENT`` deletes); ``current`` may be edited."""
    name = op[0]
    if name == "delete":
        return ABSENT
    if name == "set":
        return copy.deepcopy(op[2])
    if not isinstance(current, list):
        return [copy.deepcopy(op[2])] if name in ("append", "rebuild", "concat") else current
    if name == "append":
        current.append(copy.deepcopy(op[2]))
    elif name == "extend":
        current.extend(copy.deepcopy(op[2]))
    elif name == "rebuild":
        return [*current, copy.deepcopy(op[2])]
    elif name == "concat":
        return current + [copy.deepcopy(op[2])]  # noqa: RUF005 (the case under test)
    elif name == "setitem" and -len(current) <= op[2] < len(current):
        current[op[2]] = copy.deepcopy(op[3])
    elif name == "insert":
        current.insert(op[2], copy.deepcopy(op[3]))
    elif name == "pop" and -len(current) <= op[2] < len(current):
        current.pop(op[2])
    elif name == "delslice":
        del current[op[2]:op[3]]
    elif name == "reverse":
        current.reverse()
    return current


def unchanged(a: Any, b: Any) -> bool:
    if a is ABSENT or b is ABSENT:
        return a is b
    return same_value(a, b)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.lists(ITEM, min_size=16, max_size=40),
       plans=st.lists(st.lists(OPS, min_size=1, max_size=4), min_size=1, max_size=6))
def test_state_and_log_equal_a_naive_reference(start: list[Any],
                                               plans: list[list[tuple[Any, ...]]]) -> None:
    """Long lists (past the identity-scan threshold), every kind of edit, one stage per plan."""

    def stage(plan: list[tuple[Any, ...]]) -> Any:
        def fn(scope: Any) -> None:
            for op in plan:
                new = apply(scope.get(op[1], ABSENT), op)
                if new is not ABSENT:
                    scope[op[1]] = new
                elif op[1] in scope:
                    del scope[op[1]]
        return fn

    builder = flow_chart("p0", stage(plans[0]), id="p0")
    for i, plan in enumerate(plans[1:], start=1):
        builder = builder.then(f"p{i}", stage(plan), id=f"p{i}")
    initial = {k: copy.deepcopy(start) for k in KEYS}
    run = builder.build().run_sync(state=copy.deepcopy(initial))

    model: dict[str, Any] = copy.deepcopy(initial)
    for i, plan in enumerate(plans):
        before = copy.deepcopy(model)
        for op in plan:
            current = copy.deepcopy(model[op[1]]) if op[1] in model else ABSENT
            new = apply(current, op)
            if new is ABSENT:
                model.pop(op[1], None)
            else:
                model[op[1]] = copy.deepcopy(new)
        record = run.log.records[i]
        changes = {c.key: c for c in record.changes}
        for key in KEYS:
            old, now = before.get(key, ABSENT), model.get(key, ABSENT)
            if unchanged(old, now):
                assert key not in changes, (i, key, changes.get(key))
                continue
            change = changes[key]
            if now is ABSENT:
                assert change.op == "delete"
            elif (isinstance(old, list) and isinstance(now, list) and 0 < len(old) < len(now)
                  and same_value(now[:len(old)], old)):
                assert change.op == "append" and same_value(change.value, now[len(old):])
            else:
                assert change.op == "set" and same_value(change.value, now)
        replayed = run.log.state_at(i)
        assert set(replayed) == set(model)
        assert all(same_value(replayed[k], model[k]) for k in model)
    assert set(run.state) == set(model)
    assert all(same_value(run.state[k], model[k]) for k in model)
    assert all(type(run.state[k]) is not DraftList for k in model)
