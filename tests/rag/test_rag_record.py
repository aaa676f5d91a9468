"""The RAG record in an agent run: scores on the rows, near misses as rows, BORN names the chunk."""

from __future__ import annotations

from typing import Any

from rag_helpers import CORPUS, CountingEmbedder

from agentfootprint import Agent
from agentfootprint.context._record import context_report
from agentfootprint.explain._backtrack import backtrack
from agentfootprint.explain._dropped import dropped_candidates
from agentfootprint.memory import InMemoryStore, MemoryIdentity
from agentfootprint.providers import mock
from agentfootprint.rag import Document, define_rag, index_documents

DOCS = [
    Document(uri="refunds.md", text="# Refunds\n\nRefunds are issued within fourteen days "
                                    "for unused licences."),
    Document(uri="shipping.md", text="# Shipping\n\nOrders ship from Lisbon every Monday."),
]


async def run(reply: str = "Refunds are issued within fourteen days.") -> Any:
    embedder = CountingEmbedder()
    store = InMemoryStore()
    await index_documents(store, CORPUS, DOCS, embedder=embedder)
    rag = define_rag(id="docs", store=store, identity=CORPUS, embedder=embedder, threshold=0.3)
    agent = Agent(provider=mock(reply=reply), model="m", memory=[rag],
                  identity=MemoryIdentity("conv"))
    return await agent.run("Within how many days are refunds issued?")


async def test_hit_rows_carry_flavor_score_and_rank() -> None:
    """The fired row is a rag row that says why: rank, score and the floor it cleared."""
    result = await run()
    [call] = context_report(result.recording)
    [hit] = [r for r in call["injections"] if r["who"]["fired"]]
    assert hit["id"] == "memory:docs#refunds.md#0" and hit["flavor"] == "rag"
    assert hit["who"]["reason"].startswith("retrieved 'refunds.md#0' (rank 1, score 0.")
    assert hit["who"]["reason"].endswith(">= 0.30)")


async def test_near_misses_are_rows_that_did_not_fire() -> None:
    """A dropped candidate is in the context report with its score: retrieved but dropped."""
    result = await run()
    [call] = context_report(result.recording)
    [miss] = [r for r in call["injections"] if r["id"] == "memory:docs#shipping.md#0"]
    assert miss["who"]["fired"] is False and miss["how"] == []
    assert miss["who"]["reason"].startswith("retrieved but dropped (below-threshold): rank 2")
    assert miss["who"]["reason"].endswith("< 0.30")


async def test_born_names_the_chunk_its_score_and_the_rag() -> None:
    """BORN ends the chain at the chunk, its document, the store and define_rag."""
    result = await run()
    born = backtrack(result, suspect="memory:docs#refunds.md#0").hops[-1]
    assert born.kind == "BORN"
    assert born.text.startswith("chunk 'refunds.md#0' of refunds.md in InMemoryStore (rank 1, "
                                "score 0.")
    assert born.text.endswith("retrieved by define_rag('docs')")
    assert born.runtime_stage_id is not None and "memory_read_docs" in born.runtime_stage_id


async def test_dropped_context_lists_each_near_miss_once_by_document() -> None:
    """The explain layer sees a near miss as one memory candidate, named by its document."""
    result = await run()
    listed = dropped_candidates(result)
    assert [c.id for c in listed] == ["memory:docs#shipping.md#0"]
    assert listed[0].detail.startswith("found by memory 'docs' (in shipping.md, score ")
    assert listed[0].detail.endswith("but below-threshold")
