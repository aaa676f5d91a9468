"""``freeze`` (dispatching on the exact type, without isinstance narrowing) returns the frozen
form of any JSON value and reuses what is frozen already.

Hypothesis builds JSON values that mix plain and already-frozen parts; the result must equal
the input, be frozen all the way down, reuse every part that was frozen already (by
identity), and never hand back the caller's own list or dict.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentfootprint.flow._values import FrozenDict, FrozenList, freeze

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=4)


def _mixed(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    containers = st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=3), inner,
                                                                  max_size=6)
    return containers | containers.map(freeze)  # some parts arrive frozen already


values = st.recursive(scalars, _mixed, max_leaves=50)


def _frozen_throughout(value: Any) -> bool:
    if isinstance(value, list):
        return type(value) is FrozenList and all(_frozen_throughout(x) for x in value)
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(_frozen_throughout(x) for x in value.values())
    return True


def _frozen_parts(value: Any) -> list[Any]:
    """The frozen containers directly inside ``value`` (what freeze must reuse)."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else ()
    return [x for x in items if type(x) in (FrozenList, FrozenDict)]


@settings(max_examples=80, deadline=None)
@given(values)
def test_freeze_is_the_element_walk(value: Any) -> None:
    out = freeze(value)
    assert out == value
    assert _frozen_throughout(out)
    if type(value) in (FrozenList, FrozenDict):
        assert out is value
    elif isinstance(value, list | dict):
        assert out is not value
        inside = out.values() if isinstance(out, dict) else out
        kept = {id(x) for x in inside}
        assert all(id(part) in kept for part in _frozen_parts(value))


def test_a_scalar_only_dict_and_list_are_frozen_copies() -> None:
    row = {"a": 1, "b": "x", "c": None, "d": 2.5, "e": True}
    items = [1, "two", 3.0, None, False]
    frozen_row, frozen_items = freeze(row), freeze(items)
    assert type(frozen_row) is FrozenDict and frozen_row == row and frozen_row is not row
    assert type(frozen_items) is FrozenList and frozen_items == items
    row["a"] = 99
    items.append(4)
    assert frozen_row["a"] == 1 and len(frozen_items) == 5
