"""RAG, offline: load a folder, index it incrementally, answer from it, and name the chunk.

A support agent answers from a small markdown knowledge base. The corpus is split by heading,
embedded with the deterministic mock embedder and stored in a SQLite file; re-indexing after an
edit re-embeds only what changed. The answer's backtrack ends at the chunk that was retrieved,
and the record keeps the chunks that only just missed the threshold.

Run: python examples/rag_agent.py
"""

import asyncio
import re
import tempfile
from pathlib import Path

from agentfootprint import Agent
from agentfootprint.context import context_report
from agentfootprint.explain import backtrack
from agentfootprint.memory import MemoryIdentity, SQLiteStore
from agentfootprint.memory.embedding import mock_embedder
from agentfootprint.providers import mock
from agentfootprint.rag import (
    HeadingSplitter,
    IndexReport,
    define_rag,
    index_documents,
    load_folder,
)

KNOWLEDGE_BASE = {
    "account.md": (
        "# Account\n\n"
        "## Reset your password\n\n"
        "To reset your password, open Settings, choose Security and press Reset password. "
        "A reset link is emailed to you and expires after one hour.\n\n"
        "## Delete your account\n\n"
        "Write to support from the email address of the account. Deletion is final after "
        "thirty days.\n"
    ),
    "billing.md": (
        "# Billing\n\n"
        "## Refunds\n\n"
        "Refunds are issued within fourteen days of purchase for unused licences.\n"
    ),
}


def cite_first_source(request: object) -> str:
    """A stand-in model that answers from the first source it was given, citing it."""
    system = getattr(request, "system", None) or ""
    found = re.search(r'<source id="([^"]+)"[^>]*>\n(.*?)\n</source>', system, re.S)
    if found is None:
        return "I could not find that in the documentation."
    first_sentence = found.group(2).split("\n")[-1].split(". ")[0]
    return f"{first_sentence}. [{found.group(1)}]"


async def main() -> None:
    embedder = mock_embedder()
    corpus = MemoryIdentity("kb")
    splitter = HeadingSplitter(max_chars=400, min_chars=60)  # small docs: a chunk per section
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp, "kb")
        folder.mkdir()
        for name, text in KNOWLEDGE_BASE.items():
            (folder / name).write_text(text, encoding="utf-8")
        with SQLiteStore(Path(tmp, "kb.db")) as store:

            async def reindex() -> IndexReport:
                return await index_documents(store, corpus, load_folder(folder),
                                             embedder=embedder, splitter=splitter)

            first = await reindex()
            print(f"indexed: added {first.added}, embedded {first.embedded}")
            again = await reindex()
            print(f"re-indexed: unchanged {again.unchanged}, embedded {again.embedded}")
            billing = KNOWLEDGE_BASE["billing.md"].replace("fourteen", "thirty")
            (folder / "billing.md").write_text(billing, encoding="utf-8")
            edited = await reindex()
            print(f"after an edit: updated {edited.updated}, unchanged {edited.unchanged}, "
                  f"embedded {edited.embedded}")

            docs = define_rag(id="kb", store=store, identity=corpus, embedder=embedder,
                              k=2, threshold=0.4)
            agent = Agent(provider=mock(respond=cite_first_source), model="mock",
                          system="You are a support agent. Answer from the sources.",
                          memory=[docs], identity=MemoryIdentity("ticket-81"))
            result = await agent.run("How do I reset the password of my account?")

    print()
    print(result.content)
    print()
    state = result.recording.state
    scores = {p["entry_ids"][0]: p for p in state["memory_recall_kb"]["pieces"]}
    for row in context_report(result.recording)[-1]["injections"]:
        if row["who"]["fired"]:
            piece = scores[row["id"].removeprefix("memory:kb#")]
            print(f"injected {row['id']} (rank {piece['rank']}, score {piece['score']:.2f})")
            print(f"  why: {row['who']['reason']}")
    for miss in state["memory_retrieved_kb"]["near_misses"]:
        print(f"near miss {miss['id']}: score {miss['score']:.2f} ({miss['reason']})")
    print()
    print(backtrack(result, suspect="memory:kb#account.md#0"))


if __name__ == "__main__":
    asyncio.run(main())
