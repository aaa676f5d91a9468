"""A BERT encoder forward pass in NumPy, for sentence-embedding models such as all-MiniLM-L6-v2.

Why NumPy: the model is small (6 layers, 384 wide), so plain matrix products run it at useful
speed on a CPU, and users get real embeddings without torch or sentence-transformers (gigabytes).
Inference only: no dropout, token type 0 throughout, absolute position embeddings.

Contract of ``BertEncoder.encode``: token ids in, one mean-pooled, L2-normalised float32 vector per
text out, matching sentence-transformers' Transformer → Pooling(mean) → Normalize modules.
This module imports NumPy at load; import it only once the ``embed`` extra is known present.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["BertEncoder"]

Array = npt.NDArray[np.float32]

_MASKED = np.float32(-1e9)
"""Added to attention scores of padding keys: exp() of it is exactly 0 in float32."""

# Abramowitz & Stegun 7.1.26: erf(x) to within 1.5e-7, below float32 resolution of GELU's output.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (
    1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))  # a5 … a1
_HALF = np.float32(0.5)
_ROOT_HALF = np.float32(1.0 / math.sqrt(2.0))
_FFN_ROWS = 64
"""Tokens per feed-forward block: keeps GELU's temporaries in cache (2x faster than whole)."""
_SCORE_FLOATS = 1 << 20
"""About how many attention scores to hold at once (4 MB), for the same reason."""


def _gelu(x: Array) -> Array:
    """The exact (erf) GELU BERT was trained with, not the tanh approximation."""
    z = np.abs(x)
    z *= _ROOT_HALF
    t = z * _ERF_P
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * _ERF_A[0]
    for coefficient in _ERF_A[1:]:
        poly += coefficient
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # now 1 - erf(|x| / sqrt(2))
    result: Array = np.where(x >= 0, 2.0 - poly, poly)
    result *= x
    result *= _HALF
    return result


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    result: Array = centred / np.sqrt(variance + np.float32(eps)) * weight + bias
    return result


@dataclass(frozen=True, slots=True)
class _Layer:
    """One encoder layer; linear weights stored input-major (``x @ w``), Q, K and V fused,
    with the 1/sqrt(head size) attention scale folded into Q's weights."""

    qkv_w: Array
    qkv_b: Array
    out_w: Array
    out_b: Array
    attn_norm_w: Array
    attn_norm_b: Array
    up_w: Array
    up_b: Array
    down_w: Array
    down_b: Array
    ffn_norm_w: Array
    ffn_norm_b: Array


