"""RAG: load a corpus, split it into citable chunks, index it incrementally, retrieve from it.

    documents = load_folder("docs")                         # Document(uri, text, metadata)
    await index_documents(store, corpus, documents, embedder=embedder)   # IndexReport
    rag = define_rag(id="docs", store=store, identity=corpus, embedder=embedder)
    agent = Agent(..., memory=[rag], identity=conversation)

Every chunk is a slice of its document (``text[start:end] == chunk.text``) with the id
``<uri>#<index>``; every retrieval records its hits and near misses with scores; the chunks
that reach the model are a tracked injection, so an explanation can name the chunk.
"""

from .chunking import DEFAULT_MAX_CHARS, Chunk, HeadingSplitter, split_document, split_documents
from .define import RAG_HEADER, define_rag, render_sources
from .index import CHUNK_KIND, IndexReport, Splitter, index_documents, require_vector_search
from .loaders import (
    DEFAULT_MAX_BYTES,
    MARKDOWN_SUFFIXES,
    TEXT_SUFFIXES,
    Document,
    DocumentLoadError,
    load_documents,
    load_file,
    load_folder,
)
from .retrieve import DEFAULT_THRESHOLD, DropReason, Retrieval, RetrievedChunk, retrieve

__all__ = [
    "CHUNK_KIND",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_THRESHOLD",
    "MARKDOWN_SUFFIXES",
    "RAG_HEADER",
    "TEXT_SUFFIXES",
    "Chunk",
    "Document",
    "DocumentLoadError",
    "DropReason",
    "HeadingSplitter",
    "IndexReport",
    "Retrieval",
    "RetrievedChunk",
    "Splitter",
    "define_rag",
    "index_documents",
    "load_documents",
    "load_file",
    "load_folder",
    "render_sources",
    "require_vector_search",
    "retrieve",
    "split_document",
    "split_documents",
]
