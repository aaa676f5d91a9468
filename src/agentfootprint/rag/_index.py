"""Indexing a corpus: chunks embedded and stored as memory entries, incrementally.

``index_documents(store, identity, documents, embedder=...)`` splits each document, embeds the
chunks and writes one ``MemoryEntry`` per chunk (id ``<uri>#<index>``, value the chunk as JSON,
vector stamped with ``embedder.id``, ``metadata`` holding the content hash). Re-running it is
cheap: a chunk whose stored value, content hash and embedder are unchanged is not touched; a
chunk whose text merely moved (a paragraph inserted above it) is rewritten with the vector it
already had, without calling the embedder; only new text is embedded.

Contract:

* the store must declare vector search (``capabilities.vector_search``); others are refused by
  name before anything is split or embedded;
* removal is scoped to the documents given: chunks of a given document beyond its new chunk
  count are deleted; a document *not* given is left alone unless ``prune=True`` (so two folders
  indexed into one namespace never delete each other's chunks);
* writes happen before deletes, and a document's stale chunks are deleted from the highest
  index down, so an interrupted run leaves chunk ids contiguous and the next run finishes it;
* every chunk is checked against its document (``text[start:end] == chunk.text``, id shape),
  so a custom splitter that lies is refused by name instead of corrupting citations.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..memory._entry import MemoryEntry, now_ms
from ..memory._identity import MemoryIdentity
from ..memory._store import MemoryStore, VectorSearchStore
from ._chunking import Chunk, HeadingSplitter
from ._loaders import Document

if TYPE_CHECKING:
    from ..memory.embedding._base import Embedder

__all__ = ["CHUNK_KIND", "IndexReport", "Splitter", "index_documents", "require_vector_search"]

CHUNK_KIND = "rag.chunk"
"""``metadata["kind"]`` of every entry the indexer writes; retrieval reads only these."""

Splitter = HeadingSplitter | Callable[[Document], Sequence[Chunk]]
"""A ``HeadingSplitter`` or any function from a document to its chunks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexReport:
    """What one indexing run did, chunk by chunk."""

    added: int
    """Chunks written under an id that did not exist."""
    updated: int
    """Chunks rewritten because their text, position, headings or embedder changed."""
    unchanged: int
    """Chunks left as they were."""
    removed: int
    """Stale chunks deleted (beyond a document's new end, or pruned)."""
    embedded: int
    """Texts sent to the embedder (updated chunks whose text only moved reuse their vector)."""
    embedder: str
    """The embedder fingerprint ``'<id>@<dimensions>'`` the vectors carry."""
    written_ids: tuple[str, ...] = ()
    """Ids of added and updated chunks, in document order."""
    removed_ids: tuple[str, ...] = ()

    @property
    def chunks(self) -> int:
        """Chunks the documents have now."""
        return self.added + self.updated + self.unchanged


def require_vector_search(store: MemoryStore, caller: str) -> VectorSearchStore:
    """The store as a vector-search store, or a refusal naming it and the fix."""
    capabilities = getattr(store, "capabilities", None)
    if not isinstance(store, VectorSearchStore) or capabilities is None \
            or not capabilities.vector_search:
        name = getattr(store, "name", repr(store))
        raise ConfigurationError(
            f"{caller} needs a store with vector search, but {name} declares "
            "capabilities.vector_search=False; use InMemoryStore() or SQLiteStore(path)")
    return store


