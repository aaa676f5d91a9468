"""Token overlap between texts: the cheap, deterministic "how much of this came from that".

The agent uses it to say which context drove a tool choice (a check-in's evidence pack) without
a model call, and the explain layer's ``lexical_overlap`` strategy ranks suspects with it. Both
must agree, so the tokenizer lives here, once: casefolded word tokens without stop words, with
a light suffix fold (refunds → refund, approved/approve → approv), scored as the set cosine
``|A∩B| / sqrt(|A|·|B|)`` — 0 when either side has no content words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = ["content_words", "overlap_scores", "set_cosine"]

_STOP_WORDS = frozenset((
    "a", "an", "the", "and", "or", "but", "if", "to", "of", "for", "in", "on", "at", "by",
    "with", "is", "are", "was", "were", "be", "been", "it", "this", "that", "these", "those",
    "i", "you", "we", "my", "our", "me", "please", "can", "could", "would", "should", "do",
    "does", "how", "what", "need", "want"))
_WORD = re.compile(r"[^\W_]+")


def _fold(token: str) -> str:
    if len(token) >= 4 and token.endswith("s") and not token.endswith("ss"):
        token = token[:-1]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            break
    if len(token) >= 4 and token.endswith("e"):
        token = token[:-1]
    return token


def content_words(text: str) -> list[str]:
    """Content tokens in order (duplicates kept)."""
    return [_fold(word) for word in _WORD.findall(text.casefold())
            if len(word) >= 2 and word not in _STOP_WORDS]


def set_cosine(a: frozenset[str], b: frozenset[str]) -> float:
    """``|A∩B| / sqrt(|A|·|B|)``; 0 when either set is empty."""
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


def overlap_scores(target: str, texts: Sequence[str]) -> list[float]:
    """The overlap of ``target`` with each text, in ``[0, 1]``."""
    wanted = frozenset(content_words(target))
    return [set_cosine(wanted, frozenset(content_words(text))) for text in texts]
