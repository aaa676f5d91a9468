"""``openai_embedder``: vectors from the OpenAI embeddings API, or any server that speaks it.

Built on the official ``openai`` SDK (``pip install "agentfootprint[openai]"``), imported when the
embedder is made. Client set-up (``$OPENAI_API_KEY``, ``base_url=`` for OpenAI-compatible servers
such as llama.cpp, vLLM or Ollama's ``/v1``) and error translation are the chat provider's
(``providers/openai.py``), so an embedding failure reads and retries like a chat failure:
``ProviderError`` with the HTTP ``status`` kept, ``ContextWindowExceededError`` for a text too long
for the model, ``ProviderUnavailableError`` when the server cannot be reached.

The vector length must be known before the first call (stores fingerprint ``id@dimensions``):
OpenAI's own models have known native sizes; for any other model pass ``dimensions=``. An explicit
``dimensions`` is sent to the server (text-embedding-3 models shorten their vectors to it), and
every answer is checked to hold one vector of that length per text.

``embed_sync`` goes through the SDK's synchronous client, not ``asyncio.run(embed())``: an
``AsyncOpenAI`` keeps pooled connections tied to the event loop that opened them, so a second
``asyncio.run`` on the same client fails with "Event loop is closed".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError, ProviderError
from ._base import checked_texts

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["NATIVE_DIMENSIONS", "OpenAIEmbedder", "openai_embedder"]

NATIVE_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Vector length of OpenAI's embedding models when no ``dimensions`` is asked for."""

_MAX_BATCH = 2048
"""The API's limit on inputs per request."""


class OpenAIEmbedder:
    """Embeddings over ``client.embeddings.create``, ``batch_size`` texts per request.

    * ``model``: the embedding model; the id is ``'openai:<model>'``.
    * ``dimensions``: required for models not in ``NATIVE_DIMENSIONS``; sent when given.
    * ``api_key``, ``base_url``, ``timeout``, ``max_retries``, ``client``: as for the openai chat
      provider (SDK retries off by default; a ready ``openai.AsyncOpenAI`` for tests/proxies).
    * ``sync_client``: a ready ``openai.OpenAI`` for ``embed_sync``; without it one is made from
      the same options, except when ``client=`` was given (then ``embed_sync`` needs it).
    """

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 0,
        client: AsyncOpenAI | None = None,
        sync_client: OpenAI | None = None,
        batch_size: int = 512,
    ) -> None:
        from ...providers._openai import OpenAIProvider

        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"openai_embedder model={model!r} must be a model name")
        if dimensions is None:
            native = NATIVE_DIMENSIONS.get(model)
            if native is None:
                raise ConfigurationError(
                    f"openai_embedder does not know the vector length of model {model!r}; "
                    "pass dimensions=<its vector length>")
        elif isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ConfigurationError(
                f"openai_embedder dimensions={dimensions!r} must be an int >= 1")
        if (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                or not 1 <= batch_size <= _MAX_BATCH):
            raise ConfigurationError(
                f"openai_embedder batch_size={batch_size!r} must be an int from 1 to "
                f"{_MAX_BATCH} (the API's limit per request)")
        self._provider = OpenAIProvider(
            model=model, base_url=base_url, api_key=api_key, timeout=timeout,
            max_retries=max_retries, client=client, name="openai")
        self.model = model
        self.id = f"openai:{model}"
        self.dimensions: int = dimensions if dimensions is not None else NATIVE_DIMENSIONS[model]
        self._send_dimensions = dimensions is not None
        self.batch_size = batch_size
        self._sync_client = sync_client
        self._sync_options: dict[str, Any] | None = None if client is not None else {
            "base_url": base_url, "timeout": timeout, "max_retries": max_retries}

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client the requests go through."""
        client: AsyncOpenAI = self._provider.client
        return client

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; no request at all for an empty list."""
        items = checked_texts(texts, self.id)
        out: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            out.extend(await self._request(items[start:start + self.batch_size]))
        return out

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` for synchronous code, over the SDK's synchronous client."""
        items = checked_texts(texts, self.id)
        out: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            try:
                response = self._sync().embeddings.create(**self._params(batch))
            except self._provider._openai.OpenAIError as exc:
                raise self._provider._translate(exc) from exc
            out.extend(self._vectors(response, len(batch)))
        return out

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_sync``, so the embedder also fits APIs that take a plain function."""
        return self.embed_sync(texts)

    def __repr__(self) -> str:
        return f"openai_embedder(model={self.model!r}, dimensions={self.dimensions})"

    def _params(self, batch: list[str]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._send_dimensions:
            params["dimensions"] = self.dimensions
        return params

    async def _request(self, batch: list[str]) -> list[list[float]]:
        try:
            response = await self.client.embeddings.create(**self._params(batch))
        except self._provider._openai.OpenAIError as exc:
            raise self._provider._translate(exc) from exc
        return self._vectors(response, len(batch))

    def _sync(self) -> OpenAI:
        """The synchronous SDK client, made on first use from the embedder's options."""
        if self._sync_client is None:
            if self._sync_options is None:
                raise ConfigurationError(
                    f"embedder {self.id!r} was given an async client= only, so embed_sync has "
                    "no client: pass sync_client=openai.OpenAI(...) as well, or await embed()")
            options = {key: value for key, value in self._sync_options.items()
                       if value is not None}
            self._sync_client = self._provider._openai.OpenAI(
                api_key=self.client.api_key, **options)
        return self._sync_client

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        where = self._provider._endpoint
        items = sorted(getattr(response, "data", None) or (), key=lambda item: item.index)
        if len(items) != expected or [item.index for item in items] != list(range(expected)):
            raise ProviderError(
                f"[openai] {where} returned {len(items)} embeddings for {expected} texts "
                f"(model {self.model!r}); expected one per text", provider="openai",
                retryable=False)
        vectors: list[list[float]] = []
        for item in items:
            vector = item.embedding
            if not isinstance(vector, list) or len(vector) != self.dimensions:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise ProviderError(
                    f"[openai] {where} returned a vector of {size} dimensions from model "
                    f"{self.model!r}, but the embedder declares {self.dimensions}; pass "
                    f"dimensions= the model's real vector length", provider="openai",
                    retryable=False)
            vectors.append([float(value) for value in vector])
        return vectors


def openai_embedder(
    model: str = "text-embedding-3-small",
    *,
    dimensions: int | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int = 0,
    client: AsyncOpenAI | None = None,
    sync_client: OpenAI | None = None,
    batch_size: int = 512,
) -> OpenAIEmbedder:
    """An embedder on the OpenAI embeddings API (id ``'openai:<model>'``); see OpenAIEmbedder."""
    return OpenAIEmbedder(model=model, dimensions=dimensions, api_key=api_key, base_url=base_url,
                          timeout=timeout, max_retries=max_retries, client=client,
                          sync_client=sync_client, batch_size=batch_size)
