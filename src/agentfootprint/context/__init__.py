"""Context engineering: the injection model (slot × trigger × cache) and the context report.

The ``define_*`` functions that declare context are imported from ``agentfootprint``. Here:
``Injection`` (what they return), ``Trigger`` (when a ``define_injection`` fires),
``InjectionContext`` (what a rule sees) and ``context_report`` (what each call was given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names
from ._injection import Injection, InjectionContext, Trigger

if TYPE_CHECKING:
    from ._record import context_report

__all__ = ["Injection", "InjectionContext", "Trigger", "context_report"]

# reading a recording back: loaded on first use
_LAZY = {"context_report": "_record"}

_MOVED = {
    **dict.fromkeys(("define_fact", "define_injection", "define_instruction", "define_skill",
                     "define_steering"), "agentfootprint"),
    "evaluate_injections": "agentfootprint.context._injection",
}
"""Names this package no longer exports, and where each is imported from (one release)."""

_lazy, __dir__ = _lazy_names(__name__, _LAZY)
_moved = _moved_names(__name__, _MOVED, stacklevel=3)


def __getattr__(name: str) -> Any:
    """A lazy name on first use; else a name that moved, with a DeprecationWarning."""
    return _lazy(name) if name in _LAZY else _moved(name)