async def index_documents(
    store: MemoryStore,
    identity: MemoryIdentity,
    documents: Iterable[Document],
    *,
    embedder: Embedder,
    splitter: Splitter | None = None,
    batch_size: int = 64,
    prune: bool = False,
) -> IndexReport:
    """Split, embed and store ``documents`` into ``identity``'s namespace (see module docstring).

    ``prune=True`` also deletes the chunks of every document in the namespace that is not in
    ``documents`` — pass it only when ``documents`` is the whole corpus of that namespace.
    """
    vectors = require_vector_search(store, "index_documents")
    docs = _checked_documents(documents)
    _check_embedder(embedder)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigurationError(f"index_documents(batch_size={batch_size!r}) must be an int >= 1")
    split = _splitter(splitter)
    fingerprint = f"{embedder.id}@{embedder.dimensions}"
    pending: list[tuple[Chunk, list[float] | None, MemoryEntry | None]] = []
    stale: list[str] = []
    added = updated = unchanged = 0
    for document in docs:
        chunks = _checked_chunks(split, document)
        old = await _stored_chunks(vectors, identity, document.uri, len(chunks))
        reuse = {str((e.metadata or {}).get("content_hash")): e.embedding
                 for e in old.values() if _same_space(e, embedder)}
        for chunk in chunks:
            stored = old.get(chunk.index)
            if stored is not None and _unchanged(stored, chunk, embedder):
                unchanged += 1
                continue
            if stored is None:
                added += 1
            else:
                updated += 1
            pending.append((chunk, reuse.get(chunk.content_hash), stored))
        stale.extend(old[i].id for i in sorted(old, reverse=True) if i >= len(chunks))
    embedded = await _fill_vectors(pending, embedder, batch_size)
    now = now_ms()
    entries = [_entry(chunk, vector, stored, embedder, fingerprint, now)
               for (chunk, _, stored), vector in zip(pending, embedded.vectors, strict=True)]
    for start in range(0, len(entries), batch_size):
        await vectors.put_many(identity, entries[start:start + batch_size])
    if prune:
        stale.extend(await _orphans(vectors, identity, {d.uri for d in docs}))
    for entry_id in stale:
        await vectors.delete(identity, entry_id)
    return IndexReport(added=added, updated=updated, unchanged=unchanged, removed=len(stale),
                       embedded=embedded.count, embedder=fingerprint,
                       written_ids=tuple(e.id for e in entries), removed_ids=tuple(stale))


def _checked_documents(documents: Iterable[Document]) -> list[Document]:
    if isinstance(documents, Document):
        raise ConfigurationError(
            "index_documents takes a list of documents, got a single Document; wrap it: "
            "[document]")
    if isinstance(documents, str):
        raise ConfigurationError(
            f"index_documents takes Document objects, got the string {documents!r}; load a "
            "folder with load_folder(path) or a file with load_file(path)")
    docs = list(documents)
    seen: set[str] = set()
    for document in docs:
        if not isinstance(document, Document):
            raise ConfigurationError(
                f"index_documents takes Document objects (see load_folder), got {document!r}")
        if document.uri in seen:
            raise ConfigurationError(
                f"two documents share uri {document.uri!r}; chunk ids are '<uri>#<index>', so "
                "every document needs its own uri")
        seen.add(document.uri)
    return docs


def _check_embedder(embedder: Any) -> None:
    if not isinstance(getattr(embedder, "id", None), str) or not callable(
            getattr(embedder, "embed", None)):
        raise ConfigurationError(
            f"embedder={embedder!r} is not an embedder (it needs .id, .dimensions and async "
            ".embed(texts)); use mock_embedder() or minilm_embedder()")
    dims = getattr(embedder, "dimensions", None)
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ConfigurationError(
            f"embedder {embedder.id!r} declares dimensions={dims!r}; it must be an int >= 1")


def _splitter(splitter: Splitter | None) -> Callable[[Document], Sequence[Chunk]]:
    if splitter is None:
        return HeadingSplitter().split
    if isinstance(splitter, HeadingSplitter):
        return splitter.split
    if not callable(splitter):
        raise ConfigurationError(
            f"splitter={splitter!r} must be a HeadingSplitter or a function "
            "(document) -> chunks")
    return splitter


def _checked_chunks(split: Callable[[Document], Sequence[Chunk]],
                    document: Document) -> list[Chunk]:
    """The splitter's chunks, refused if any lies about where it came from."""
    chunks = list(split(document))
    name = getattr(split, "__qualname__", repr(split))
    for position, chunk in enumerate(chunks):
        problem = None
        if not isinstance(chunk, Chunk):
            problem = f"returned {chunk!r}, not a Chunk"
        elif chunk.uri != document.uri or chunk.index != position \
                or chunk.id != f"{document.uri}#{position}":
            problem = (f"returned chunk {chunk.id!r} at position {position}; expected id "
                       f"{document.uri + '#' + str(position)!r}")
        elif document.text[chunk.start:chunk.end] != chunk.text:
            problem = (f"returned chunk {chunk.id!r} whose text is not "
                       f"document.text[{chunk.start}:{chunk.end}]")
        if problem is not None:
            raise ConfigurationError(
                f"splitter {name} {problem} for document {document.uri!r}; chunks must be "
                "slices of the document numbered from 0")
    return chunks


