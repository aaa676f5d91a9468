"""``_record.record_class`` declares the same dataclass ``@dataclass(slots=True, init=False,
repr=False, eq=False)`` does (fields, their declared types, annotations, slots), only cheaper;
and the plain classes that replaced private dataclasses keep their constructors."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar

import pytest

from agentfootprint._record import Shown, record_class
from agentfootprint.flow._builder import _Draft
from agentfootprint.flow._run import RunOptions


def _declare(decorator: Any) -> Any:
    class Point(Shown):
        """A point."""

        x: int
        y: list[str] = dataclasses.field(default_factory=list, repr=False)
        label: str | None = None

        def __init__(self, x: int, y: list[str] | None = None, label: str | None = None) -> None:
            self.x, self.y, self.label = x, [] if y is None else y, label

    return decorator(Point)


def _shape(cls: Any) -> list[tuple[Any, ...]]:
    return [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.compare, f.kw_only)
            for f in dataclasses.fields(cls)]


def test_record_class_is_the_dataclass_the_plain_decorator_makes() -> None:
    plain = _declare(dataclasses.dataclass(slots=True, init=False, repr=False, eq=False))
    cheap = _declare(record_class)
    assert _shape(cheap) == _shape(plain)
    assert [f.type for f in dataclasses.fields(cheap)] == ["int", "list[str]", "str | None"]
    assert cheap.__annotations__ == plain.__annotations__
    assert cheap.__slots__ == plain.__slots__ and not hasattr(cheap(1), "__dict__")
    assert typing.get_type_hints(cheap)["label"] == str | None
    assert repr(cheap(1, label="a")).endswith("Point(x=1, label='a')")
    assert dataclasses.replace(cheap(1, ["s"]), x=2).y == ["s"]


def test_record_class_keeps_kw_only_and_leaves_a_classvar_out() -> None:
    @record_class(kw_only=True)
    class Tagged:
        kind: ClassVar[str] = "tag"
        name: str = ""

    assert [(f.name, f.kw_only) for f in dataclasses.fields(Tagged)] == [("name", True)]
    assert Tagged.kind == "tag"


def test_plain_private_classes_keep_their_constructors() -> None:
    options = RunOptions((), None, 2.0)
    assert (options.timeout, options.max_loop_iterations, options.max_depth) == (2.0, 1000, 500)
    draft = _Draft(id="a", name="A", kind="stage")
    assert draft.branches == {} and draft.children == [] and draft.rules is None
    assert _Draft(id="b", name="B", kind="stage").children is not draft.children


def test_a_frozen_record_class_refuses_assignment_and_frozen_dataclasses_extend_it() -> None:
    @record_class(frozen=True)
    class Base(Shown):
        name: str

        def __init__(self, name: str) -> None:
            object.__setattr__(self, "name", name)

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Child(Base):
        extra: int = 0

    base = Base("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.name = "b"  # type: ignore[misc]
    child = Child("c", extra=2)
    assert (child.name, child.extra) == ("c", 2)
    assert [f.name for f in dataclasses.fields(child)] == ["name", "extra"]
