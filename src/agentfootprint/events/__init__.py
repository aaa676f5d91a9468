"""Agent events: the typed catalogue, the event a listener of ``agent.on(...)`` receives, and
the typed events ``agent.run_stream(...)`` yields (``TextDelta``, ``ToolCalled``,
``ToolReturned``, ``InjectionFired``, ``RunFinished``; all ``StreamEvent``).

The dispatcher and the catalogue's lookups live in ``dispatcher`` and ``catalogue``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names
from ._dispatcher import AgentEvent

if TYPE_CHECKING:
    from ._catalogue import EVENTS
    from ._stream_events import (
        InjectionFired,
        RunFinished,
        StreamEvent,
        TextDelta,
        ToolCalled,
        ToolReturned,
    )

__all__ = [
    "EVENTS",
    "AgentEvent",
    "InjectionFired",
    "RunFinished",
    "StreamEvent",
    "TextDelta",
    "ToolCalled",
    "ToolReturned",
]

# the payload models are built on first use; the stream's when a run is streamed
_LAZY = {
    "EVENTS": "_catalogue",
    **dict.fromkeys(("InjectionFired", "RunFinished", "StreamEvent", "TextDelta", "ToolCalled",
                     "ToolReturned"), "_stream_events"),
}

_MOVED = {
    **dict.fromkeys(("full_name", "payload_model"), "agentfootprint.events._catalogue"),
    **dict.fromkeys(("EventBridge", "EventDispatcher"), "agentfootprint.events._dispatcher"),
}
"""Names this package no longer exports, and the module each is imported from (one release)."""

_lazy, __dir__ = _lazy_names(__name__, _LAZY)
_moved = _moved_names(__name__, _MOVED, stacklevel=3)


def __getattr__(name: str) -> Any:
    """A lazy name on first use; else a name that moved, with a DeprecationWarning."""
    return _lazy(name) if name in _LAZY else _moved(name)
