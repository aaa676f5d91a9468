"""Agent events: the typed catalogue and the dispatcher behind ``agent.on(...)``."""

from .catalogue import EVENTS, full_name, payload_model
from .dispatcher import AgentEvent, EventBridge, EventDispatcher

__all__ = ["EVENTS", "AgentEvent", "EventBridge", "EventDispatcher", "full_name", "payload_model"]
