"""The ``MemoryStore`` port: what every memory backend promises.

Identity is the first argument of every call; a wrong identity reads as "no data".

**List order is part of the contract**: newest first by ``updated_at``; entries with equal
``updated_at`` (all entries of one turn share it) come most-recently-written first, by a
store-assigned write sequence that every ``put`` advances. Ids never decide order, so
``msg-10-*`` never sorts before ``msg-9-*`` and within one ``put_many`` batch the last entry is
listed first (read a page backwards for chronological order). Paging is keyset-based on
``(updated_at, write sequence)``: over an unchanged store, pages never overlap and together list
every live entry exactly once.

**Expired entries are invisible** to ``get`` and ``list`` alike (``expires_at <= now``).

**Turn claims belong to runs** on a :class:`TurnClaimStore`: ``claim_turn`` with an ``owner``
holds the turn until that owner calls ``release_turn``; a settled claim is then reclaimable once
its turn's entries are gone, so no number of expired turns can exhaust a conversation. A store
may also expose ``backend`` (a string naming where its data lives, e.g. the resolved file path):
two store objects with the same ``backend`` are one store to turn resolution.

**Capabilities are declared, never faked**: a store without vector search says
``capabilities.vector_search is False`` and has no ``search`` method.

**Vector search** (:class:`VectorSearchStore`) ranks live entries by cosine similarity of their
``embedding`` with the query. It skips entries without an embedding, with a different length,
with a zero vector, or (when ``embedder_id`` is given and the entry names its model) made by
another embedder; it drops scores below ``min_score`` and sorts by score descending, ties by id
ascending. A zero query vector finds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agentfootprint.memory._entry import MemoryEntry, Tier
from agentfootprint.memory._identity import MemoryIdentity

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "MAX_LIST_LIMIT",
    "MemoryPage",
    "MemoryStore",
    "ScoredEntry",
    "StoreCapabilities",
    "TurnClaimStore",
    "VectorSearchStore",
    "check_entries",
    "check_k",
    "check_limit",
]

DEFAULT_LIST_LIMIT = 100
"""Page size when ``list`` is called without ``limit``."""
MAX_LIST_LIMIT = 1000
"""The largest page a store hands out; bigger limits are capped to it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreCapabilities:
    """What a store can do beyond the required methods. Absent means not supported."""

    vector_search: bool = False
    """True only when the store really ranks stored vectors by similarity."""
    atomic_turn_claim: bool = True
    """True when ``claim_turn`` is atomic across every process sharing the store."""


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of a ``list``: entries newest first, and a cursor iff more pages follow."""

    entries: list[MemoryEntry] = field(default_factory=list)
    cursor: str | None = None


@runtime_checkable
class MemoryStore(Protocol):
    """An async memory backend. Every method takes the identity whose namespace it touches."""

    @property
    def name(self) -> str:
        """A human name for error messages, e.g. ``SQLiteStore('memory.db')``."""
        ...

    @property
    def capabilities(self) -> StoreCapabilities:
        """What this store declares it can do."""
        ...

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        """The entry, or ``None`` when it is missing or expired."""
        ...

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        """Write the entry, overwriting one with the same id (last write wins)."""
        ...

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        """Write every entry in order; an empty batch is a no-op."""
        ...

    async def list(
        self,
        identity: MemoryIdentity,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        tiers: Sequence[Tier] | None = None,
    ) -> MemoryPage:
        """One page of live entries in contract order (see module docstring)."""
        ...

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        """Remove the entry; a missing id is a no-op. Signatures are kept."""
        ...

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        """Whether ``signature`` was recorded in this namespace."""
        ...

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        """Remember ``signature``; survives deletion of the entries it came from."""
        ...

    async def claim_turn(self, identity: MemoryIdentity, turn: int) -> bool:
        """Atomically claim ``turn`` for one run; False when it was already claimed."""
        ...


@runtime_checkable
class TurnClaimStore(MemoryStore, Protocol):
    """A store whose turn claims belong to runs (all four built-in stores): a claim is held
    by its owner until released, and a settled claim expires with its turn's entries."""

    async def claim_turn(
        self,
        identity: MemoryIdentity,
        turn: int,
        *,
        owner: str | None = None,
        reclaim_before: int | None = None,
    ) -> bool:
        """Atomically claim ``turn`` for one run; False when another run holds it.

        A claim ``owner`` holds stays its own: the same owner claiming again gets True (a
        resumed run, or a second store object on the same backend). A claim nobody holds any
        more (settled or anonymous) whose ``claimed_at`` is before ``reclaim_before`` is taken
        over; the caller passes that only for a turn above every live entry it saw, so the
        claim has expired with its turn's entries (see ``resolve_turn_number``).
        """
        ...

    async def release_turn(
        self, identity: MemoryIdentity, turn: int, *, owner: str, keep: bool
    ) -> None:
        """End ``owner``'s hold on ``turn`` (a no-op when ``owner`` does not hold it).

        ``keep=True`` settles it: the claim stays, held by nobody, stamped now, and lives
        as long as its turn's entries. ``keep=False`` removes it: the run wrote nothing,
        so the turn number is free again.
        """
        ...


@dataclass(frozen=True, slots=True)
class ScoredEntry:
    """One vector-search hit: the entry and its cosine score in ``[-1, 1]``."""

    entry: MemoryEntry
    score: float


@runtime_checkable
class VectorSearchStore(MemoryStore, Protocol):
    """A store that really ranks stored vectors (``capabilities.vector_search is True``)."""

    async def search(
        self,
        identity: MemoryIdentity,
        vector: Sequence[float],
        *,
        k: int = 10,
        tiers: Sequence[Tier] | None = None,
        min_score: float | None = None,
        embedder_id: str | None = None,
    ) -> list[ScoredEntry]:
        """The ``k`` best live entries by cosine similarity (see module docstring)."""
        ...


def check_entries(entries: Sequence[MemoryEntry], *, store: str) -> None:
    """Refuse a batch holding anything but ``MemoryEntry`` objects, before any write."""
    for entry in entries:
        if not isinstance(entry, MemoryEntry):
            raise TypeError(f"{store} stores MemoryEntry objects, not {type(entry).__name__}.")


def check_k(k: int) -> int:
    """Validate a search's ``k``."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"search(k={k!r}) must be a positive int.")
    return k


def check_limit(limit: int | None) -> int:
    """The page size to use: default when ``None``, capped at :data:`MAX_LIST_LIMIT`."""
    if limit is None:
        return DEFAULT_LIST_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"list(limit={limit!r}) must be a positive int (or None for the default).")
    return min(limit, MAX_LIST_LIMIT)
