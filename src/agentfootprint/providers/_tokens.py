"""Counting tokens: with the model's real vocabulary when one is available offline, else an
estimate that says it is one.

Window and memory budgets are in tokens, and ``len(text) / 4`` is only a guess (off by 2x for
code, CJK text or numbers). ``token_counter`` picks, in order:

* a ``tokenizer=`` given: an OpenAI encoding name (``"o200k_base"``, ``"cl100k_base"``), a
  ``tokenizer.json`` path (a Hugging Face tokenizer, such as the one a local model ships, read
  with the ``tokenizers`` package of the ``embed`` extra), or any object with ``encode(text)``;
* for an OpenAI model name (``gpt-4o-mini``, ``gpt-4.1``, ``o3``...), its encoding from the
  ``bpe-openai`` package, which bundles the vocabularies (``tiktoken`` downloads them on first
  use, so it is not used): ``pip install "agentfootprint[tokens]"``;
* otherwise the estimate, ``ceil(len / 4)``.

Each counter has a ``label`` (``"o200k_base"`` or ``"estimate: len/4"``) that the window records
with its plan, so a reader knows whether a budget was counted or guessed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

__all__ = ["ESTIMATE", "TokenCounter", "token_counter"]

_INSTALL = 'pip install "agentfootprint[tokens]"'


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts the tokens of a text; ``exact`` says whether it is the model's vocabulary."""

    label: str
    exact: bool
    count: Callable[[str], int]

    def __call__(self, text: str) -> int:
        return self.count(text) if text else 0


def _estimate(text: str) -> int:
    return math.ceil(len(text) / 4)


ESTIMATE = TokenCounter("estimate: len/4", False, _estimate)
"""About four characters a token: what is used when no vocabulary is at hand."""


@functools.lru_cache(maxsize=8)
def _openai_encoding(name: str) -> TokenCounter:
    try:
        import bpe_openai  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigurationError(
            f"counting tokens with {name!r} needs the bpe-openai package (it ships OpenAI's "
            f"vocabularies, no download): {_INSTALL}") from exc
    try:
        encoding = bpe_openai.get_encoding(name)
    except Exception as exc:  # the package's own unknown-encoding error
        raise ConfigurationError(
            f"tokenizer={name!r} is not an encoding bpe-openai knows; use one of "
            f"{sorted(bpe_openai.list_encoding_names())}") from exc
    return TokenCounter(name, True, lambda text: len(encoding.encode_ordinary(text)))


def _hf_file(path: Path) -> TokenCounter:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ConfigurationError(
            f"reading {str(path)!r} needs the tokenizers package: "
            'pip install "agentfootprint[embed]"') from exc
    try:
        loaded = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ConfigurationError(
            f"tokenizer={str(path)!r} could not be read as a tokenizer.json ({exc})") from exc
    loaded.no_padding()  # a model's file may pad or cut every text to its input size
    loaded.no_truncation()
    return _from_object(loaded, f"tokenizer.json ({path.parent.name or path.name})")


def _from_object(tokenizer: Any, label: str) -> TokenCounter:
    hugging_face = type(tokenizer).__module__.startswith("tokenizers")

    def count(text: str) -> int:
        encoded = (tokenizer.encode(text, add_special_tokens=False) if hugging_face
                   else tokenizer.encode(text))
        ids = getattr(encoded, "ids", encoded)  # a Hugging Face Encoding, or a list of ids
        return len(ids)

    return TokenCounter(label, True, count)


def _model_encoding(model: str) -> str | None:
    try:
        import bpe_openai
    except ImportError:
        return None
    try:
        name = bpe_openai.encoding_name_for_model(model)
    except Exception:  # not an OpenAI model
        return None
    return str(name) if name else None


def token_counter(tokenizer: object = None, *, model: str | None = None) -> TokenCounter:
    """The best counter for ``tokenizer`` or ``model`` (see the module docstring)."""
    if isinstance(tokenizer, TokenCounter):
        return tokenizer
    if isinstance(tokenizer, Path) or (isinstance(tokenizer, str)
                                       and tokenizer.endswith(".json")):
        return _hf_file(Path(tokenizer))
    if isinstance(tokenizer, str):
        return ESTIMATE if tokenizer == "estimate" else _openai_encoding(tokenizer)
    if tokenizer is not None:
        if not callable(getattr(tokenizer, "encode", None)):
            raise ConfigurationError(
                f"tokenizer={tokenizer!r} has no encode(text); give an encoding name "
                "('o200k_base'), a tokenizer.json path or a tokenizers.Tokenizer")
        return _from_object(tokenizer, type(tokenizer).__name__)
    name = _model_encoding(model) if model else None
    return _openai_encoding(name) if name else ESTIMATE
