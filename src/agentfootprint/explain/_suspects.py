"""Suspects: the context sources that provably reached an LLM call.

The candidate set of an explanation is read from the log, never guessed: every piece of the
system prompt the call sent (the base prompt and each injection, with its exact text), every
tool result and delivered message in the conversation it sent, and the user's message. Each
suspect can be removed by a rebuild (an injection by id, a tool by name), except the base
prompt and the user's message, which have no ablation.
"""

from __future__ import annotations

from ..flow._commitlog import CommitRecord
from ..runs._view import CallView, Explainable, Piece, RunView, is_stage, log_of

__all__ = ["Suspect", "is_stage", "log_of", "suspects_in", "suspects_of"]

Suspect = Piece
"""One source that reached the call, with the exact text the model saw (``runs.view.Piece``)."""


def suspects_of(source: Explainable, call: CommitRecord | None = None) -> list[Suspect]:
    """Every source that reached ``call`` (default: the final LLM call), in prompt order."""
    return suspects_in(RunView.of(source).call(call))


def suspects_in(call: CallView) -> list[Suspect]:
    """Every source that reached ``call``, in prompt order, each (kind, id, text) once."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for piece in call.pieces:
        key = (piece.kind, piece.id, piece.text)
        if key not in seen:
            seen.add(key)
            out.append(piece)
    return out
