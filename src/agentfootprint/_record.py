"""Frozen dataclasses whose methods are written once, not generated per class.

``@dataclass(frozen=True)`` compiles five or six methods for every class (``exec`` of
generated source) while its module is imported; for the option and record classes a plain
agent run imports, that was about a tenth of a cold start. A class declared

    @dataclass(slots=True, init=False, repr=False, eq=False)
    class Limits(Value):
        max_iterations: int = 10

        def __init__(self, *, max_iterations: int = 10) -> None:
            assign(self, max_iterations=max_iterations)

is still a dataclass (``fields``, ``replace`` and ``asdict`` work) and behaves as a frozen
one: assignment and deletion raise ``FrozenInstanceError``, it is shown as
``Limits(max_iterations=10)`` and it is copied and pickled by its fields. ``Value`` adds
equality and hashing by the compared fields (``eq=True``); ``Frozen`` keeps identity, as
``eq=False`` does. ``Shown`` and ``Compared`` are the same for a mutable dataclass: shown by
its fields, and (``Compared``) equal by them and unhashable, as ``eq=True`` makes it. The
one visible difference is ``__dataclass_params__``, which tells how the class was declared
(``frozen=False``, ``eq=False``) rather than how it behaves.

This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import Field, FrozenInstanceError, dataclass, field, fields
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["Compared", "Frozen", "Shown", "Value", "assign", "record_class"]

_C = TypeVar("_C", bound=type)
_SPECIAL = ("ClassVar", "InitVar", "KW_ONLY")


@overload
def record_class(cls: _C, /) -> _C: ...
@overload
def record_class(*, kw_only: bool = False, frozen: bool = False) -> Callable[[_C], _C]: ...
@dataclass_transform(field_specifiers=(field, Field))  # type checkers see the dataclass
def record_class(cls: _C | None = None, /, *, kw_only: bool = False,
                 frozen: bool = False) -> _C | Callable[[_C], _C]:
    """``@dataclass(slots=True, kw_only=kw_only, frozen=frozen, init=False, repr=False,
    eq=False)``, declared at about half the cost. (``frozen=True`` is for a class that frozen
    dataclasses subclass: ``dataclass`` then writes its ``__setattr__``/``__delattr__``.)

    Under ``from __future__ import annotations`` every annotation is a string, and
    ``dataclass`` matches each one against regular expressions to tell ``ClassVar``,
    ``InitVar`` and ``KW_ONLY`` apart: most of its work for a class whose methods are written
    by hand. The strings are hidden from it while it runs and put back after (on the class and
    on each field's ``type``), so the result is the same dataclass. A class that uses one of
    those three forms gets the plain decorator."""

    def build(cls: _C) -> _C:
        declared = inspect.get_annotations(cls)
        plain: Any = dataclass(slots=True, kw_only=kw_only, frozen=frozen, init=False,
                               repr=False, eq=False)
        if any(isinstance(t, str) and any(s in t for s in _SPECIAL) for t in declared.values()):
            return plain(cls)  # type: ignore[no-any-return]
        cls.__annotations__ = dict.fromkeys(declared, object)
        made = plain(cls)
        made.__annotations__ = declared
        for f in made.__dataclass_fields__.values():
            if f.name in declared:
                f.type = declared[f.name]
        return made  # type: ignore[no-any-return]

    return build if cls is None else build(cls)


def _shown(obj: object) -> str:
    shown = ", ".join(f"{f.name}={getattr(obj, f.name)!r}"
                      for f in fields(obj) if f.repr)  # type: ignore[arg-type]
    return f"{type(obj).__qualname__}({shown})"


def _compared(obj: object) -> tuple[Any, ...]:
    return tuple(getattr(obj, f.name) for f in fields(obj) if f.compare)  # type: ignore[arg-type]


def assign(obj: object, **values: Any) -> None:
    """Set the fields of a ``Frozen`` object being built (its ``__init__`` calls this)."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


class Frozen:
    """Frozen behaviour for a slotted dataclass declared ``init=False, repr=False, eq=False``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        return _shown(self)

    def __getstate__(self) -> list[Any]:
        return [getattr(self, f.name) for f in fields(self)]  # type: ignore[arg-type]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(fields(self), state, strict=True):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, value)


class Value(Frozen):
    """A ``Frozen`` object equal to another of its class with equal fields, hashed by them."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)

    def __hash__(self) -> int:
        return hash(_compared(self))


class Shown:
    """A mutable slotted dataclass declared ``repr=False, eq=False``, shown by its fields."""

    __slots__ = ()

    def __repr__(self) -> str:
        return _shown(self)


class Compared(Shown):
    """A ``Shown`` object equal to another of its class with equal fields; unhashable, as a
    mutable dataclass with ``eq=True`` is."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)

    __hash__ = None  # type: ignore[assignment]
