"""The commit's fast paths build exactly what the slow, obvious code builds.

The engine builds records and changes without the dataclass ``__init__``s, settles scalar
writes without ``same_value``, and freezes flat dicts with one C-level copy; each of these must
give the same object, field for field, and keep every rule of what counts as a change.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from agentfootprint.flow import flow_chart
from agentfootprint.flow._commitlog import Change, CommitRecord, new_change, new_record
from agentfootprint.flow._values import (
    MISSING,
    FrozenDict,
    FrozenList,
    freeze,
    same_value,
    settle,
    thaw,
)


def test_new_record_sets_every_field_like_the_dataclass() -> None:
    values: dict[str, Any] = {
        "runtime_stage_id": "a#3", "stage_id": "a", "stage": "A", "kind": "decider",
        "ns": "sf#1", "read_ns": "", "reads": ("x", "y"), "changes": (Change("x", "set", 1),),
        "parent": "p#2", "control": "d#1", "loop_pass": 4, "decision": {"chosen": "b"},
        "emits": (("e", {"v": 1}),), "error": "ValueError: no", "break_reason": "",
        "paused": True,
    }
    names = [f.name for f in dataclasses.fields(CommitRecord) if f.name != "idx"]
    assert names == list(values)  # new_record's positional order is the dataclass's
    fast = new_record(*values.values())
    slow = CommitRecord(**values)
    assert fast == slow
    assert fast.idx == -1


def test_new_change_is_the_frozen_dataclass() -> None:
    fast = new_change("k", "append", [1])
    assert fast == Change("k", "append", [1])
    assert hash(new_change("k", "set", 2)) == hash(Change("k", "set", 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.key = "other"  # type: ignore[misc]
    assert new_change("k", "delete").value is None


@pytest.mark.parametrize(("base", "new", "changed"), [
    (1, 1, False), (1, 2, True), (1, 1.0, True), (1, True, True), (0, False, True),
    ("a", "a", False), ("a", "b", True), (None, 0, True), (MISSING, None, True),
    (MISSING, 0, True), (1.5, 1.5, False), (float("nan"), float("nan"), False),
    (0.0, -0.0, False), (1.0, 1, True), (True, True, False), ([1], 1, True),
    (FrozenDict({"a": 1}), "a", True),
])
def test_a_scalar_write_changes_state_exactly_when_same_value_says_so(
        base: object, new: object, changed: bool) -> None:
    result = settle(base, new)
    assert (result is not None) is changed
    if base is not MISSING:
        assert same_value(base, new) is not changed
    if result is not None:
        assert result == (new, 0) or math.isnan(result[0])


def test_dicts_differ_by_key_order_and_by_value_type() -> None:
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same_value({"a": 1}, {"a": 1.0})
    assert not same_value({"a": 1}, {"b": 1})
    assert same_value({"a": [1, {"b": float("nan")}]}, freeze({"a": [1, {"b": float("nan")}]}))
    assert settle(freeze({"a": 1, "b": 2}), {"b": 2, "a": 1}) is not None


def test_freeze_of_a_flat_dict_is_a_frozen_copy() -> None:
    source = {"a": 1, "b": "x", "c": None}
    frozen = freeze(source)
    assert type(frozen) is FrozenDict and frozen == source and frozen is not source
    source["a"] = 2
    assert frozen["a"] == 1
    nested = freeze({"a": {"b": [1, {"c": 2}]}})
    assert type(nested["a"]) is FrozenDict and type(nested["a"]["b"]) is FrozenList
    assert type(nested["a"]["b"][1]) is FrozenDict


def test_a_short_list_written_over_a_committed_one_is_compared_up_to_the_shorter() -> None:
    base = freeze([{"id": "c1"}])
    assert settle(base, [{"id": "c1"}]) is None
    grown = settle(base, [{"id": "c1"}, {"id": "c2"}])
    assert grown is not None and grown[1] == 1 and grown[0] == [{"id": "c1"}, {"id": "c2"}]
    replaced = settle(base, [{"id": "c2"}])
    assert replaced is not None and replaced[1] == 0
    shrunk = settle(freeze([1, 2]), [1])
    assert shrunk is not None and shrunk[1] == 0
    draft = thaw(base)
    draft.append({"id": "c3"})
    appended = settle(base, draft)
    assert appended is not None and appended[1] == 1 and type(appended[0]) is FrozenList


async def test_the_log_records_what_the_stages_did() -> None:
    def first(scope: object) -> None:
        scope["n"] = 1  # type: ignore[index]
        scope["same"] = "s"  # type: ignore[index]
        scope["items"] = [1]  # type: ignore[index]
        scope.emit("first", {"at": 1})  # type: ignore[attr-defined]

    def second(scope: object) -> None:
        items = scope["items"]  # type: ignore[index]
        items.append(2)
        scope["items"] = items  # type: ignore[index]
        scope["same"] = "s"  # type: ignore[index]
        scope["n"] = 1.0  # type: ignore[index]
        del scope["gone"]  # type: ignore[attr-defined]

    def idle(scope: object) -> None:
        return None

    chart = flow_chart("first", first).then("second", second).then("idle", idle).build()
    run = await chart.run(state={"same": "s", "gone": 0})
    first_rec, second_rec, idle_rec = run.log.records
    assert [c.to_json() for c in first_rec.changes] == [
        {"key": "n", "op": "set", "value": 1}, {"key": "items", "op": "set", "value": [1]}]
    assert first_rec.emits == (("first", {"at": 1}),) and first_rec.reads == ()
    assert [c.to_json() for c in second_rec.changes] == [
        {"key": "items", "op": "append", "value": [2]}, {"key": "n", "op": "set", "value": 1.0},
        {"key": "gone", "op": "delete"}]
    assert second_rec.reads == ("items",) and second_rec.parent == "first#0"
    assert idle_rec.changes == () and idle_rec.reads == () and idle_rec.emits == ()
    assert [r.idx for r in run.log.records] == [0, 1, 2]
    assert run.state == {"same": "s", "n": 1.0, "items": [1, 2]}
