"""A deterministic hashing embedder: offline, dependency-free, the same vectors in every process.

It knows no meaning, only shared words: each word (lower-cased run of letters and digits) adds
one to the bucket ``crc32(word) % dimensions``, and the counts are L2-normalised. CRC32 rather
than ``hash()`` because Python salts string hashes per process, and stored vectors must match
vectors made tomorrow. For tests, demos and the zero-set-up default; use a real model
(``minilm_embedder``) when recall quality matters.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterable, Sequence

from ...errors import ConfigurationError
from ._base import checked_texts

__all__ = ["MockEmbedder", "hash_bag_of_words", "mock_embedder"]

_WORD = re.compile(r"[^\W_]+")


def hash_bag_of_words(tokens: Iterable[str], dimensions: int) -> list[float]:
    """Token counts hashed into ``dimensions`` buckets by CRC32 of the UTF-8 token (not normalised).

    The one hashing rule shared by every mock embedder in the package, so their vectors agree.
    """
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        raise ConfigurationError(f"dimensions={dimensions!r} must be an int >= 1")
    vector = [0.0] * dimensions
    for token in tokens:
        vector[zlib.crc32(token.encode("utf-8")) % dimensions] += 1.0
    return vector


def _normalised(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else vector


class MockEmbedder:
    """Hashing bag-of-words vectors, L2-normalised; a text without words gives the zero vector."""

    __slots__ = ("dimensions", "id")

    def __init__(self, dimensions: int = 256) -> None:
        hash_bag_of_words((), dimensions)  # validates dimensions
        self.dimensions = dimensions
        self.id = f"mock-hash-{dimensions}"

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text (zero vector for a text with no words)."""
        return [_normalised(hash_bag_of_words(_WORD.findall(text.casefold()), self.dimensions))
                for text in checked_texts(texts, self.id)]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Same as ``embed_sync``: hashing is too cheap to be worth a thread."""
        return self.embed_sync(texts)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_sync``, so the embedder also fits APIs that take a plain function."""
        return self.embed_sync(texts)

    def __repr__(self) -> str:
        return f"mock_embedder(dimensions={self.dimensions})"


def mock_embedder(dimensions: int = 256) -> MockEmbedder:
    """A deterministic, offline embedder (id ``'mock-hash-<dimensions>'``) for tests and demos."""
    return MockEmbedder(dimensions)
