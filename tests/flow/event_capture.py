"""A recorder for tests that keeps every event it is offered, in order."""

from __future__ import annotations

from typing import Any

from agentfootprint.flow import FlowEvent
from agentfootprint.flow._recorders import EVENT_NAMES


class Events:
    """Records every event it is offered, in order."""

    def __init__(self, id: str = "events") -> None:
        self.id = id
        self.events: list[FlowEvent] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_") and name[3:] in EVENT_NAMES:
            return self.events.append
        raise AttributeError(name)

    def trace(self) -> list[tuple[str, str]]:
        return [(e.name, e.runtime_stage_id) for e in self.events]

    def named(self, *names: str) -> list[FlowEvent]:
        return [e for e in self.events if e.name in names]

    def names(self) -> list[str]:
        return [e.name for e in self.events]
