"""``InMemoryStore``: the reference store, in-process and not durable. For tests and dev."""

from __future__ import annotations

import builtins
import itertools
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentfootprint.memory._entry import MemoryEntry, Tier, now_ms
from agentfootprint.memory._errors import MemoryStoreError
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import (
    MemoryPage,
    ScoredEntry,
    StoreCapabilities,
    check_entries,
    check_k,
    check_limit,
)
from agentfootprint.memory.stores._closing import Closing
from agentfootprint.memory.stores._keyset import decode_cursor, encode_cursor
from agentfootprint.memory.stores._vectors import VectorIndex, search_filter

__all__ = ["InMemoryStore"]


@dataclass
class _Namespace:
    entries: dict[str, tuple[int, MemoryEntry]] = field(default_factory=dict)
    signatures: set[str] = field(default_factory=set)
    claims: dict[int, tuple[int, str | None]] = field(default_factory=dict)
    """Turn → (claimed_at, the owner holding it or ``None`` once settled)."""
    index: tuple[VectorIndex, list[tuple[str | None, int | None, str | None]],
                 dict[str, MemoryEntry]] | None = None
    """Vectors ready for search; dropped by every write to the namespace."""
    ordered: list[tuple[tuple[int, int], MemoryEntry]] | None = None
    """Entries in list order, keyed ``(-updated_at, -seq)``; dropped by every write."""

    def changed(self) -> None:
        self.index = None
        self.ordered = None


class InMemoryStore(Closing):
    """A ``MemoryStore`` kept in a dict. Every method completes without yielding to the loop,
    so ``claim_turn`` is atomic for every task of the process (and only that process)."""

    def __init__(self, *, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self._seq = itertools.count(1)
        self._namespaces: dict[str, _Namespace] = {}
        self._closed = False

    @property
    def name(self) -> str:
        return "InMemoryStore"

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=True, atomic_turn_claim=True)

    async def aclose(self) -> None:
        """Drop the entries; later calls raise ``MemoryStoreError``, as on every store."""
        self.close_sync()

    def close_sync(self) -> None:
        """``aclose`` from synchronous code."""
        self._closed = True
        self._namespaces.clear()


    def _ns(self, identity: MemoryIdentity) -> _Namespace:
        if self._closed:
            raise MemoryStoreError(
                "InMemoryStore was used after the store was closed; make a new InMemoryStore.",
                store=self.name)
        return self._namespaces.setdefault(identity.namespace, _Namespace())

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        ns = self._ns(identity)
        found = ns.entries.get(entry_id)
        if found is None:
            return None
        if found[1].is_expired(self._clock()):
            del ns.entries[entry_id]
            ns.changed()
            return None
        return found[1]

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        check_entries([entry], store=self.name)
        ns = self._ns(identity)
        ns.entries[entry.id] = (next(self._seq), entry)
        ns.changed()

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        check_entries(entries, store=self.name)
        ns = self._ns(identity)
        for entry in entries:
            ns.entries[entry.id] = (next(self._seq), entry)
        if entries:
            ns.changed()

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
        ns = self._ns(identity)
        if ns.ordered is None:
            ns.ordered = sorted(
                (((-entry.updated_at, -seq), entry) for seq, entry in ns.entries.values()),
                key=lambda item: item[0],
            )
        ordered = ns.ordered
        start = 0 if after is None else bisect_right(ordered, (-after[0], -after[1]),
                                                      key=lambda item: item[0])
        page: list[tuple[tuple[int, int], MemoryEntry]] = []
        more = False
        for item in ordered[start:] if start else ordered:
            entry = item[1]
            if entry.is_expired(now) or (tiers is not None and entry.tier not in tiers):
                continue
            if len(page) == size:
                more = True
                break
            page.append(item)
        return MemoryPage(
            entries=[entry for _, entry in page],
            cursor=encode_cursor(-page[-1][0][0], -page[-1][0][1]) if more else None,
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
        ns = self._ns(identity)
        if ns.index is None:
            held = [e for _, e in ns.entries.values() if e.embedding is not None]
            ns.index = (VectorIndex([(e.id, e.embedding or []) for e in held]),
                        [(e.embedding_model, e.expires_at, e.tier) for e in held],
                        {e.id: e for e in held})
        index, metas, by_id = ns.index
        keep = search_filter(metas, now=now, tiers=tiers, embedder_id=embedder_id)
        hits = index.rank(vector, keep=keep, k=k, min_score=min_score)
        return [ScoredEntry(entry=by_id[entry_id], score=score) for entry_id, score in hits]

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        ns = self._ns(identity)
        if ns.entries.pop(entry_id, None) is not None:
            ns.changed()

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        return signature in self._ns(identity).signatures

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        self._ns(identity).signatures.add(signature)

    async def claim_turn(
        self,
        identity: MemoryIdentity,
        turn: int,
        *,
        owner: str | None = None,
        reclaim_before: int | None = None,
    ) -> bool:
        claims = self._ns(identity).claims
        found = claims.get(turn)
        if found is not None:
            claimed_at, holder = found
            mine = owner is not None and holder == owner
            expired = (holder is None and reclaim_before is not None
                       and claimed_at < reclaim_before)
            if not (mine or expired):
                return False
        claims[turn] = (self._clock(), owner)
        return True

    async def release_turn(
        self, identity: MemoryIdentity, turn: int, *, owner: str, keep: bool
    ) -> None:
        claims = self._ns(identity).claims
        found = claims.get(turn)
        if found is None or found[1] != owner:
            return
        if keep:
            claims[turn] = (self._clock(), None)
        else:
            del claims[turn]
