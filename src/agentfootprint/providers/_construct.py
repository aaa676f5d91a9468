"""Trusted Pydantic models built at the cost of a dict merge: ``model_construct``, made cheap.

The loop builds an ``LLMRequest`` for every call, and the scripted provider an ``LLMResponse``
and a ``Usage``, from values it has built itself. ``model_construct`` skips validation but
still walks every field in Python (aliases, defaults) on every call. :class:`Constructor`
reads the fields once and then builds exactly what ``model_construct`` builds — the same
``__dict__`` (same keys, same order, defaults filled in), the same ``model_fields_set``, no
extra and no private values — for the calls that give every required and every
factory-defaulted field and nothing else. Any other call (or a model this shortcut does not
cover: aliases, a mutable plain default, private attributes, ``extra="allow"``, a post-init
hook) goes to ``model_construct`` itself, so the result never differs.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel

__all__ = ["Constructor", "set_dict", "set_extra", "set_fields_set", "set_private"]

M = TypeVar("M", bound=BaseModel)

_IMMUTABLE = frozenset((str, int, float, bool, type(None), bytes))
"""Plain defaults ``model_construct`` hands over as they are (its deep copy returns them)."""
_new = object.__new__
_slot = BaseModel.__dict__
set_dict = _slot["__dict__"].__set__
"""``object.__setattr__(model, "__dict__", ...)`` through the slot itself: no name lookup."""
set_fields_set = _slot["__pydantic_fields_set__"].__set__
set_extra = _slot["__pydantic_extra__"].__set__
set_private = _slot["__pydantic_private__"].__set__
_NEVER = frozenset(("\0 not a field",))


class Constructor(Generic[M]):
    """``Constructor(Model)(**values)`` is ``Model.model_construct(**values)``, faster."""

    __slots__ = ("_cls", "_fields", "_must", "_template")

    def __init__(self, cls: type[M]) -> None:
        self._cls = cls
        template: dict[str, Any] = {}
        must: set[str] = set()
        plain = (cls.__new__ is _new and cls.__pydantic_post_init__ is None
                 and not cls.__private_attributes__
                 and not cls.__pydantic_root_model__
                 and cls.model_config.get("extra") != "allow")
        for name, field in cls.__pydantic_fields__.items():
            if field.alias is not None or field.validation_alias is not None:
                plain = False
            if field.is_required() or field.default_factory is not None:
                must.add(name)  # the caller gives it (else: model_construct)
                template[name] = None
            elif type(field.default) in _IMMUTABLE:
                template[name] = field.default
            else:
                plain = False
        self._template = template
        # a model this shortcut does not cover gets an impossible ``_must``: one test a call
        self._fields = frozenset(template) if plain else frozenset()
        self._must = frozenset(must) if plain else _NEVER

    def __call__(self, **values: Any) -> M:
        if not self._must <= values.keys() <= self._fields:
            return self._cls.model_construct(**values)
        model = _new(self._cls)
        data = {**self._template, **values}  # the fields' order, as model_construct fills them
        set_dict(model, data)
        set_fields_set(model, set(values))
        set_extra(model, None)
        set_private(model, None)
        return model
