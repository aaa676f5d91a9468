"""Memory stages: the steps a memory's read and write flowcharts are built from.

Each factory returns a flowchart stage ``(scope) -> None``. Inputs come from the run's state
or, inside a mounted memory subflow, from its mapped input (``scope.args``):

* ``identity`` — ``{"conversation_id", "principal", "tenant"}``
* ``turn`` — the turn resolved once for the run (never re-derived here; see ``turn.py``)
* ``messages`` — the conversation so far (read side: the query is its last user message)
* ``new_messages`` — what this turn adds (write side: the user message and the final answer)

Working keys: ``loaded`` (entries read, chronological), ``selected`` (what the picker kept),
``retrieved`` (retrieval evidence, near misses included) and ``recall`` — ``{"text",
"entry_ids", "turns"}``, what reaches the prompt and where it came from. Entries travel through
state as JSON dicts without their vectors, so a recording stays small and portable.

Store errors propagate: a memory that cannot be read or written fails the run loudly rather
than answering from a guess.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentfootprint.flow._durable import durable_step
from agentfootprint.memory._entry import MemoryEntry, MemorySource, Tier, now_ms, turn_of
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import MemoryStore, VectorSearchStore

from ..flow import Scope
from ..runs import trace

if TYPE_CHECKING:
    from agentfootprint.memory.embedding._base import Embedder

__all__ = [
    "MEMORY_HEADER",
    "MEMORY_WRITTEN",
    "Stage",
    "embed_messages",
    "entry_record",
    "format_memory",
    "emit_written",
    "identity_from",
    "identity_from_record",
    "identity_record",
    "load_recent",
    "last_user_text",
    "load_relevant",
    "pick_by_budget",
    "recall_of",
    "write_messages",
]

Stage = Callable[[Scope], Awaitable[None] | None]
"""A flowchart stage: called with the run's scope."""

MEMORY_HEADER = (
    "Relevant context from prior conversations. Use when it helps answer the current turn."
)
MAX_LOAD_PAGES = 20
"""Pages ``load_recent`` reads at most while skipping entries that are not messages."""


def value_of(scope: Scope, key: str, default: object = None) -> Any:
    """A key from the run's state, else from the subflow's mapped input."""
    if key in scope:
        return scope[key]
    return scope.args.get(key, default)


def identity_record(identity: MemoryIdentity) -> dict[str, str | None]:
    """The JSON form of an identity as it travels through state."""
    return {
        "conversation_id": identity.conversation_id,
        "principal": identity.principal,
        "tenant": identity.tenant,
    }


MEMORY_WRITTEN = "agentfootprint.memory.written"
"""The event's full name (declared with its payload model in ``events``, which memory, a lower
layer, does not import)."""


def emit_written(scope: Scope, store: MemoryStore, ids: Sequence[str], turn: int) -> None:
    """``memory.written``: what a write stage put in which store, under which turn."""
    scope.emit(MEMORY_WRITTEN, {"store": store.name, "ids": list(ids), "turn": turn})


def identity_from_record(raw: object) -> MemoryIdentity | None:
    """The identity an :func:`identity_record` (or an identity) stands for; ``None`` when
    ``raw`` is neither — a run that never had one."""
    if isinstance(raw, MemoryIdentity):
        return raw
    if not isinstance(raw, dict) or not raw.get("conversation_id"):
        return None
    return MemoryIdentity(
        str(raw["conversation_id"]), principal=raw.get("principal"), tenant=raw.get("tenant")
    )


def identity_from(scope: Scope) -> MemoryIdentity:
    """The run's identity, rebuilt from state; a missing one is a wiring mistake, said so."""
    raw = value_of(scope, trace.IDENTITY)
    if isinstance(raw, MemoryIdentity):
        return raw
    if not isinstance(raw, dict) or not raw.get("conversation_id"):
        raise ValueError(
            "memory stages need 'identity' ({'conversation_id': ...}) in the run's state or "
            "input; give the agent identity=MemoryIdentity(...) or map it into the subflow."
        )
    return MemoryIdentity(
        str(raw["conversation_id"]), principal=raw.get("principal"), tenant=raw.get("tenant")
    )


