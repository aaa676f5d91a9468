"""Incremental indexing: counts per run, only new text embedded, stale chunks removed."""

from __future__ import annotations

from typing import Any

import pytest
from rag_helpers import CORPUS, CountingEmbedder, NoSearchStore

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import MemoryIdentity
from agentfootprint.rag import Chunk, Document, HeadingSplitter, index_documents
from agentfootprint.rag._chunking import split_document
from agentfootprint.rag._index import CHUNK_KIND

SPLITTER = HeadingSplitter(max_chars=120, min_chars=0)


def section(title: str, words: str) -> str:
    return f"## {title}\n\n{words} " * 1


GUIDE = "\n\n".join([
    section("Install", "Install the package with pip and check the version it prints."),
    section("Configure", "Write a config file in your home folder with the api key."),
    section("Run", "Start the service and open the dashboard in a browser window."),
])
FAQ = "\n\n".join([
    section("Refunds", "Refunds are issued within fourteen days for unused licences."),
    section("Shipping", "Orders ship from Lisbon every Monday morning by courier."),
])


def corpus(guide: str = GUIDE, faq: str = FAQ) -> list[Document]:
    return [Document(uri="guide.md", text=guide), Document(uri="faq.md", text=faq)]


async def ids_in(store: Any, identity: MemoryIdentity = CORPUS) -> list[str]:
    page = await store.list(identity, limit=1000)
    return sorted(entry.id for entry in page.entries)


async def test_first_run_embeds_and_stores_every_chunk(store: Any) -> None:
    """Each chunk becomes an entry: chunk JSON, vector, embedder id, content hash."""
    embedder = CountingEmbedder()
    report = await index_documents(store, CORPUS, corpus(), embedder=embedder,
                                   splitter=SPLITTER)
    assert (report.added, report.updated, report.unchanged, report.removed) == (5, 0, 0, 0)
    assert report.embedded == len(embedder.texts) == report.chunks == 5
    assert report.embedder == f"{embedder.id}@256"
    assert await ids_in(store) == ["faq.md#0", "faq.md#1", "guide.md#0", "guide.md#1",
                                   "guide.md#2"]
    entry = await store.get(CORPUS, "guide.md#1")
    chunk = Chunk.model_validate(entry.value)
    assert chunk.heading_path == ("Configure",) and chunk.text.startswith("## Configure")
    assert GUIDE[chunk.start:chunk.end] == chunk.text
    assert entry.embedding_model == embedder.id and len(entry.embedding) == 256
    assert entry.metadata == {"kind": CHUNK_KIND, "uri": "guide.md",
                              "content_hash": chunk.content_hash,
                              "embedder": f"{embedder.id}@256"}


async def test_re_indexing_unchanged_documents_touches_nothing(store: Any) -> None:
    """The second run of the same corpus embeds nothing and writes nothing."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    before = {e.id: e for e in (await store.list(CORPUS, limit=1000)).entries}
    embedder = CountingEmbedder()
    report = await index_documents(store, CORPUS, corpus(), embedder=embedder,
                                   splitter=SPLITTER)
    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 0, 5, 0)
    assert embedder.texts == [] and report.written_ids == ()
    after = {e.id: e for e in (await store.list(CORPUS, limit=1000)).entries}
    assert {k: (v.version, v.updated_at) for k, v in after.items()} == {
        k: (v.version, v.updated_at) for k, v in before.items()}


async def test_an_edited_section_is_the_only_text_re_embedded(store: Any) -> None:
    """Changing one section in place re-embeds one chunk; the rest are unchanged."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    edited = GUIDE.replace("api key", "API key")
    embedder = CountingEmbedder()
    report = await index_documents(store, CORPUS, corpus(guide=edited), embedder=embedder,
                                   splitter=SPLITTER)
    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 1, 4, 0)
    assert report.written_ids == ("guide.md#1",)
    assert len(embedder.texts) == 1 and "API key" in embedder.texts[0]
    entry = await store.get(CORPUS, "guide.md#1")
    assert "API key" in entry.value["text"] and entry.version == 2


async def test_a_longer_edit_rewrites_the_shifted_chunks_without_re_embedding(
        store: Any) -> None:
    """Text after a longer edit moved: its offsets are rewritten, its vector reused."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    embedder = CountingEmbedder()
    report = await index_documents(store, CORPUS, corpus(GUIDE.replace("api key", "API token")),
                                   embedder=embedder, splitter=SPLITTER)
    assert (report.updated, report.unchanged, report.embedded) == (2, 3, 1)
    moved = Chunk.model_validate((await store.get(CORPUS, "guide.md#2")).value)
    assert GUIDE.replace("api key", "API token")[moved.start:moved.end] == moved.text


async def test_a_shrunk_document_loses_its_stale_chunks(store: Any) -> None:
    """Chunks beyond a document's new end are deleted; other documents are untouched."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    shorter = GUIDE.split("\n\n## Configure")[0]
    report = await index_documents(store, CORPUS, [Document(uri="guide.md", text=shorter)],
                                   embedder=CountingEmbedder(), splitter=SPLITTER)
    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 0, 1, 2)
    assert report.removed_ids == ("guide.md#2", "guide.md#1")
    assert await ids_in(store) == ["faq.md#0", "faq.md#1", "guide.md#0"]