async def _stored_chunks(store: VectorSearchStore, identity: MemoryIdentity, uri: str,
                         count: int) -> dict[int, MemoryEntry]:
    """The document's stored chunks by index: ids 0..count-1, then on until the first gap."""
    found = await asyncio.gather(*(store.get(identity, f"{uri}#{i}") for i in range(count)))
    out = {i: entry for i, entry in enumerate(found) if entry is not None}
    index = count
    while (entry := await store.get(identity, f"{uri}#{index}")) is not None:
        out[index] = entry
        index += 1
    return out


def _same_space(entry: MemoryEntry, embedder: Embedder) -> bool:
    return (entry.embedding is not None and entry.embedding_model == embedder.id
            and len(entry.embedding) == embedder.dimensions)


def _unchanged(entry: MemoryEntry, chunk: Chunk, embedder: Embedder) -> bool:
    metadata = entry.metadata or {}
    return (_same_space(entry, embedder) and metadata.get("kind") == CHUNK_KIND
            and metadata.get("content_hash") == chunk.content_hash
            and entry.value == chunk.model_dump(mode="json"))


@dataclass(frozen=True, slots=True)
class _Embedded:
    vectors: list[list[float]]
    count: int


async def _fill_vectors(pending: list[tuple[Chunk, list[float] | None, MemoryEntry | None]],
                        embedder: Embedder, batch_size: int) -> _Embedded:
    """A vector for every pending chunk: reused where the text is known, else embedded."""
    missing = [i for i, (_, vector, _) in enumerate(pending) if vector is None]
    vectors: list[list[float] | None] = [vector for _, vector, _ in pending]
    for start in range(0, len(missing), batch_size):
        batch = missing[start:start + batch_size]
        made = await embedder.embed([pending[i][0].text for i in batch])
        if len(made) != len(batch):
            raise ConfigurationError(
                f"embedder {embedder.id!r} returned {len(made)} vectors for {len(batch)} texts; "
                "an embedder must return one vector per text")
        for i, vector in zip(batch, made, strict=True):
            values = [float(x) for x in vector]
            if len(values) != embedder.dimensions or not all(map(math.isfinite, values)):
                raise ConfigurationError(
                    f"embedder {embedder.id!r} returned a vector of length {len(values)} (or "
                    f"with non-finite values) for chunk {pending[i][0].id!r}; it declares "
                    f"dimensions={embedder.dimensions}")
            vectors[i] = values
    return _Embedded([v if v is not None else [] for v in vectors], len(missing))


def _entry(chunk: Chunk, vector: list[float], stored: MemoryEntry | None, embedder: Embedder,
           fingerprint: str, now: int) -> MemoryEntry:
    """The chunk's entry; a rewrite keeps the first write's time and bumps the version."""
    return MemoryEntry(
        id=chunk.id, value=chunk.model_dump(mode="json"),
        version=1 if stored is None else stored.version + 1,
        created_at=now if stored is None else stored.created_at, updated_at=now,
        embedding=vector, embedding_model=embedder.id,
        metadata={"kind": CHUNK_KIND, "uri": chunk.uri, "content_hash": chunk.content_hash,
                  "embedder": fingerprint})


async def _orphans(store: VectorSearchStore, identity: MemoryIdentity,
                   keep: set[str]) -> list[str]:
    """Chunk ids of documents in the namespace that are not in ``keep``."""
    out: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.list(identity, cursor=cursor, limit=1000)
        for entry in page.entries:
            metadata = entry.metadata or {}
            if metadata.get("kind") == CHUNK_KIND and metadata.get("uri") not in keep:
                out.append(entry.id)
        if page.cursor is None:
            return sorted(out, key=_descending_index)
        cursor = page.cursor


def _descending_index(entry_id: str) -> tuple[str, int]:
    uri, _, index = entry_id.rpartition("#")
    return uri, -int(index) if index.isdigit() else 0
