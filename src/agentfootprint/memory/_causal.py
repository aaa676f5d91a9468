"""Causal memory: each turn leaves a snapshot of how it was decided; later turns recall it.

``write_snapshot`` files ``snap-{turn}`` holding the user's query, the final answer and the
run's evidence (tool calls, decisions, iterations, tokens), with the QUERY embedded so a later
question can find past runs that were asked something similar. ``load_snapshot`` embeds the
new question, searches past queries and renders each hit as a system-prompt block.

Turn: the run's resolved turn is used, but never below ``max(snap-{n}) + 1`` in this
namespace — self-defense for hand-composed pipelines whose host numbers turns itself. The scan
counts ``snap-`` ids only: message entries of this same turn may already be in a shared store,
and counting them would file this turn's evidence one turn too high.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Literal

from agentfootprint.memory._entry import MemoryEntry, MemorySource, Tier, now_ms, turn_of
from agentfootprint.memory._stages import (
    Stage,
    emit_written,
    entry_record,
    identity_from,
    last_user_text,
    recall_of,
    turn_from,
    value_of,
)
from agentfootprint.memory._store import MemoryStore, VectorSearchStore
from agentfootprint.memory._turn import max_stored_turn

from ..flow import Scope
from ..runs import trace

if TYPE_CHECKING:
    from agentfootprint.memory.embedding._base import Embedder

__all__ = ["SNAPSHOT_PREFIX", "Projection", "load_snapshot", "write_snapshot"]

SNAPSHOT_PREFIX = "snap-"
Projection = Literal["decisions", "narrative", "full"]


def _snapshot_turn(entry: MemoryEntry) -> int:
    return turn_of(entry) if entry.id.startswith(SNAPSHOT_PREFIX) else 0


def _require_search(store: MemoryStore, what: str) -> VectorSearchStore:
    if not isinstance(store, VectorSearchStore) or not store.capabilities.vector_search:
        raise ValueError(
            f"{what} needs a store with vector search; {store.name} has none — use "
            "InMemoryStore, SQLiteStore, RedisStore or PostgresStore."
        )
    return store


def write_snapshot(
    store: MemoryStore,
    embedder: Embedder,
    *,
    embedder_id: str | None = None,
    ttl_ms: int | None = None,
    tier: Tier | None = None,
    clock: Callable[[], int] = now_ms,
) -> Stage:
    """File this turn's ``snap-{turn}`` (see the module docstring); no-op without messages.

    The query vector is stamped with ``embedder_id`` (default: the embedder's own id), so a
    later search by another embedder never compares against it.
    """
    _require_search(store, "write_snapshot")
    model = embedder_id or embedder.id

    async def stage(scope: Scope) -> None:
        messages: list[dict[str, Any]] = list(value_of(scope, trace.NEW_MESSAGES) or [])
        if not messages:
            return
        query = next((str(m.get("content") or "") for m in messages
                      if m.get("role") == "user"), "")
        if not query.strip():
            return
        final = next((str(m.get("content") or "") for m in messages
                      if m.get("role") == "assistant"), "")
        identity = identity_from(scope)
        turn = max(turn_from(scope),
                   await max_stored_turn(store, identity, turn_for=_snapshot_turn) + 1)
        evidence = dict(value_of(scope, trace.RUN_EVIDENCE) or {})
        (vector,) = await embedder.embed([query])
        now = clock()
        entry = MemoryEntry(
            id=f"{SNAPSHOT_PREFIX}{turn}",
            value={
                "query": query,
                "final_content": final,
                "iterations": int(evidence.get("iterations", 0)),
                "decisions": list(evidence.get("decisions", [])),
                "tool_calls": list(evidence.get("tool_calls", [])),
                "duration_ms": int(evidence.get("duration_ms", 0)),
                "token_usage": dict(evidence.get("token_usage", {"input": 0, "output": 0})),
            },
            source=MemorySource(turn=turn, identity=identity),
            tier=tier,
            created_at=now,
            updated_at=now,
            expires_at=None if ttl_ms is None else now + ttl_ms,
            embedding=vector,
            embedding_model=model,
        )
        await store.put(identity, entry)
        scope[trace.WRITTEN] = [entry.id]
        emit_written(scope, store, [entry.id], turn)

    return stage


def load_snapshot(
    store: MemoryStore,
    embedder: Embedder,
    *,
    embedder_id: str | None = None,
    top_k: int = 1,
    min_score: float = 0.7,
    projection: Projection = "decisions",
    exclude: Collection[str] = (),
) -> Stage:
    """Recall the past runs whose question is closest to this one (nothing below ``min_score``).

    Reads run before the same turn's write, so a turn never recalls itself.
    """
    searchable = _require_search(store, "load_snapshot")
    if projection not in ("decisions", "narrative", "full"):
        raise ValueError(
            f"load_snapshot(projection={projection!r}) must be 'decisions', 'narrative' or "
            "'full'."
        )
    model = embedder_id or embedder.id
    excluded = frozenset(exclude)

    async def stage(scope: Scope) -> None:
        query = last_user_text(value_of(scope, trace.MESSAGES)
                               or value_of(scope, trace.NEW_MESSAGES))
        if not query:
            scope[trace.RECALL] = {"text": "", "entry_ids": [], "turns": []}
            return
        (vector,) = await embedder.embed([query])
        hits = await searchable.search(identity_from(scope), vector, k=top_k,
                                       min_score=min_score, embedder_id=model)
        hits = [h for h in hits
                if h.entry.id.startswith(SNAPSHOT_PREFIX) and h.entry.id not in excluded]
        blocks = [_render(h.entry.value, h.score, projection) for h in hits]
        scope[trace.RETRIEVED] = {
            "strategy": "top_k", "k": top_k, "threshold": min_score, "embedder_id": model,
            "candidates": [{"id": h.entry.id, "score": round(h.score, 6), "rank": rank,
                            "admitted": True, "turn": turn_of(h.entry)}
                           for rank, h in enumerate(hits, start=1)],
        }
        scope[trace.RECALL] = recall_of([entry_record(h.entry) for h in hits], blocks, header="")

    return stage


def _render(value: Any, score: float, projection: Projection) -> str:
    snapshot: dict[str, Any] = value if isinstance(value, dict) else {}
    query = str(snapshot.get("query", ""))
    shown = query if len(query) <= 80 else query[:79] + "…"
    header = f'[Past run · query: "{shown}" · score: {score:.2f}]'
    final = str(snapshot.get("final_content", ""))
    if projection == "full":
        return header + "\n" + json.dumps(snapshot, indent=2, ensure_ascii=False)
    if projection == "narrative":
        story = snapshot.get("narrative")
        body = str(story) if story else f"(no narrative captured)\nFinal answer: {final}"
        return header + "\n" + body
    decisions = snapshot.get("decisions") or []
    calls = snapshot.get("tool_calls") or []
    if not decisions and not calls:
        return header + f"\n(no decision evidence captured)\nFinal answer: {final}"
    lines = [header]
    for decision in decisions:
        line = f'- {decision.get("stage_id")} → "{decision.get("chosen")}"'
        if decision.get("rule"):
            line += f" (rule: {decision['rule']})"
        lines.append(line)
    if calls:
        lines.append("\nTool evidence:")
        for call in calls:
            args = json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True)
            error = " [ERROR]" if call.get("errored") else ""
            lines.append(f"- {call.get('name')}({args}) → {call.get('result_preview', '')}{error}")
    lines.append(f"\nFinal answer: {final}")
    return "\n".join(lines)
