"""Agent events: the typed catalogue and the dispatcher behind ``agent.on(...)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .catalogue import full_name, payload_model
from .dispatcher import AgentEvent, EventBridge, EventDispatcher

if TYPE_CHECKING:
    from .catalogue import EVENTS

__all__ = ["EVENTS", "AgentEvent", "EventBridge", "EventDispatcher", "full_name", "payload_model"]


# the payload models are built on first use
__getattr__, __dir__ = _lazy_names(__name__, {"EVENTS": "catalogue"})
