"""Exact cosine ranking shared by the stores that search in-process (memory, SQLite).

Rows are ``(entry_id, vector)`` pairs already filtered for liveness, tier and embedder; this
module applies the rest of the search contract (length, zero vectors, ``min_score``, order).
NumPy is used when installed (it turns a 100k-row scan into one matrix product); the pure
Python path gives the same ranking up to float rounding.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "VectorIndex",
    "VectorMeta",
    "pack_float32",
    "rank_cosine",
    "same_embedder",
    "search_filter",
    "unpack_float32",
]


VectorMeta = tuple[str | None, int | None, str | None]
"""embedding_model, expires_at, tier: what a search filters an indexed vector on."""


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def rank_cosine(
    query: Sequence[float],
    rows: Sequence[tuple[str, Sequence[float]]],
    *,
    k: int,
    min_score: float | None,
) -> list[tuple[str, float]]:
    """``(id, score)`` of the ``k`` best rows, score descending then id ascending."""
    query_norm = math.sqrt(math.fsum(x * x for x in query))
    if query_norm == 0.0:
        return []
    dims = len(query)
    candidates = [(entry_id, vec) for entry_id, vec in rows if len(vec) == dims]
    if not candidates:
        return []
    np = _numpy()
    scored: list[tuple[str, float]] = []
    if np is not None and len(candidates) > 32:
        matrix = np.asarray([vec for _, vec in candidates], dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        dots = matrix @ np.asarray(query, dtype=np.float64)
        for (entry_id, _), dot, norm in zip(candidates, dots.tolist(), norms.tolist(), strict=True):
            if norm > 0.0:
                scored.append((entry_id, _clamp(dot / (norm * query_norm))))
    else:
        for entry_id, vec in candidates:
            norm = math.sqrt(math.fsum(x * x for x in vec))
            if norm > 0.0:
                dot = math.fsum(a * b for a, b in zip(vec, query, strict=True))
                scored.append((entry_id, _clamp(dot / (norm * query_norm))))
    if min_score is not None:
        scored = [hit for hit in scored if hit[1] >= min_score]
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored[:k]


def _clamp(score: float) -> float:
    return max(-1.0, min(1.0, score))


def same_embedder(entry_model: str | None, wanted: str | None) -> bool:
    """Whether an entry may be compared with a query from embedder ``wanted``.

    Ids decide only when both sides named themselves; lengths are checked by the ranking.
    """
    return wanted is None or entry_model is None or entry_model == wanted


class VectorIndex:
    """Rows ``(id, vector)`` ready for repeated searches: with NumPy, one matrix per length.

    A store keeps one per namespace until it writes there, so a search costs one matrix
    product instead of converting every stored vector again.
    """

    def __init__(self, rows: Sequence[tuple[str, Sequence[float]]]) -> None:
        self._rows: list[tuple[str, Sequence[float]]] | None = list(rows)
        self.ids = [row[0] for row in self._rows]
        self._matrices: dict[int, tuple[list[int], Any, Any]] = {}

    @property
    def rows(self) -> list[tuple[str, Sequence[float]]]:
        """``(id, vector)`` per position (a packed index makes them on first use)."""
        if self._rows is None:
            self._rows = self._make_rows()
        return self._rows

    def _make_rows(self) -> list[tuple[str, Sequence[float]]]:
        return []

    def __len__(self) -> int:
        return len(self.ids)

    def rank(
        self,
        query: Sequence[float],
        *,
        keep: Callable[[int], bool],
        k: int,
        min_score: float | None,
    ) -> list[tuple[str, float]]:
        """Like :func:`rank_cosine` over the rows whose position ``keep`` accepts."""
        np = _numpy()
        if np is None or len(self.ids) <= 32:
            rows = [row for i, row in enumerate(self.rows) if keep(i)]
            return rank_cosine(query, rows, k=k, min_score=min_score)
        query_norm = math.sqrt(math.fsum(x * x for x in query))
        if query_norm == 0.0:
            return []
        positions, matrix, norms = self._matrix(np, len(query))
        if not positions:
            return []
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = (matrix @ np.asarray(query, dtype=np.float64)) / (norms * query_norm)
        scores = np.clip(np.where(norms > 0.0, scores, np.nan), -1.0, 1.0)
        order = np.argsort(-scores, kind="stable")
        picked: list[tuple[str, float]] = []
        for slot in order.tolist():
            score = float(scores[slot])
            if math.isnan(score) or (min_score is not None and score < min_score):
                break  # NaN (zero vectors) sort last; scores only fall from here
            if len(picked) >= k and score < picked[-1][1]:
                break  # ties with the k-th are kept so ids can break them below
            position = positions[slot]
            if keep(position):
                picked.append((self.ids[position], score))
        picked.sort(key=lambda hit: (-hit[1], hit[0]))
        return picked[:k]

    def _matrix(self, np: Any, dims: int) -> tuple[list[int], Any, Any]:
        if dims not in self._matrices:
            positions = [i for i, (_, vec) in enumerate(self.rows) if len(vec) == dims]
            matrix = np.asarray([self.rows[i][1] for i in positions], dtype=np.float64)
            matrix = matrix.reshape(len(positions), dims)
            self._matrices[dims] = (positions, matrix, np.linalg.norm(matrix, axis=1))
        return self._matrices[dims]


def search_filter(
    metas: Sequence[VectorMeta],
    *,
    now: int,
    tiers: Sequence[str] | None,
    embedder_id: str | None,
) -> Callable[[int], bool]:
    """Which indexed rows a search may rank: live at ``now``, of the tiers asked for, and made
    by a comparable embedder. ``metas[i]`` is row i's ``(embedding_model, expires_at, tier)``.
    """

    def keep(position: int) -> bool:
        model, expires_at, tier = metas[position]
        return ((expires_at is None or expires_at > now)
                and (tiers is None or tier in tiers)
                and same_embedder(model, embedder_id))

    return keep


def pack_float32(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float32 bytes (entries hold float32-rounded vectors, so this
    is exact): how the SQLite and Redis stores keep vectors."""
    packed = array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def unpack_float32(blob: bytes) -> list[float]:
    """The inverse of :func:`pack_float32`; raises ``ValueError`` on a torn blob."""
    unpacked = array("f")
    unpacked.frombytes(blob)
    if sys.byteorder != "little":
        unpacked.byteswap()
    return unpacked.tolist()
