"""``ask_human`` and ``pause_here``: a tool stops the run until a person answers.

Called inside a tool, each raises :class:`PauseRequest` — a signal, not an error, so the tool
dispatcher lets it through instead of turning it into a tool result. The agent loop catches it,
files the paused call, and hands back a JSON checkpoint; whatever the person answers becomes that
call's tool result when the run is resumed (in this process or another, hours later).
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn

__all__ = ["PauseRequest", "ask_human", "pause_here"]


class PauseRequest(Exception):
    """Raised by ``ask_human``/``pause_here`` inside a tool to pause the run at that call."""

    def __init__(self, kind: Literal["ask", "pause"], data: object) -> None:
        super().__init__(f"the tool asked to pause the run ({kind})")
        self.kind = kind
        self.data = data


def ask_human(question: str, **details: Any) -> NoReturn:
    """Pause the run and ask a person ``question``; their answer is this tool's result."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("ask_human(question) needs the question to put to the person")
    raise PauseRequest("ask", {"question": question, **details})


def pause_here(data: object = None) -> NoReturn:
    """Pause the run with JSON ``data`` for whoever resumes; their input is the tool's result."""
    raise PauseRequest("pause", data)
