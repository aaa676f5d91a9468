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
from ._across import reached_calls, suspects_across

__all__ = ["Suspect", "is_stage", "log_of", "suspects_in", "suspects_of"]

Suspect = Piece
"""One source that reached the call, with the exact text the model saw (``runs.view.Piece``)."""


def suspects_of(source: Explainable, call: CommitRecord | None = None) -> list[Suspect]:
    """Every source that reached ``call`` (default: the final LLM call), in prompt order.

    Without ``call``, a composition's answer (or one an agent-tool fed) gives the final call's
    sources first, then those of every member whose answer reached it and of the other members,
    each labelled with its member (``fact 'bad-fact' (in first)``) and removable by its id.
    """
    view = RunView.of(source)
    if call is not None:
        return suspects_in(view.call(call))
    return [piece for piece, _ in suspects_across(reached_calls(view))]


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
