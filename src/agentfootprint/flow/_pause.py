"""``pause(data)``: what a pausable stage returns to stop the run until a person answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._record import Compared, record_class

if TYPE_CHECKING:
    from ._frame import Frame

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


class _Paused(Exception):
    """Internal: unwinds from a paused stage, collecting the unfinished levels."""

    def __init__(self, node: str, rid: str, data: object) -> None:
        super().__init__(node)
        self.node = node
        self.rid = rid
        self.data = data
        self.frames: list[tuple[str, str, str, Frame | None]] = []  # innermost first
