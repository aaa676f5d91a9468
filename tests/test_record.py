"""A ``_record`` class behaves as the frozen dataclass it replaces: the public option objects
built on it compare, hash, show, copy, pickle and refuse assignment as before."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from agentfootprint import Budget, Governance, Limits, ModelSettings, Tracing
from agentfootprint.context import Trigger
from agentfootprint.flow._commitlog import Change
from agentfootprint.flow._decide import Decision
from agentfootprint.flow._recorders import ObserverFailure
from agentfootprint.providers import Price, RetryPolicy
from agentfootprint.tools._registry import ToolOutcome


@pytest.mark.parametrize("cls", [Limits, ModelSettings, Governance, Tracing])
def test_an_option_object_is_a_frozen_dataclass(cls: Any) -> None:
    """fields/replace/asdict work, assignment and deletion raise FrozenInstanceError."""
    value: Any = cls()
    assert dataclasses.is_dataclass(type(value)) and not isinstance(value, type)
    name = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(value, name)
    assert dataclasses.replace(value) == value
    assert list(dataclasses.asdict(value)) == [f.name for f in dataclasses.fields(cls)]
    assert not hasattr(value, "__dict__")


def test_equality_hash_and_repr_follow_the_fields() -> None:
    assert Limits(max_iterations=3) == Limits(max_iterations=3)
    assert Limits(max_iterations=3) != Limits(max_iterations=4)
    assert Limits() != ModelSettings()
    assert hash(ModelSettings(seed=1)) == hash(ModelSettings(seed=1))
    assert len({Limits(), Limits(), Limits(wrap_up=False)}) == 2
    assert repr(Limits(max_iterations=3)) == (
        "Limits(max_iterations=3, max_tool_result_chars=None, wrap_up=True)")
    assert dataclasses.replace(Limits(), wrap_up=False).wrap_up is False


def test_copies_and_pickles_keep_the_fields() -> None:
    settings = ModelSettings(temperature=0.5, max_tokens=10, seed=7)
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert copy.copy(settings) == settings and copy.deepcopy(settings) == settings
    assert copy.deepcopy(Tracing(observer_delivery="deferred")).observer_delivery == "deferred"


def test_keywords_only_and_checked_as_before() -> None:
    with pytest.raises(TypeError):
        Limits(3)  # type: ignore[call-arg]
    with pytest.raises(Exception, match="max_iterations=0 must be an int >= 1"):
        Limits(max_iterations=0)
    with pytest.raises(Exception, match="must be an int"):
        dataclasses.replace(Limits(), max_iterations=True)


FROZEN_VALUES: list[Any] = [
    Budget(max_total_tokens=5), Price(input=1.0, output=2.0), RetryPolicy(max_attempts=5),
    Trigger("always"), Change("k", "set", 1), ObserverFailure("o", "on_read", "E: x"),
]


@pytest.mark.parametrize("value", FROZEN_VALUES, ids=lambda v: type(v).__name__)
def test_frozen_values_compare_hash_and_refuse_assignment(value: Any) -> None:
    """The frozen records of the run path: equal to a replace() copy, refuse assignment,
    pickle by their fields and show every field as the generated repr did."""
    twin = dataclasses.replace(value)
    assert twin == value and twin is not value
    if not isinstance(value, Budget):  # a Budget holds a dict of prices: unhashable, as before
        assert hash(twin) == hash(value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, dataclasses.fields(value)[0].name, None)
    assert pickle.loads(pickle.dumps(value)) == value
    assert repr(value).startswith(f"{type(value).__name__}(")
    assert all(f"{f.name}=" in repr(value) for f in dataclasses.fields(value) if f.repr)


def test_mutable_records_compare_by_fields_and_stay_unhashable() -> None:
    """Decision and ToolOutcome: equal by fields, mutable, unhashable (eq=True dataclasses)."""
    assert Decision("a", {"x": 1}) == Decision("a", {"x": 1}) != Decision("b", {"x": 1})
    outcome = ToolOutcome("text")
    outcome.status = "error"
    assert outcome == ToolOutcome("text", status="error")
    with pytest.raises(TypeError):
        hash(outcome)
    assert repr(outcome) == "ToolOutcome(content='text', error=False, status='error', issues=())"
