"""``InMemoryStore``: the reference store, in-process and not durable. For tests and dev."""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentfootprint.memory.entry import MemoryEntry, Tier, now_ms
from agentfootprint.memory.identity import MemoryIdentity
from agentfootprint.memory.store import (
    MemoryPage,
    ScoredEntry,
    StoreCapabilities,
    check_k,
    check_limit,
)
from agentfootprint.memory.stores._keyset import decode_cursor, encode_cursor
from agentfootprint.memory.stores._vectors import rank_cosine, same_embedder

__all__ = ["InMemoryStore"]


@dataclass
class _Namespace:
    entries: dict[str, tuple[int, MemoryEntry]] = field(default_factory=dict)
    signatures: set[str] = field(default_factory=set)
    claimed_turns: set[int] = field(default_factory=set)


class InMemoryStore:
    """A ``MemoryStore`` kept in a dict. Every method completes without yielding to the loop,
    so ``claim_turn`` is atomic for every task of the process (and only that process)."""

    def __init__(self, *, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self._seq = itertools.count(1)
        self._namespaces: dict[str, _Namespace] = {}

    @property
    def name(self) -> str:
        return "InMemoryStore"

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=True, atomic_turn_claim=True)

    def _ns(self, identity: MemoryIdentity) -> _Namespace:
        return self._namespaces.setdefault(identity.namespace, _Namespace())

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        ns = self._ns(identity)
        found = ns.entries.get(entry_id)
        if found is None:
            return None
        if found[1].is_expired(self._clock()):
            del ns.entries[entry_id]
            return None
        return found[1]

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        self._ns(identity).entries[entry.id] = (next(self._seq), _checked(entry))

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        checked = [_checked(e) for e in entries]
        ns = self._ns(identity)
        for entry in checked:
            ns.entries[entry.id] = (next(self._seq), entry)

    async def list(
        self,
        identity: MemoryIdentity,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        tiers: Sequence[Tier] | None = None,
    ) -> MemoryPage:
        size = check_limit(limit)
        after = decode_cursor(cursor, store=self.name) if cursor is not None else None
        now = self._clock()
        keyed = [
            ((entry.updated_at, seq), entry)
            for seq, entry in self._ns(identity).entries.values()
            if not entry.is_expired(now) and (tiers is None or entry.tier in tiers)
        ]
        keyed.sort(key=lambda item: item[0], reverse=True)
        if after is not None:
            keyed = [item for item in keyed if item[0] < after]
        page = keyed[:size]
        more = len(keyed) > size
        return MemoryPage(
            entries=[entry for _, entry in page],
            cursor=encode_cursor(*page[-1][0]) if more else None,
        )

    async def search(
        self,
        identity: MemoryIdentity,
        vector: Sequence[float],
        *,
        k: int = 10,
        tiers: Sequence[Tier] | None = None,
        min_score: float | None = None,
        embedder_id: str | None = None,
    ) -> builtins.list[ScoredEntry]:
        check_k(k)
        now = self._clock()
        live = {
            entry.id: entry
            for _, entry in self._ns(identity).entries.values()
            if entry.embedding is not None
            and not entry.is_expired(now)
            and (tiers is None or entry.tier in tiers)
            and same_embedder(entry.embedding_model, embedder_id)
        }
        rows = [(entry_id, entry.embedding or []) for entry_id, entry in live.items()]
        hits = rank_cosine(vector, rows, k=k, min_score=min_score)
        return [ScoredEntry(entry=live[entry_id], score=score) for entry_id, score in hits]

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        self._ns(identity).entries.pop(entry_id, None)

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        return signature in self._ns(identity).signatures

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        self._ns(identity).signatures.add(signature)

    async def claim_turn(self, identity: MemoryIdentity, turn: int) -> bool:
        claimed = self._ns(identity).claimed_turns
        if turn in claimed:
            return False
        claimed.add(turn)
        return True


def _checked(entry: MemoryEntry) -> MemoryEntry:
    if not isinstance(entry, MemoryEntry):
        raise TypeError(f"A memory store stores MemoryEntry objects, not {type(entry).__name__}.")
    return entry
