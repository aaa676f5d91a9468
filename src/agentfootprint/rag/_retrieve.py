"""Retrieval: the chunks most similar to a query, and the ones that only just missed.

``retrieve(store, identity, query, embedder=..., k=3, threshold=0.7)`` embeds the query, asks
the store for ``k + window`` candidates *without* a score floor, and judges them here: the best
``k`` scoring at least ``threshold`` are hits; every other candidate is kept as a near miss with
its score, rank and the reason it was dropped (``below-threshold``, ``over-k``,
``over-char-budget`` or ``excluded``). Applying the floor locally is what lets an explanation
later say "this chunk was retrieved but dropped at 0.68 < 0.70" instead of knowing nothing.

Contract: hits come in score order (ties by id); ``rank`` is the 1-based position among all
candidates; an empty query searches nothing and embeds nothing; ``max_chars`` is spent over the
hits in rank order and the first that does not fit and everything after it are dropped (no
skipping ahead to smaller ones, so the admitted set is a prefix of the ranking). The record
(:meth:`Retrieval.record`) is plain JSON and holds a hash of the query, never its text.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from ..errors import ConfigurationError
from ..memory._errors import UnreadableEntryError
from ..memory._identity import MemoryIdentity
from ..memory._store import MemoryStore
from ._chunking import Chunk
from ._index import CHUNK_KIND, require_vector_search

if TYPE_CHECKING:
    from ..memory.embedding._base import Embedder

__all__ = ["DEFAULT_THRESHOLD", "DropReason", "RetrievedChunk", "Retrieval", "retrieve"]

DEFAULT_THRESHOLD = 0.7
"""RAG's default score floor. Calibrate per embedder: MiniLM-class models often score relevant
passages 0.4–0.6, hashing mock embedders lower still; near misses show where the line fell."""

DropReason = Literal["below-threshold", "over-k", "over-char-budget", "excluded"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievedChunk:
    """One candidate: the chunk, its cosine score, its rank, and whether it was admitted."""

    chunk: Chunk
    score: float
    rank: int
    """1-based position among the candidates, best first."""
    admitted: bool
    reason: DropReason | None = None
    """Why it was dropped; ``None`` for hits."""

    def record(self) -> dict[str, Any]:
        """JSON for the trace: where the chunk is, how it scored, what became of it."""
        return {"id": self.chunk.id, "uri": self.chunk.uri, "index": self.chunk.index,
                "heading_path": list(self.chunk.heading_path), "score": round(self.score, 6),
                "rank": self.rank, "admitted": self.admitted, "reason": self.reason,
                "chars": len(self.chunk.text)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrieval:
    """The outcome of one retrieval: every candidate judged, plus how it was asked."""

    candidates: tuple[RetrievedChunk, ...]
    """Every candidate the store returned, in rank order."""
    k: int
    threshold: float | None
    embedder_id: str
    namespace: str
    query_hash: str
    """SHA-256 prefix of the query (the text itself is not kept)."""
    max_chars: int | None = None
    complete: bool = True
    """True when the store returned fewer candidates than asked: nothing else was in reach."""
    foreign: int = 0
    """Entries in the namespace that are not chunks (skipped)."""

    @property
    def hits(self) -> tuple[RetrievedChunk, ...]:
        """The admitted chunks, best first."""
        return tuple(c for c in self.candidates if c.admitted)

    @property
    def near_misses(self) -> tuple[RetrievedChunk, ...]:
        """Candidates that were retrieved but dropped, best first, each with its reason."""
        return tuple(c for c in self.candidates if not c.admitted)

    def record(self) -> dict[str, Any]:
        """The whole judgement as JSON (what a recording keeps)."""
        return {"strategy": "top_k", "k": self.k, "threshold": self.threshold,
                "max_chars": self.max_chars, "embedder_id": self.embedder_id,
                "namespace": self.namespace, "query_hash": self.query_hash,
                "considered": len(self.candidates), "admitted": [c.chunk.id for c in self.hits],
                "candidates": [c.record() for c in self.candidates],
                "near_misses": [c.record() for c in self.near_misses],
                "complete": self.complete, "foreign": self.foreign}


async def retrieve(
    store: MemoryStore,
    identity: MemoryIdentity,
    query: str,
    *,
    embedder: Embedder,
    k: int = 3,
    threshold: float | None = DEFAULT_THRESHOLD,
    window: int = 10,
    max_chars: int | None = None,
    exclude: Iterable[str] = (),
) -> Retrieval:
    """Judge the ``k + window`` most similar chunks to ``query`` (see the module docstring).

    ``threshold=None`` admits the best ``k`` whatever they score. ``exclude`` lists chunk ids
    to leave out (recorded as dropped ``excluded``), e.g. to re-run without a suspect chunk.
    """
    vectors = require_vector_search(store, "retrieve")
    check_options(k, threshold, window, max_chars)
    if not isinstance(query, str):
        raise ConfigurationError(f"retrieve(query={query!r}) must be a str")
    left_out = set(exclude)
    text = query.strip()
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def outcome(candidates: list[RetrievedChunk], *, complete: bool = True,
                foreign: int = 0) -> Retrieval:
        return Retrieval(candidates=tuple(candidates), k=k, threshold=threshold,
                         embedder_id=embedder.id, namespace=identity.namespace,
                         query_hash=digest, max_chars=max_chars, complete=complete,
                         foreign=foreign)

    if not text:
        return outcome([])
    (vector,) = await embedder.embed([text])
    pool = k + window
    found = await vectors.search(identity, vector, k=pool, embedder_id=embedder.id)
    chunks: list[tuple[Chunk, float]] = []
    foreign = 0
    for hit in found:
        if (hit.entry.metadata or {}).get("kind") != CHUNK_KIND:
            foreign += 1
            continue
        try:
            chunks.append((Chunk.model_validate(hit.entry.value), hit.score))
        except ValidationError as exc:
            raise UnreadableEntryError(
                f"{vectors.name} holds entry {hit.entry.id!r} marked as a chunk whose value is "
                f"not a chunk ({exc.error_count()} problem(s)); re-index its document with "
                "index_documents", store=vectors.name, entry_id=hit.entry.id) from exc
    return outcome(_judge(chunks, k, threshold, max_chars, left_out),
                   complete=len(found) < pool, foreign=foreign)


def _judge(chunks: list[tuple[Chunk, float]], k: int, threshold: float | None,
           max_chars: int | None, exclude: set[str]) -> list[RetrievedChunk]:
    out: list[RetrievedChunk] = []
    admitted = 0
    spent = 0
    budget_closed = False
    for rank, (chunk, score) in enumerate(chunks, start=1):
        reason: DropReason | None = None
        if chunk.id in exclude:
            reason = "excluded"
        elif threshold is not None and score < threshold:
            reason = "below-threshold"
        elif admitted >= k:
            reason = "over-k"
        elif max_chars is not None and (budget_closed or spent + len(chunk.text) > max_chars):
            reason, budget_closed = "over-char-budget", True
        else:
            admitted += 1
            spent += len(chunk.text)
        out.append(RetrievedChunk(chunk=chunk, score=score, rank=rank, admitted=reason is None,
                                  reason=reason))
    return out


def check_options(k: int, threshold: float | None, window: int, max_chars: int | None) -> None:
    """Refuse retrieval options that cannot work, naming the option."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigurationError(f"k={k!r} must be an int >= 1")
    if threshold is not None and (isinstance(threshold, bool)
                                  or not isinstance(threshold, (int, float))
                                  or not math.isfinite(threshold)
                                  or not -1.0 <= threshold <= 1.0):
        raise ConfigurationError(
            f"threshold={threshold!r} must be a cosine score in [-1, 1], or None for no floor")
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigurationError(f"window={window!r} must be an int >= 0")
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                                  or max_chars < 1):
        raise ConfigurationError(f"max_chars={max_chars!r} must be an int >= 1, or None")
