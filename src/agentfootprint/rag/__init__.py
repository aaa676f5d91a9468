"""RAG: load a corpus, split it into citable chunks, index it incrementally, retrieve from it.

    documents = load_folder("docs")                         # Document(uri, text, metadata)
    await index_documents(store, corpus, documents, embedder=embedder)   # IndexReport
    rag = define_rag(id="docs", store=store, identity=corpus, embedder=embedder)
    agent = Agent(..., memory=[rag], identity=conversation)

Every chunk is a slice of its document (``text[start:end] == chunk.text``) with the id
``<uri>#<index>``; every retrieval records its hits and near misses with scores; the chunks
that reach the model are a tracked injection, so an explanation can name the chunk.
"""

from .._lazy import moved_names as _moved_names
from ._chunking import Chunk, HeadingSplitter
from ._define import define_rag
from ._index import IndexReport, index_documents
from ._loaders import Document, DocumentLoadError, load_documents, load_file, load_folder
from ._retrieve import Retrieval, retrieve

__all__ = [
    "Chunk",
    "Document",
    "DocumentLoadError",
    "HeadingSplitter",
    "IndexReport",
    "Retrieval",
    "define_rag",
    "index_documents",
    "load_documents",
    "load_file",
    "load_folder",
    "retrieve",
]

__getattr__ = _moved_names(__name__, {
    **dict.fromkeys(("DEFAULT_MAX_CHARS", "split_document", "split_documents"),
                    "agentfootprint.rag._chunking"),
    **dict.fromkeys(("RAG_HEADER", "render_sources"), "agentfootprint.rag._define"),
    **dict.fromkeys(("CHUNK_KIND", "Splitter", "require_vector_search"),
                    "agentfootprint.rag._index"),
    **dict.fromkeys(("DEFAULT_MAX_BYTES", "MARKDOWN_SUFFIXES", "TEXT_SUFFIXES"),
                    "agentfootprint.rag._loaders"),
    **dict.fromkeys(("DEFAULT_THRESHOLD", "DropReason", "RetrievedChunk"),
                    "agentfootprint.rag._retrieve"),
})
