"""Exact cosine ranking shared by the stores that search in-process (memory, SQLite).

Rows are ``(entry_id, vector)`` pairs already filtered for liveness, tier and embedder; this
module applies the rest of the search contract (length, zero vectors, ``min_score``, order).
NumPy is used when installed (it turns a 100k-row scan into one matrix product); the pure
Python path gives the same ranking up to float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["rank_cosine", "same_embedder"]


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