def turn_from(scope: Scope) -> int:
    turn = value_of(scope, trace.TURN)
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise ValueError(
            f"memory stages need the run's resolved 'turn' (an int >= 1), got {turn!r}; "
            "resolve it once with resolve_turn_number and put it in state."
        )
    return turn


def entry_record(entry: MemoryEntry, score: float | None = None) -> dict[str, Any]:
    """An entry as a JSON dict for state (vector left out; ``score`` added when ranked)."""
    record: dict[str, Any] = entry.model_dump(mode="json", exclude={"embedding"})
    if score is not None:
        record["score"] = round(score, 6)
    return record


def content_of(value: object) -> str:
    """The text of a stored value: a message's ``content`` or a chunk's ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "text", "summary"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return ""


# -- write side -------------------------------------------------------------------------------


def write_messages(
    store: MemoryStore,
    *,
    id_from: Callable[[int, int, dict[str, Any]], str] | None = None,
    signature_from: Callable[[dict[str, Any]], str] | None = None,
    ttl_ms: int | None = None,
    tier: Tier | None = None,
    clock: Callable[[], int] = now_ms,
) -> Stage:
    """Persist ``new_messages`` as entries ``msg-{turn}-{index}`` (seed 004).

    One clock read for the batch; ``source`` carries the turn and the identity; vectors from
    ``new_message_embeddings`` ride along. One ``put_many``, then one ``record_signature`` per
    message when ``signature_from`` is given. No messages: no store call at all. Re-running a
    turn writes the same ids, so it overwrites instead of growing history.
    """
    make_id = id_from or (lambda turn, index, _message: f"msg-{turn}-{index}")

    async def stage(scope: Scope) -> None:
        messages: list[dict[str, Any]] = list(value_of(scope, trace.NEW_MESSAGES) or [])
        if not messages:
            return
        identity = identity_from(scope)
        turn = turn_from(scope)
        vectors = value_of(scope, trace.NEW_MESSAGE_EMBEDDINGS)
        model = value_of(scope, trace.NEW_MESSAGE_EMBEDDING_MODEL)
        now = clock()
        entries = [
            MemoryEntry(
                id=make_id(turn, index, message),
                value=dict(message),
                source=MemorySource(turn=turn, identity=identity),
                tier=tier,
                version=1,
                created_at=now,
                updated_at=now,
                expires_at=None if ttl_ms is None else now + ttl_ms,
                embedding=vectors[index] if vectors else None,
                embedding_model=model if vectors else None,
            )
            for index, message in enumerate(messages)
        ]
        async def write() -> None:  # one durable step (flow/_durable.py): skipped on replay
            await store.put_many(identity, entries)
            if signature_from is not None:
                for message in messages:
                    await store.record_signature(identity, signature_from(message))

        await durable_step("memory-write", write)
        scope[trace.WRITTEN] = [entry.id for entry in entries]
        emit_written(scope, store, scope[trace.WRITTEN], turn)

    return stage


def embed_messages(embedder: Embedder, *, embedder_id: str | None = None) -> Stage:
    """Embed ``new_messages`` for a semantic memory's write (vectors stamped with the model)."""

    async def stage(scope: Scope) -> None:
        messages = list(value_of(scope, trace.NEW_MESSAGES) or [])
        if not messages:
            return
        vectors = await embedder.embed([content_of(m) for m in messages])
        scope[trace.NEW_MESSAGE_EMBEDDINGS] = [list(v) for v in vectors]
        scope[trace.NEW_MESSAGE_EMBEDDING_MODEL] = embedder_id or embedder.id

    return stage


# -- read side --------------------------------------------------------------------------------


