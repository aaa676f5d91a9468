"""Shared test doubles for the RAG tests: a counting embedder and a store without search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentfootprint.memory import InMemoryStore, MemoryIdentity
from agentfootprint.memory._store import StoreCapabilities
from agentfootprint.memory.embedding import mock_embedder

CORPUS = MemoryIdentity("corpus")


class CountingEmbedder:
    """The mock embedder, counting the texts it is asked to embed (and able to rename itself)."""

    def __init__(self, dimensions: int = 256, id: str | None = None) -> None:
        self.inner = mock_embedder(dimensions)
        self.id = id or self.inner.id
        self.dimensions = dimensions
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return await self.inner.embed(texts)

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed_sync(texts)


class NoSearchStore:
    """A store that declares no vector search (like a plain key-value backend)."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    @property
    def name(self) -> str:
        return "NoSearchStore()"

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=False)

    def __getattr__(self, name: str) -> Any:
        if name == "search":
            raise AttributeError(name)
        return getattr(self.inner, name)
