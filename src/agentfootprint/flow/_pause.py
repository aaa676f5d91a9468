"""``pause(data)``: what a pausable stage returns to stop the run until a person answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Pause", "pause"]


@dataclass(slots=True)
class Pause:
    """A request to pause, carrying JSON data for whoever resumes (a question, a form)."""

    data: Any = None


def pause(data: object = None) -> Pause:
    """Return this from a stage declared with ``resume=`` to pause the run there."""
    return Pause(data)
