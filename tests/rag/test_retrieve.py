"""Retrieval: hits above the threshold, near misses recorded with scores and reasons."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from rag_helpers import CORPUS, CountingEmbedder, NoSearchStore

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import InMemoryStore, MemoryEntry, MemoryIdentity
from agentfootprint.memory._errors import UnreadableEntryError
from agentfootprint.rag import Document, index_documents, retrieve
from agentfootprint.rag._index import CHUNK_KIND

DOCS = [
    Document(uri="fruit.md", text="apples bananas cherries"),
    Document(uri="mixed.md", text="apples dates eggs figs"),
    Document(uri="far.md", text="granite basalt marble slate"),
    Document(uri="near.md", text="apples bananas grapes"),
]
QUERY = "apples bananas cherries"


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


async def indexed(store: Any) -> CountingEmbedder:
    embedder = CountingEmbedder()
    await index_documents(store, CORPUS, DOCS, embedder=embedder)
    return embedder


async def expected_scores(embedder: CountingEmbedder) -> dict[str, float]:
    vectors = await embedder.inner.embed([QUERY, *(d.text for d in DOCS)])
    return {f"{d.uri}#0": cosine(vectors[0], v) for d, v in zip(DOCS, vectors[1:], strict=True)}


async def test_hits_clear_the_threshold_and_near_misses_keep_their_scores(store: Any) -> None:
    """Above the floor: admitted, best first. Below it: kept, with score, rank and reason."""
    embedder = await indexed(store)
    scores = await expected_scores(embedder)
    found = await retrieve(store, CORPUS, QUERY, embedder=embedder, k=3, threshold=0.5)
    assert [c.chunk.id for c in found.candidates] == sorted(
        scores, key=lambda cid: (-scores[cid], cid))
    for candidate in found.candidates:
        assert candidate.score == pytest.approx(scores[candidate.chunk.id], abs=1e-5)
    assert all(hit.score >= 0.5 and hit.reason is None for hit in found.hits)
    assert [h.chunk.id for h in found.hits] == ["fruit.md#0", "near.md#0"]
    assert [(m.chunk.id, m.reason) for m in found.near_misses] == [
        ("mixed.md#0", "below-threshold"), ("far.md#0", "below-threshold")]
    assert [c.rank for c in found.candidates] == [1, 2, 3, 4]
    assert found.complete and found.hits[0].chunk.text == "apples bananas cherries"


async def test_k_bounds_the_hits_and_the_rest_are_over_k(store: Any) -> None:
    """Strong candidates beyond k are near misses too, with the reason ``over-k``."""
    embedder = await indexed(store)
    found = await retrieve(store, CORPUS, QUERY, embedder=embedder, k=1, threshold=0.5)
    assert [h.chunk.id for h in found.hits] == ["fruit.md#0"]
    assert found.near_misses[0].chunk.id == "near.md#0"
    assert found.near_misses[0].reason == "over-k"


async def test_without_a_threshold_the_best_k_are_admitted(store: Any) -> None:
    """``threshold=None`` means no floor at all."""
    embedder = await indexed(store)
    found = await retrieve(store, CORPUS, QUERY, embedder=embedder, k=3, threshold=None)
    assert len(found.hits) == 3 and found.near_misses[0].reason == "over-k"


async def test_nothing_above_the_threshold_means_no_hits_but_a_full_record(store: Any) -> None:
    """The default floor (0.7) can drop everything; the record still says what was close."""
    embedder = await indexed(store)
    found = await retrieve(store, CORPUS, "apples granite", embedder=embedder)
    assert found.hits == () and found.threshold == 0.7
    assert {m.reason for m in found.near_misses} == {"below-threshold"}
    assert found.record()["near_misses"][0]["score"] > 0


async def test_the_char_budget_is_spent_in_rank_order(store: Any) -> None:
    """The first hit that does not fit closes the budget; nothing smaller jumps the queue."""
    embedder = await indexed(store)
    found = await retrieve(store, CORPUS, QUERY, embedder=embedder, k=3, threshold=None,
                           max_chars=len("apples bananas cherries") + 5)
    assert [h.chunk.id for h in found.hits] == ["fruit.md#0"]
    assert [c.reason for c in found.candidates[1:3]] == ["over-char-budget"] * 2


async def test_excluded_chunks_are_left_out_and_say_so(store: Any) -> None:
    """A re-run without a suspect chunk records it as excluded, and the next one moves up."""
    embedder = await indexed(store)
    found = await retrieve(store, CORPUS, QUERY, embedder=embedder, k=1, threshold=0.5,
                           exclude=["fruit.md#0"])
    assert [h.chunk.id for h in found.hits] == ["near.md#0"]
    assert found.candidates[0].reason == "excluded"


async def test_an_empty_query_embeds_and_searches_nothing(store: Any) -> None:
    """Whitespace is not a question."""
    embedder = await indexed(store)
    embedder.texts.clear()
    found = await retrieve(store, CORPUS, "  \n", embedder=embedder)
    assert found.candidates == () and embedder.texts == []


async def test_the_record_is_json_and_never_holds_the_query(store: Any) -> None:
    """What a recording keeps: ids, scores, reasons, a hash of the query — not its text."""
    embedder = await indexed(store)
    found = await retrieve(store, CORPUS, "apples bananas secret", embedder=embedder,
                           threshold=0.5)
    record = found.record()
    text = json.dumps(record)
    assert "secret" not in text
    assert record["admitted"] == [h.chunk.id for h in found.hits]
    assert record["namespace"] == CORPUS.namespace and record["considered"] == 4
    assert record["candidates"][0].keys() >= {"id", "uri", "score", "rank", "admitted", "reason"}


async def test_another_identity_sees_another_corpus(store: Any) -> None:
    """Retrieval reads only the namespace it is given."""
    embedder = await indexed(store)
    found = await retrieve(store, MemoryIdentity("elsewhere"), QUERY, embedder=embedder)
    assert found.candidates == () and found.complete


async def test_entries_that_are_not_chunks_are_skipped_and_counted(store: Any) -> None:
    """A namespace shared with other vectors still retrieves only chunks."""
    embedder = await indexed(store)
    (vector,) = await embedder.inner.embed([QUERY])
    await store.put(CORPUS, MemoryEntry(id="note", value={"content": QUERY}, embedding=vector,
                                        embedding_model=embedder.id))
    found = await retrieve(store, CORPUS, QUERY, embedder=embedder, threshold=0.5)
    assert found.foreign == 1 and "note" not in [c.chunk.id for c in found.candidates]


async def test_a_corrupt_chunk_entry_is_an_unreadable_entry(store: Any) -> None:
    """An entry marked as a chunk that is not one fails loudly, naming the entry."""
    embedder = await indexed(store)
    (vector,) = await embedder.inner.embed([QUERY])
    await store.put(CORPUS, MemoryEntry(id="bad#0", value={"text": 1}, embedding=vector,
                                        embedding_model=embedder.id,
                                        metadata={"kind": CHUNK_KIND}))
    with pytest.raises(UnreadableEntryError, match="'bad#0'") as caught:
        await retrieve(store, CORPUS, QUERY, embedder=embedder)
    assert caught.value.entry_id == "bad#0"


async def test_refusals_name_the_store_and_the_option() -> None:
    """No vector search, or options that cannot work, are configuration errors."""
    embedder = CountingEmbedder()
    with pytest.raises(ConfigurationError, match="NoSearchStore"):
        await retrieve(NoSearchStore(), CORPUS, QUERY, embedder=embedder)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"k": 0}, "k="), ({"threshold": 2.0}, "threshold"), ({"threshold": math.nan}, "threshold"),
        ({"window": -1}, "window"), ({"max_chars": 0}, "max_chars")]
    for options, word in cases:
        with pytest.raises(ConfigurationError, match=word):
            await retrieve(InMemoryStore(), CORPUS, QUERY, embedder=embedder, **options)
