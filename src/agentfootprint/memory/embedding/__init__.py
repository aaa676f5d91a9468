"""Embedders: texts in, one fixed-length vector per text out (see ``base.Embedder``).

* ``mock_embedder()``: deterministic hashing bag-of-words; offline, no dependencies (the default).
* ``minilm_embedder()``: the real all-MiniLM-L6-v2, offline, in NumPy (``[embed]`` extra).
* ``openai_embedder()``: the OpenAI embeddings API or a compatible server (``[openai]`` extra).

Optional packages are imported only when the embedder that needs them is made.
"""

from .base import Embedder, checked_texts, embedder_fingerprint
from .minilm import MiniLMEmbedder, minilm_embedder
from .mock import MockEmbedder, hash_bag_of_words, mock_embedder
from .openai import OpenAIEmbedder, openai_embedder

__all__ = [
    "Embedder",
    "MiniLMEmbedder",
    "MockEmbedder",
    "OpenAIEmbedder",
    "checked_texts",
    "embedder_fingerprint",
    "hash_bag_of_words",
    "minilm_embedder",
    "mock_embedder",
    "openai_embedder",
]