class BertEncoder:
    """The encoder weights of one BERT checkpoint and the forward pass over them."""

    def __init__(self, weights: Mapping[str, Array], config: Mapping[str, object]) -> None:
        self.hidden = _int(config, "hidden_size")
        self.heads = _int(config, "num_attention_heads")
        eps = config.get("layer_norm_eps", 1e-12)
        if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 < eps < 1:
            raise ValueError(f"config.json has layer_norm_eps={eps!r}; expected a small float")
        self.eps = float(eps)
        if self.hidden % self.heads:
            raise ValueError(f"hidden_size {self.hidden} is not divisible by "
                             f"num_attention_heads {self.heads}")

        def get(name: str) -> Array:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def linear(name: str) -> Array:  # torch keeps (out, in); we multiply x @ w
            return np.ascontiguousarray(get(name).T)

        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type0 = get("embeddings.token_type_embeddings.weight")[0]
        self.emb_norm_w = get("embeddings.LayerNorm.weight")
        self.emb_norm_b = get("embeddings.LayerNorm.bias")
        self.layers: list[_Layer] = []
        scale = np.float32(1.0 / math.sqrt(self.hidden // self.heads))
        index = 0
        while f"encoder.layer.{index}.attention.self.query.weight" in weights:
            p = f"encoder.layer.{index}."
            s = p + "attention.self."
            self.layers.append(_Layer(
                qkv_w=np.concatenate([linear(s + "query.weight") * scale,
                                      linear(s + "key.weight"), linear(s + "value.weight")],
                                     axis=1),
                qkv_b=np.concatenate([get(s + "query.bias") * scale, get(s + "key.bias"),
                                      get(s + "value.bias")]),
                out_w=linear(p + "attention.output.dense.weight"),
                out_b=get(p + "attention.output.dense.bias"),
                attn_norm_w=get(p + "attention.output.LayerNorm.weight"),
                attn_norm_b=get(p + "attention.output.LayerNorm.bias"),
                up_w=linear(p + "intermediate.dense.weight"),
                up_b=get(p + "intermediate.dense.bias"),
                down_w=linear(p + "output.dense.weight"),
                down_b=get(p + "output.dense.bias"),
                ffn_norm_w=get(p + "output.LayerNorm.weight"),
                ffn_norm_b=get(p + "output.LayerNorm.bias"),
            ))
            index += 1
        if not self.layers:
            raise ValueError("the checkpoint has no encoder layers (encoder.layer.0.*)")
        if self.word.shape[1] != self.hidden:
            raise ValueError(f"word embeddings are {self.word.shape[1]} wide, but the config "
                             f"says hidden_size {self.hidden}")

    @classmethod
    def load(cls, model_dir: Path) -> BertEncoder:
        """Read ``config.json`` and ``model.safetensors`` from a model folder."""
        from safetensors.numpy import load_file

        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        return cls(load_file(str(model_dir / "model.safetensors")), config)

    @property
    def max_positions(self) -> int:
        return int(self.position.shape[0])

    def encode(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> Array:
        """Sentence vectors for a padded batch: ``ids`` and ``mask`` are (batch, length)."""
        batch, length = ids.shape
        if length > self.max_positions:
            raise ValueError(f"{length} tokens exceed the model's {self.max_positions} positions")
        rows = batch * length  # linear layers work on all tokens of the batch at once
        x: Array = (self.word[ids] + self.position[:length] + self.token_type0).reshape(rows, -1)
        x = _layer_norm(x, self.emb_norm_w, self.emb_norm_b, self.eps)
        keep = mask.astype(np.float32)
        # Padding keys get a huge negative score; a batch without padding needs no mask at all.
        bias: Array | None = None if keep.all() else ((1.0 - keep) * _MASKED)[:, None, None, :]
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(batch, length, 3, self.heads, -1)
            context = self._attention(qkv, bias).reshape(rows, self.hidden)
            x = _layer_norm(x + context @ layer.out_w + layer.out_b,
                            layer.attn_norm_w, layer.attn_norm_b, self.eps)
            ffn: Array = np.empty_like(x)
            for start in range(0, rows, _FFN_ROWS):
                block = x[start:start + _FFN_ROWS]
                ffn[start:start + _FFN_ROWS] = _gelu(block @ layer.up_w + layer.up_b) @ layer.down_w
            x = _layer_norm(x + ffn + layer.down_b, layer.ffn_norm_w, layer.ffn_norm_b, self.eps)
        x = x.reshape(batch, length, self.hidden)  # mean of the real tokens, then unit length
        pooled = (x * keep[:, :, None]).sum(axis=1) / np.maximum(
            keep.sum(axis=1, keepdims=True), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Array = (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)
        return result

    def _attention(self, qkv: Array, bias: Array | None) -> Array:
        """Softmax(Q·Kᵀ + mask)·V per head, a few sequences at a time (cache-sized scores).

        ``qkv`` is (batch, length, 3, heads, head); the result is (batch, length, heads, head).
        """
        batch, length = qkv.shape[:2]
        context: Array = np.empty((batch, length, self.heads, qkv.shape[-1]), dtype=np.float32)
        step = max(1, _SCORE_FLOATS // (self.heads * length * length))
        for start in range(0, batch, step):
            part = slice(start, start + step)
            q = qkv[part, :, 0].transpose(0, 2, 1, 3)  # (sequences, heads, length, head)
            k = qkv[part, :, 1].transpose(0, 2, 3, 1)  # (sequences, heads, head, length)
            v = qkv[part, :, 2].transpose(0, 2, 1, 3)
            scores: Array = q @ k
            if bias is not None:
                scores += bias[part]
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context[part] = (scores @ v).transpose(0, 2, 1, 3)
        return context


def _int(config: Mapping[str, object], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"config.json has {key}={value!r}; expected a positive int")
    return value
