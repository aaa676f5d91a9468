"""Trusted Pydantic models built without ``model_construct``'s walk over every field.

The loop builds an ``LLMRequest`` for every call, and the scripted provider an ``LLMResponse``
and a ``Usage``, from values they built themselves. ``model_construct`` skips validation but
still walks every field in Python (aliases, defaults) on every call; those builders fill the
model's four slots themselves through these setters, which write the slot directly (no
attribute-name lookup, no ``object.__setattr__`` call). Each builder's test pins that it makes
exactly what ``model_construct`` makes.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["set_dict", "set_extra", "set_fields_set", "set_private"]

_slot = BaseModel.__dict__
set_dict = _slot["__dict__"].__set__
"""``object.__setattr__(model, "__dict__", ...)`` through the slot itself: no name lookup."""
set_fields_set = _slot["__pydantic_fields_set__"].__set__
set_extra = _slot["__pydantic_extra__"].__set__
set_private = _slot["__pydantic_private__"].__set__
