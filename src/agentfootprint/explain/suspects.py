"""Suspects: the context sources that provably reached an LLM call.

The candidate set of an explanation is read from the log, never guessed: every piece of the
system prompt the call sent (the base prompt and each injection, with its exact text), every
tool result and delivered message in the conversation it sent, and the user's message. Each
suspect can be removed by a rebuild (an injection by id, a tool by name), except the base
prompt and the user's message, which have no ablation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..flow.commitlog import CommitLog, CommitRecord
from ..runs.view import CallView, Explainable, Piece, RunView, is_stage, log_of

__all__ = ["Suspect", "final_call", "is_stage", "log_of", "suspects_in", "suspects_of"]

SuspectKind = Literal["injection", "tool", "base", "user", "message"]


@dataclass(frozen=True, slots=True)
class Suspect:
    """One source that reached the call, with the exact text the model saw."""

    kind: SuspectKind
    id: str
    """Injection id, tool name, ``"base"`` or ``"user"``."""
    text: str
    flavor: str | None = None
    slot: str = "system"
    """``system``, ``messages`` or ``tools`` (tool results arrive in ``messages``)."""
    runtime_stage_id: str | None = None
    """The step that wrote it into state (for a tool result: the ToolCalls step)."""
    removable: bool = True
    """Whether a rebuild can leave it out (the base prompt and user message cannot)."""

    @classmethod
    def of(cls, piece: Piece) -> Suspect:
        return cls(piece.kind, piece.id, piece.text, piece.flavor, piece.slot, piece.writer,
                   piece.removable)

    @property
    def label(self) -> str:
        """``fact 'vip-override'``: an injection is named by its flavor, as it was defined."""
        kind = self.flavor if self.kind == "injection" and self.flavor else self.kind
        return f"{kind} {self.id!r}"


def final_call(log: CommitLog) -> CommitRecord:
    """The LLM call whose answer the run handed back (the one being explained)."""
    return RunView.of(log).call().record


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
            out.append(Suspect.of(piece))
    return out
