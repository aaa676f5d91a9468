"""Summarize: fold the older part of a long conversation into one summary entry.

The fold leaves the newest ``preserve_recent`` messages verbatim, and never splits a turn (the
seam moves to the turn's start). The summary is written back to the store as
``msg-summary-{from}-{to}`` with the ids it covers under ``metadata["summarizes"]``, timestamped
just after the newest entry it covers, so later reads use it instead of the originals. The
originals are never deleted: deleting the summary restores verbatim recall. A summary that is
not shorter than what it replaces is refused (and that span is not asked about again by this
stage). A failed summarizer call leaves recall verbatim; the turn goes on.
"""

from __future__ import annotations

from typing import Any

from agentfootprint.memory._entry import MemoryEntry, MemorySource, Tier
from agentfootprint.memory._stages import (
    Stage,
    content_of,
    emit_written,
    entry_record,
    identity_from,
    value_of,
)
from agentfootprint.memory._store import MemoryStore
from agentfootprint.providers._base import LLMRequest, Provider

from ..flow import Scope
from ..runs import trace

__all__ = ["SUMMARY_PREFIX", "SUMMARY_SYSTEM_PROMPT", "summarize_loaded"]

SUMMARY_PREFIX = "[summary of earlier turns"
SUMMARY_SYSTEM_PROMPT = (
    "Summarize the conversation transcript you are given for the assistant's future self. "
    "Keep names, numbers, decisions and open questions; drop small talk. Write plain prose."
)


def _turn(entry: dict[str, Any]) -> int:
    turn = (entry.get("source") or {}).get("turn")
    return turn if isinstance(turn, int) else 0


def _covered(entry: dict[str, Any]) -> list[str]:
    meta = (entry.get("metadata") or {}).get("summarizes")
    ids = meta.get("covered_ids") if isinstance(meta, dict) else None
    return list(ids) if isinstance(ids, list) else []


def fold_seam(raw: list[dict[str, Any]], preserve_recent: int) -> int:
    """Where the fold stops: ``len - preserve_recent``, moved left so no turn is split."""
    split = max(0, len(raw) - preserve_recent)
    while 0 < split < len(raw) and _turn(raw[split - 1]) == _turn(raw[split]):
        split -= 1
    return split


def summarize_loaded(
    store: MemoryStore,
    *,
    provider: Provider,
    model: str,
    trigger_min_entries: int = 20,
    preserve_recent: int = 5,
    min_fold_entries: int = 2,
    system_prompt: str = SUMMARY_SYSTEM_PROMPT,
    tier: Tier = "cold",
) -> Stage:
    """A stage between load and pick that replaces old ``loaded`` entries by their summary."""
    refused: set[str] = set()

    async def stage(scope: Scope) -> None:
        loaded: list[dict[str, Any]] = list(value_of(scope, trace.LOADED) or [])
        summaries = [e for e in loaded if _covered(e)]
        covered = {i for s in summaries for i in _covered(s)}
        raw = [e for e in loaded if not _covered(e) and e["id"] not in covered]
        summaries.sort(key=lambda e: (e["metadata"]["summarizes"].get("to_turn", 0)))
        split = fold_seam(raw, preserve_recent)
        span, tail = raw[:split], raw[split:]
        key = "|".join(e["id"] for e in span)
        if (len(loaded) < trigger_min_entries or len(span) < max(1, min_fold_entries)
                or key in refused):
            if covered:
                scope[trace.LOADED] = summaries + raw
            return
        lines = [
            f"{(e.get('value') or {}).get('role', 'unknown')} (turn {_turn(e)}): "
            f"{content_of(e.get('value'))}"
            for e in span
        ]
        transcript = "<<<TRANSCRIPT>>>\n" + "\n".join(lines) + "\n<<<END TRANSCRIPT>>>"
        try:
            response = await provider.complete(LLMRequest(
                model=model, system=system_prompt,
                messages=[{"role": "user", "content": transcript}], temperature=0))
        except Exception as exc:  # degrade to verbatim recall; the turn is not failed
            scope[trace.SUMMARIZE] = {"applied": False, "reason": f"summarizer-failed: {exc}"}
            return
        first, last = _turn(span[0]), _turn(span[-1])
        label = (
            f"{SUMMARY_PREFIX} {first}–{last} — {len(span)} earlier message(s) were "
            f"compressed. The text after this line is a SUMMARY written by {model}; it is a "
            "claim about the conversation, not the conversation. The originals are retained "
            "in this memory's store and are excluded from recall only while this summary "
            "stands.]"
        )
        content = label + "\n\n" + response.content.strip()
        if len(content) >= sum(len(content_of(e.get("value"))) for e in span):
            refused.add(key)
            scope[trace.SUMMARIZE] = {"applied": False, "reason": "replacement-not-smaller"}
            return
        anchor = max(e["updated_at"] for e in span) + 1
        identity = (span[0].get("source") or {}).get("identity")
        entry = MemoryEntry.model_validate({
            "id": f"msg-summary-{first}-{last}",
            "value": {"role": "system", "content": content},
            "metadata": {"summarizes": {"from_turn": first, "to_turn": last,
                                        "entry_count": len(span),
                                        "covered_ids": [e["id"] for e in span],
                                        "model": model}},
            "created_at": anchor, "updated_at": anchor, "tier": tier,
            "source": MemorySource.model_validate({"turn": last, "identity": identity}),
        })
        await store.put(identity_from(scope), entry)
        emit_written(scope, store, [entry.id], last)
        scope[trace.LOADED] = [*summaries, entry_record(entry), *tail]
        scope[trace.SUMMARIZE] = {"applied": True, "summary_id": entry.id,
                              "covered_ids": [e["id"] for e in span]}

    return stage
