"""Agent events: the typed catalogue and the dispatcher behind ``agent.on(...)``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import catalogue
from .catalogue import full_name, payload_model
from .dispatcher import AgentEvent, EventBridge, EventDispatcher

if TYPE_CHECKING:
    from .catalogue import EVENTS

__all__ = ["EVENTS", "AgentEvent", "EventBridge", "EventDispatcher", "full_name", "payload_model"]


def __getattr__(name: str) -> Any:
    if name == "EVENTS":  # the payload models are built on first use
        return catalogue.EVENTS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
