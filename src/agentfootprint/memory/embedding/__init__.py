"""Embedders: texts in, one fixed-length vector per text out (see ``base.Embedder``).

* ``mock_embedder()``: deterministic hashing bag-of-words; offline, no dependencies (the default).
* ``minilm_embedder()``: the real all-MiniLM-L6-v2, offline, in NumPy (``[embed]`` extra).
* ``openai_embedder()``: the OpenAI embeddings API or a compatible server (``[openai]`` extra).

Optional packages are imported only when the embedder that needs them is made.
"""

from ..._lazy import moved_names as _moved_names
from ._base import Embedder
from ._minilm import minilm_embedder
from ._mock import mock_embedder
from ._openai import openai_embedder

__all__ = ["Embedder", "minilm_embedder", "mock_embedder", "openai_embedder"]

__getattr__ = _moved_names(__name__, {
    **dict.fromkeys(("checked_texts", "embedder_fingerprint"),
                    "agentfootprint.memory.embedding._base"),
    "MiniLMEmbedder": "agentfootprint.memory.embedding._minilm",
    **dict.fromkeys(("MockEmbedder", "hash_bag_of_words"), "agentfootprint.memory.embedding._mock"),
    "OpenAIEmbedder": "agentfootprint.memory.embedding._openai",
})
