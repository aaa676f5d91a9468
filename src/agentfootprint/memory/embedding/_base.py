"""The embedder port: texts in, one fixed-length vector per text out.

Memory stores keep vectors as float32 and refuse to mix vectors from different embedders, so an
embedder names itself (``id``) and its vector length (``dimensions``) before it embeds anything;
``'<id>@<dimensions>'`` is the fingerprint a store checks. This module imports no third-party
package, so it is safe to import anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ...errors import ConfigurationError

__all__ = ["Embedder", "checked_texts", "embedder_fingerprint"]


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors of one fixed length.

    Contract: ``embed(texts)`` returns exactly ``len(texts)`` vectors, in order, each of length
    ``dimensions``; an empty input gives ``[]`` without any work. The same text gives the same
    vector whenever the backend is deterministic. ``embed_sync`` is the same call for
    synchronous code. Vectors are plain floats; stores narrow them to float32.
    """

    @property
    def id(self) -> str:
        """Stable name of the model that makes the vectors (part of the store fingerprint)."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` for synchronous callers."""
        ...


def embedder_fingerprint(embedder: Embedder) -> str:
    """``'<id>@<dimensions>'``: what a store records beside a vector to refuse mixing models."""
    return f"{embedder.id}@{embedder.dimensions}"


def checked_texts(texts: Sequence[str], embedder_id: str) -> list[str]:
    """The texts as a list, refusing a bare string (it would be embedded letter by letter)."""
    if isinstance(texts, str):
        raise ConfigurationError(
            f"embedder {embedder_id!r} takes a list of texts, got the single string "
            f"{texts[:40]!r}; wrap it in a list: embed([text])")
    out = list(texts)
    for position, text in enumerate(out):
        if not isinstance(text, str):
            raise ConfigurationError(
                f"embedder {embedder_id!r} takes texts (str), got {text!r} at position "
                f"{position}")
    return out
