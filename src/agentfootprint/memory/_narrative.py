"""Narrative memory: each turn leaves short "beats" (who said what, how much it matters).

Beats are entries ``beat-{turn}-{index}`` whose value is ``{"summary", "importance",
"category", "refs"}``; ``refs`` point at the ``msg-{turn}-{index}`` each beat retells, so a
recalled sentence can be traced to the message it came from. The extractor here is a
deterministic heuristic (no model call); recall renders the beats as one short story.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentfootprint.memory._entry import MemoryEntry, MemorySource, Tier, now_ms
from agentfootprint.memory._stages import (
    Stage,
    content_of,
    emit_written,
    identity_from,
    turn_from,
    value_of,
)
from agentfootprint.memory._store import MemoryStore

from ..flow import Scope
from ..runs import trace

__all__ = ["NARRATIVE_HEADER", "extract_beats", "format_narrative", "heuristic_beats"]

NARRATIVE_HEADER = "What happened earlier in this conversation, in brief."
_IDENTITY_CUES = ("my name is", "i'm ", "i am ")


def heuristic_beats(messages: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """One beat per non-system message with text, rated by a few fixed cues."""
    beats: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role, text = message.get("role"), content_of(message).strip()
        if role == "system" or not text:
            continue
        if role == "user":
            lowered = text.lower()
            if any(cue in lowered for cue in _IDENTITY_CUES):
                importance, category = 0.9, "identity"
            elif text.endswith("?"):
                importance, category = 0.75, "question"
            else:
                importance, category = 0.6, "statement"
            summary = f"User said: {text}"
        elif role == "assistant":
            importance, category, summary = 0.5, "answer", f"Assistant replied: {text}"
        else:
            importance, category, summary = 0.3, "tool-result", f"Tool result: {text}"
        beats.append({"summary": summary, "importance": importance, "category": category,
                      "refs": [f"msg-{turn}-{index}"]})
    return beats


def extract_beats(
    store: MemoryStore, *, tier: Tier | None = None, ttl_ms: int | None = None,
    clock: Callable[[], int] = now_ms,
) -> Stage:
    """Write this turn's beats as ``beat-{turn}-{index}`` (one ``put_many``)."""

    async def stage(scope: Scope) -> None:
        messages = list(value_of(scope, trace.NEW_MESSAGES) or [])
        if not messages:
            return
        identity, turn, now = identity_from(scope), turn_from(scope), clock()
        entries = [
            MemoryEntry(id=f"beat-{turn}-{index}", value=beat,
                        source=MemorySource(turn=turn, identity=identity), tier=tier,
                        created_at=now, updated_at=now,
                        expires_at=None if ttl_ms is None else now + ttl_ms)
            for index, beat in enumerate(heuristic_beats(messages, turn))
        ]
        if entries:
            await store.put_many(identity, entries)
            emit_written(scope, store, [e.id for e in entries], turn)
        scope[trace.WRITTEN] = [e.id for e in entries]

    return stage


def format_narrative(*, header: str = NARRATIVE_HEADER) -> Stage:
    """Render ``selected`` beats as one paragraph: "From earlier: …"."""

    def stage(scope: Scope) -> None:
        selected: list[dict[str, Any]] = list(value_of(scope, trace.SELECTED) or [])
        sentences = []
        for entry in selected:
            text = content_of(entry.get("value")).strip()
            if text:
                sentences.append(text if text[-1] in ".!?" else text + ".")
        if not sentences:
            scope[trace.RECALL] = {"text": "", "entry_ids": [], "turns": []}
            return
        turns = sorted({t for e in selected if (t := (e.get("source") or {}).get("turn"))})
        text = f"{header}\n\nFrom earlier: " + " ".join(sentences)
        ids = [e["id"] for e in selected]
        scope[trace.RECALL] = {"text": text, "entry_ids": ids, "turns": turns,
                           "pieces": [{"text": text, "entry_ids": ids, "turns": turns}]}

    return stage
