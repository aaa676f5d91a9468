"""``same_model``: two pydantic models are the same object graph a constructor is held to."""

from __future__ import annotations

from pydantic import BaseModel


def same_model(a: BaseModel, b: BaseModel) -> None:
    """Same type, values in the same field order, fields set, extras and privates."""
    assert type(a) is type(b)
    assert list(a.__dict__.items()) == list(b.__dict__.items())  # values and field order
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert a.__pydantic_private__ == b.__pydantic_private__
    assert a == b