async def test_moved_text_reuses_its_vector_instead_of_re_embedding(store: Any) -> None:
    """A section inserted on top shifts every index, but only the new section is embedded."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    old = await store.get(CORPUS, "guide.md#0")
    grown = section("Overview", "What this tool does and who it is for, in short.") + "\n\n" + GUIDE
    embedder = CountingEmbedder()
    report = await index_documents(store, CORPUS, corpus(guide=grown), embedder=embedder,
                                   splitter=SPLITTER)
    assert (report.added, report.updated, report.unchanged) == (1, 3, 2)
    assert report.embedded == 1 and "Overview" in embedder.texts[0]
    moved = await store.get(CORPUS, "guide.md#1")
    assert moved.value["text"] == old.value["text"] and moved.embedding == old.embedding
    assert moved.value["start"] > old.value["start"]


async def test_another_embedder_re_embeds_everything(store: Any) -> None:
    """Vectors of a different model are never kept: every chunk is rewritten and re-embedded."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    other = CountingEmbedder(id="other-model")
    report = await index_documents(store, CORPUS, corpus(), embedder=other, splitter=SPLITTER)
    assert (report.updated, report.unchanged, report.embedded) == (5, 0, 5)
    assert (await store.get(CORPUS, "faq.md#0")).embedding_model == "other-model"


async def test_prune_removes_documents_no_longer_in_the_corpus(store: Any) -> None:
    """Without prune a missing document stays (it may belong to another folder); with it, goes."""
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    faq_only = [Document(uri="faq.md", text=FAQ)]
    kept = await index_documents(store, CORPUS, faq_only, embedder=CountingEmbedder(),
                                 splitter=SPLITTER)
    assert kept.removed == 0 and len(await ids_in(store)) == 5
    pruned = await index_documents(store, CORPUS, faq_only, embedder=CountingEmbedder(),
                                   splitter=SPLITTER, prune=True)
    assert pruned.removed_ids == ("guide.md#2", "guide.md#1", "guide.md#0")
    assert await ids_in(store) == ["faq.md#0", "faq.md#1"]


async def test_an_emptied_document_is_removed_and_namespaces_stay_apart(store: Any) -> None:
    """An empty document has no chunks left; another identity's corpus is never touched."""
    other = MemoryIdentity("other-corpus")
    await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    await index_documents(store, other, corpus(), embedder=CountingEmbedder(),
                          splitter=SPLITTER)
    report = await index_documents(store, CORPUS, [Document(uri="faq.md", text="  \n")],
                                   embedder=CountingEmbedder(), splitter=SPLITTER)
    assert report.removed == 2 and report.chunks == 0
    assert len(await ids_in(store, other)) == 5


async def test_a_store_without_vector_search_is_refused_by_name() -> None:
    """Nothing is split or embedded for a store that cannot search."""
    embedder = CountingEmbedder()
    with pytest.raises(ConfigurationError, match=r"NoSearchStore\(\).*vector_search=False"):
        await index_documents(NoSearchStore(), CORPUS, corpus(), embedder=embedder)
    assert embedder.texts == []


async def test_a_lying_splitter_is_refused_by_name(store: Any) -> None:
    """Chunks must be slices of their document, numbered from 0."""

    def shifted(document: Document) -> list[Chunk]:
        return [c.model_copy(update={"start": c.start + 1})
                for c in split_document(document, max_chars=500)]

    with pytest.raises(ConfigurationError, match=r"splitter .*shifted.*not document\.text"):
        await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                              splitter=shifted)

    def renumbered(document: Document) -> list[Chunk]:
        return [c.model_copy(update={"index": c.index + 1})
                for c in split_document(document, max_chars=500)]

    with pytest.raises(ConfigurationError, match=r"expected id 'guide\.md#0'"):
        await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                              splitter=renumbered)


async def test_bad_input_is_refused_before_any_work(store: Any) -> None:
    """Duplicate uris, a bare document, a non-embedder and a bad batch size are named."""
    twice = [Document(uri="a", text="x"), Document(uri="a", text="y")]
    with pytest.raises(ConfigurationError, match="two documents share uri 'a'"):
        await index_documents(store, CORPUS, twice, embedder=CountingEmbedder())
    with pytest.raises(ConfigurationError, match="single Document"):
        await index_documents(store, CORPUS, Document(uri="a", text="x"),  # type: ignore[arg-type]
                              embedder=CountingEmbedder())
    with pytest.raises(ConfigurationError, match="got the string 'docs'; load a folder"):
        await index_documents(store, CORPUS, "docs",  # type: ignore[arg-type]
                              embedder=CountingEmbedder())
    with pytest.raises(ConfigurationError, match="is not an embedder"):
        await index_documents(store, CORPUS, corpus(), embedder=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="batch_size"):
        await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                              batch_size=0)


async def test_an_embedder_returning_the_wrong_shape_is_refused(store: Any) -> None:
    """One vector per text, of the declared length — or a clear error naming the embedder."""

    class Short(CountingEmbedder):
        async def embed(self, texts: Any) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

    with pytest.raises(ConfigurationError, match=r"returned a vector of length 2.*dimensions=256"):
        await index_documents(store, CORPUS, corpus(), embedder=Short())
    assert await ids_in(store) == []


async def test_small_batches_index_the_same_corpus(store: Any) -> None:
    """Batching changes how many calls are made, not what is stored."""
    report = await index_documents(store, CORPUS, corpus(), embedder=CountingEmbedder(),
                                   splitter=SPLITTER, batch_size=2)
    assert report.added == 5 and len(await ids_in(store)) == 5
