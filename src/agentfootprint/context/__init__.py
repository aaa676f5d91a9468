"""Context engineering: injections (slot × trigger × cache), skills, delivery, slot records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .injection import (
    Injection,
    InjectionContext,
    Trigger,
    define_fact,
    define_injection,
    define_instruction,
    define_skill,
    define_steering,
    evaluate_injections,
)

if TYPE_CHECKING:
    from .record import context_report

__all__ = [
    "Injection",
    "InjectionContext",
    "Trigger",
    "context_report",
    "define_fact",
    "define_injection",
    "define_instruction",
    "define_skill",
    "define_steering",
    "evaluate_injections",
]


# reading a recording back: loaded on first use
__getattr__, __dir__ = _lazy_names(__name__, {"context_report": "record"})
