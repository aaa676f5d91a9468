"""``pause(data)``: what a pausable stage returns to stop the run until a person answers."""

from __future__ import annotations

from typing import Any

from .._record import Compared, record_class

__all__ = ["Pause", "pause"]


@record_class
class Pause(Compared):
    """A request to pause, carrying JSON data for whoever resumes (a question, a form).

    (A dataclass with its methods written once, ``_record.py``: cold start.)"""

    data: Any = None

    def __init__(self, data: Any = None) -> None:
        self.data = data


def pause(data: object = None) -> Pause:
    """Return this from a stage declared with ``resume=`` to pause the run there."""
    return Pause(data)
