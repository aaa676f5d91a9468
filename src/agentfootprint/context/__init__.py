"""Context engineering: injections (slot × trigger × cache), skills, delivery, slot records."""

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