def load_recent(
    store: MemoryStore,
    *,
    count: int = 20,
    tiers: Sequence[Tier] | None = None,
    id_prefix: str = "msg-",
    exclude: Collection[str] = (),
) -> Stage:
    """Load the newest ``count`` message entries, chronologically, into ``loaded``.

    The store lists newest first (ties in write order), so reversing keeps a turn's user
    message before its answer. Only ids starting with ``id_prefix`` count: a store shared with
    snapshots or beats never recalls them as empty messages.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"load_recent(count={count!r}) must be a positive int.")
    excluded = frozenset(exclude)

    async def stage(scope: Scope) -> None:
        identity = identity_from(scope)

        async def load() -> list[MemoryEntry]:  # a durable step: a replay reads what was read
            found: list[MemoryEntry] = []
            cursor: str | None = None
            for _ in range(MAX_LOAD_PAGES):
                page = await store.list(identity, cursor=cursor, limit=count, tiers=tiers)
                found.extend(e for e in page.entries
                             if e.id.startswith(id_prefix) and e.id not in excluded)
                if len(found) >= count or page.cursor is None:
                    break
                cursor = page.cursor
            return found

        found = await durable_step("memory-read", load)
        chronological = [entry_record(e) for e in reversed(found[:count])]
        scope[trace.LOADED] = list(value_of(scope, trace.LOADED) or []) + chronological

    return stage


def load_relevant(
    store: MemoryStore,
    embedder: Embedder,
    *,
    k: int = 3,
    threshold: float | None = None,
    reject_window: int = 10,
    tiers: Sequence[Tier] | None = None,
    embedder_id: str | None = None,
    id_prefix: str | None = None,
    exclude: Collection[str] = (),
) -> Stage:
    """Load the entries most similar to the user's message, recording near misses.

    The store is asked for ``k + reject_window`` hits without a floor; the threshold is applied
    here so that the best candidates just below it are kept in ``retrieved`` with their scores
    (an explanation can then say "this was found but dropped"). The query text itself is never
    copied into the record.
    """
    if not isinstance(store, VectorSearchStore) or not store.capabilities.vector_search:
        raise ValueError(
            f"{store.name} has no vector search; use InMemoryStore, SQLiteStore, RedisStore "
            "or PostgresStore for a top_k memory."
        )
    model = embedder_id or embedder.id
    excluded = frozenset(exclude)

    async def stage(scope: Scope) -> None:
        identity = identity_from(scope)
        query = last_user_text(value_of(scope, trace.MESSAGES)
                               or value_of(scope, trace.NEW_MESSAGES))
        evidence: dict[str, Any] = {
            "strategy": "top_k", "k": k, "threshold": threshold, "embedder_id": model,
            "candidates": [], "admitted": [], "near_misses": [],
        }
        if not query:
            scope[trace.RETRIEVED] = evidence
            scope[trace.LOADED] = list(value_of(scope, trace.LOADED) or [])
            return
        async def search() -> Any:  # a durable step: a replay sees what was found
            (vector,) = await embedder.embed([query])
            return await store.search(
                identity, vector, k=k + reject_window, tiers=tiers, embedder_id=model
            )

        hits = await durable_step("memory-search", search)
        hits = [h for h in hits if h.entry.id not in excluded
                and (id_prefix is None or h.entry.id.startswith(id_prefix))]
        admitted: list[dict[str, Any]] = []
        for rank, hit in enumerate(hits, start=1):
            if threshold is not None and hit.score < threshold:
                reason: str | None = "below-threshold"
            elif len(admitted) >= k:
                reason = "over-max-entries"
            else:
                reason = None
                admitted.append(entry_record(hit.entry, hit.score))
            evidence["candidates"].append(
                {"id": hit.entry.id, "score": round(hit.score, 6), "rank": rank,
                 "admitted": reason is None, "reason": reason, "turn": turn_of(hit.entry)}
            )
        evidence["admitted"] = [c["id"] for c in evidence["candidates"] if c["admitted"]]
        evidence["near_misses"] = [
            c for c in evidence["candidates"] if c["reason"] == "below-threshold"
        ][:k]
        scope[trace.RETRIEVED] = evidence
        scope[trace.LOADED] = list(value_of(scope, trace.LOADED) or []) + admitted

    return stage


def last_user_text(messages: Iterable[Mapping[str, Any]] | None) -> str:
    for message in reversed(list(messages or [])):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            text = str(message["content"]).strip()
            if text:
                return text
    return ""


def pick_by_budget(
    *,
    reserve_tokens: int = 256,
    minimum_tokens: int = 100,
    max_entries: int | None = None,
    count_tokens: Callable[[str], int] = lambda text: math.ceil(len(text) / 4),
    counted_by: str = "estimate: len/4",
) -> Stage:
    """Keep the newest loaded entries that fit the token budget, chronologically.

    ``pick`` records which rule applied (``skip-empty``, ``skip-no-budget`` or ``pick``),
    how tokens were counted (``counted_by``) and why each dropped entry went. Entries are
    judged newest first in load order, never by id, so a turn's user message and its answer
    keep their order.
    """

    def stage(scope: Scope) -> None:
        loaded: list[dict[str, Any]] = list(value_of(scope, trace.LOADED) or [])
        remaining = value_of(scope, "context_tokens_remaining", 32_000)
        budget = int(remaining) - reserve_tokens
        if not loaded:
            scope[trace.SELECTED] = []
            scope[trace.PICK] = {"rule": "skip-empty", "budget": budget, "dropped": []}
            return
        if budget < minimum_tokens:
            scope[trace.SELECTED] = []
            scope[trace.PICK] = {"rule": "skip-no-budget", "budget": budget,
                             "dropped": [{"id": e["id"], "reason": "over-budget"} for e in loaded]}
            return
        kept: list[dict[str, Any]] = []
        dropped: list[dict[str, str]] = []
        used = 0
        for entry in reversed(loaded):
            if max_entries is not None and len(kept) >= max_entries:
                dropped.append({"id": entry["id"], "reason": "over-max-entries"})
                continue
            cost = count_tokens(content_of(entry.get("value")))
            if used + cost > budget:
                dropped.append({"id": entry["id"], "reason": "over-budget"})
                continue
            used += cost
            kept.append(entry)
        scope[trace.SELECTED] = list(reversed(kept))
        scope[trace.PICK] = {"rule": "pick", "budget": budget, "used": used, "dropped": dropped,
                             "counted_by": counted_by}

    return stage


def format_memory(*, header: str = MEMORY_HEADER, footer: str | None = None) -> Stage:
    """Render ``selected`` as one system-prompt block and say where every line came from."""

    def stage(scope: Scope) -> None:
        selected: list[dict[str, Any]] = list(value_of(scope, trace.SELECTED) or [])
        if not selected:
            scope[trace.RECALL] = {"text": "", "entry_ids": [], "turns": []}
            return
        blocks = []
        for entry in selected:
            value = entry.get("value")
            role = value.get("role", "unknown") if isinstance(value, dict) else "unknown"
            turn = (entry.get("source") or {}).get("turn")
            updated = datetime.fromtimestamp(entry["updated_at"] / 1000, tz=UTC)
            attributes = f'role="{_attr(str(role))}"'
            if isinstance(turn, int) and turn > 0:
                attributes += f' turn="{turn}"'
            attributes += f' updated="{updated.isoformat().replace("+00:00", "Z")}"'
            text = _defend(content_of(value), "memory")
            blocks.append(f"<memory {attributes}>\n{text}\n</memory>")
        scope[trace.RECALL] = recall_of(selected, blocks, header=header, footer=footer)

    return stage


def recall_of(entries: Sequence[dict[str, Any]], blocks: Sequence[str], *, header: str,
              footer: str | None = None) -> dict[str, Any]:
    """The ``recall`` record: the prompt text and one piece per entry.

    The header rides on the first piece and the footer on the last, so joining the pieces
    with a blank line gives exactly ``text`` — each entry can then land (and be removed) as
    its own tracked injection without changing a byte of the prompt.
    """
    pieces: list[dict[str, Any]] = []
    for index, (entry, block) in enumerate(zip(entries, blocks, strict=True)):
        if index == 0 and header:
            block = f"{header}\n\n{block}"
        if index == len(blocks) - 1 and footer:
            block = f"{block}\n\n{footer}"
        turn = (entry.get("source") or {}).get("turn")
        pieces.append({"text": block, "entry_ids": [entry["id"]],
                       "turns": [turn] if isinstance(turn, int) and turn > 0 else []})
    return {
        "text": "\n\n".join(p["text"] for p in pieces),
        "entry_ids": [e["id"] for e in entries],
        "turns": sorted({t for p in pieces for t in p["turns"]}),
        "pieces": pieces,
    }


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _defend(text: str, tag: str) -> str:
    """Break a closing tag inside stored content so it cannot end the block early."""
    out, lower, needle, start = [], text.lower(), f"</{tag}", 0
    while (found := lower.find(needle, start)) != -1:
        cut = found + 3
        out.append(text[start:cut] + "\u200d")
        start = cut
    out.append(text[start:])
    return "".join(out)
