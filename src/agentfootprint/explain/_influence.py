"""Influence: how well each suspect's text aligns with the answer — a CORRELATIONAL PROXY.

A strategy scores, for every suspect text, how much it resembles the answer being explained,
in ``[0, 1]``. A high score says "this text and the answer share words (or meaning)", never
"this text caused the answer": similarity is blind to a fact that was *missing*, to crowding,
and to a text the model obeyed without repeating it. Scores only ORDER the candidates so that
counterfactual re-runs (``localize.py``) can test the likeliest first; only re-runs say CAUSAL.

Two strategies ship:

* ``lexical_overlap`` (the default): deterministic and free. Set-cosine of the answer's and the
  text's content tokens (lower-cased, stop words dropped, a light suffix fold so "approved"
  meets "approve").
* ``semantic_alignment(embedder)``: cosine of embeddings, clamped to ``[0, 1]``. The embedder is
  one of memory's (``minilm_embedder()`` for meaning; its ``embed_sync`` is used) or any
  ``Callable[[list[str]], list[list[float]]]``. ``content_word_embedder`` is a deterministic
  hashing one over the same content words as ``lexical_overlap``, for tests and offline use.

Any object with a ``name`` and ``score(answer, texts) -> list[float]`` is a strategy too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ..context._overlap import content_words, set_cosine
from ..errors import ConfigurationError
from ..memory.embedding._mock import hash_bag_of_words
from ._suspects import Suspect

__all__ = [
    "Embedder",
    "InfluenceStrategy",
    "LexicalOverlap",
    "RankedSuspect",
    "RankingConfidence",
    "SemanticAlignment",
    "best_sentence",
    "get_strategy",
    "lexical_overlap",
    "content_word_embedder",
    "list_influence_strategies",
    "rank_suspects",
    "ranking_confidence",
    "semantic_alignment",
    "split_sentences",
]

class _SyncEmbedder(Protocol):
    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]: ...


Embedder = Callable[[list[str]], list[list[float]]] | _SyncEmbedder
"""Texts in, one vector per text out (same length for all): a function, or one of memory's
embedders (anything with ``embed_sync``)."""


@runtime_checkable
class InfluenceStrategy(Protocol):
    """Scores how much each text aligns with the answer, each score in ``[0, 1]`` (a proxy)."""

    @property
    def name(self) -> str: ...

    def score(self, answer: str, texts: list[str]) -> list[float]: ...


# -- tokens ----------------------------------------------------------------------------------

def _words(text: str) -> list[str]:
    """Content tokens in order (duplicates kept); the tokenizer shared with the agent."""
    return content_words(text)


def _set_cosine(a: frozenset[str], b: frozenset[str]) -> float:
    return set_cosine(a, b)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """The text cut into sentences (at ``.``/``!``/``?`` followed by space, and at newlines)."""
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


# -- strategies ------------------------------------------------------------------------------


class LexicalOverlap:
    """Set-cosine of content tokens: ``|A∩B| / sqrt(|A|·|B|)``; 0 when either side is empty."""

    name = "lexical_overlap"
    description = "token overlap of the answer with each text (deterministic, no model calls)"
    requirements: tuple[str, ...] = ()

    def score(self, answer: str, texts: list[str]) -> list[float]:
        target = frozenset(_words(answer))
        return [_set_cosine(target, frozenset(_words(text))) for text in texts]

    __call__ = score

    def __repr__(self) -> str:
        return "lexical_overlap"


lexical_overlap = LexicalOverlap()
"""The default strategy (an instance; ``lexical_overlap(answer, texts)`` also works)."""


class SemanticAlignment:
    """Cosine of the answer's embedding with each text's, clamped to ``[0, 1]``."""

    name = "semantic_alignment"
    description = "embedding cosine of the answer with each text (needs an embedder)"
    requirements: tuple[str, ...] = ("embedder",)

    def __init__(self, embedder: Embedder) -> None:
        embed = getattr(embedder, "embed_sync", embedder)
        if not callable(embed):
            raise ConfigurationError(
                f"semantic_alignment needs an embedder (memory's mock_embedder(), "
                f"minilm_embedder(), or a function texts -> vectors), got {embedder!r}")
        self.embedder = embedder
        self._embed: Callable[[list[str]], Any] = embed

    def score(self, answer: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        vectors = self._embed([answer, *texts])
        if not isinstance(vectors, Sequence) or len(vectors) != len(texts) + 1:
            count = len(vectors) if isinstance(vectors, Sequence) else type(vectors).__name__
            raise ConfigurationError(
                f"the embedder returned {count} vectors for {len(texts) + 1} texts; "
                "it must return one vector per text, in order")
        dims = {len(vector) for vector in vectors}
        if len(dims) != 1:
            raise ConfigurationError(
                f"the embedder returned vectors of different lengths {sorted(dims)}; "
                "all must have the same length")
        target = vectors[0]
        return [max(0.0, min(1.0, _cosine(target, vector))) for vector in vectors[1:]]

    __call__ = score

    def __repr__(self) -> str:
        return f"semantic_alignment({getattr(self.embedder, '__name__', self.embedder)!r})"


def semantic_alignment(embedder: Embedder) -> SemanticAlignment:
    """A strategy scoring by embedding cosine (clamped to ``[0, 1]``) with ``embedder``."""
    return SemanticAlignment(embedder)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if norm == 0 or not math.isfinite(norm):
        return 0.0
    value = dot / norm
    return value if math.isfinite(value) else 0.0


def content_word_embedder(texts: list[str], dims: int = 256) -> list[list[float]]:
    """A deterministic hashing embedder over content words (CRC32 of each token mod ``dims``).

    For tests and offline demos: it knows no meaning, only the words ``lexical_overlap``
    compares (stop words dropped, suffixes folded), and gives the same vectors in every
    process. The hashing rule is memory's ``hash_bag_of_words``; memory's ``mock_embedder()``
    hashes every word instead, which suits recall better than explanation.
    """
    if not isinstance(dims, int) or dims < 1:
        raise ConfigurationError(f"content_word_embedder dims={dims!r} must be an int >= 1")
    return [hash_bag_of_words(_words(text), dims) for text in texts]


_KNOWN = ("lexical_overlap", "semantic_alignment")


def list_influence_strategies() -> list[str]:
    """The names of the built-in strategies (the default first)."""
    return list(_KNOWN)


def get_strategy(name_or_obj: str | InfluenceStrategy, *,
                 embedder: Embedder | None = None) -> InfluenceStrategy:
    """A strategy by name (``"lexical_overlap"``, ``"semantic_alignment"`` with ``embedder=``)
    or the strategy object itself."""
    if isinstance(name_or_obj, str):
        key = name_or_obj.strip().lower().replace("-", "_")
        if key == "lexical_overlap":
            return lexical_overlap
        if key == "semantic_alignment":
            if embedder is None:
                raise ConfigurationError(
                    "influence strategy 'semantic_alignment' needs an embedder: pass "
                    "semantic_alignment(embedder) or get_strategy('semantic_alignment', "
                    "embedder=...)")
            return semantic_alignment(embedder)
        raise ConfigurationError(
            f"unknown influence strategy {name_or_obj!r}; known: {', '.join(_KNOWN)} "
            "(or pass an object with .name and .score(answer, texts))")
    if isinstance(name_or_obj, InfluenceStrategy) and callable(
            getattr(name_or_obj, "score", None)):
        return name_or_obj
    raise ConfigurationError(
        f"{name_or_obj!r} is not an influence strategy; pass one of {', '.join(_KNOWN)} or an "
        "object with .name and .score(answer, texts) -> list[float]")


def _scores_of(strategy: InfluenceStrategy, answer: str, texts: list[str]) -> list[float]:
    """Run a strategy and refuse what breaks its contract (a wiring bug, so fail loud)."""
    scores = strategy.score(answer, list(texts))
    if not isinstance(scores, Sequence) or len(scores) != len(texts):
        count = len(scores) if isinstance(scores, Sequence) else type(scores).__name__
        raise ConfigurationError(
            f"influence strategy {strategy.name!r} returned {count} scores for "
            f"{len(texts)} texts; it must return one score per text")
    out = []
    for value in scores:
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not 0.0 <= value <= 1.0):
            raise ConfigurationError(
                f"influence strategy {strategy.name!r} returned score {value!r}; "
                "scores must be numbers in [0, 1]")
        out.append(float(value))
    return out


def best_sentence(answer: str, text: str,
                  strategy: str | InfluenceStrategy = "lexical_overlap") -> tuple[str, float]:
    """The sentence of ``text`` that aligns best with ``answer``, and its score (a proxy).

    Ties keep the earlier sentence; a text with no sentence gives ``("", 0.0)``.
    """
    sentences = split_sentences(text)
    if not sentences:
        return "", 0.0
    scores = _scores_of(get_strategy(strategy), answer, sentences)
    best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
    return sentences[best], scores[best]


# -- ranking ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankedSuspect:
    """A suspect with its alignment score — a correlational proxy, never a cause."""

    suspect: Suspect
    score: float
    sentence: str
    """The suspect's sentence that aligns best with the answer (for highlighting)."""
    sentence_score: float = 0.0
    strategy: str = "lexical_overlap"

    @property
    def label(self) -> str:
        return self.suspect.label

    @property
    def tier(self) -> Literal["proxy"]:
        return "proxy"


def rank_suspects(answer: str, suspects: Sequence[Suspect],
                  strategy: str | InfluenceStrategy = "lexical_overlap") -> list[RankedSuspect]:
    """Suspects by descending alignment with ``answer``; ties keep the given (prompt) order."""
    chosen = get_strategy(strategy)
    items = list(suspects)
    for item in items:
        if not isinstance(item, Suspect):
            raise ConfigurationError(
                f"rank_suspects takes Suspect objects (from suspects_of), got {item!r}")
    scores = _scores_of(chosen, answer, [s.text for s in items])
    order = sorted(range(len(items)), key=lambda i: -scores[i])  # sorted() is stable
    out = []
    for i in order:
        sentence, sentence_score = best_sentence(answer, items[i].text, chosen)
        out.append(RankedSuspect(items[i], scores[i], sentence, sentence_score, chosen.name))
    return out


@dataclass(frozen=True, slots=True)
class RankingConfidence:
    """Whether the ranking has a clear leader or is only a shortlist (still a proxy)."""

    clear_winner: bool
    margin: float | None
    """Top-2 score margin (``None`` with fewer than two finite scores)."""
    lead: int | None
    """Index, in the scores given, of the top-ranked one."""
    shortlist: tuple[int, ...]
    """Indices (in rank order) of every finite score within ``shortlist_band`` of the top;
    always the lead, and the runner-up too when there is no clear winner."""
    reason: str
    """An honest sentence for reports."""


def ranking_confidence(scores: Sequence[float] | Sequence[RankedSuspect],
                       clear_winner_margin: float = 0.05,
                       shortlist_band: float = 0.1) -> RankingConfidence:
    """Say when a ranking is a shortlist to re-run, not a leader (scores or ranked suspects)."""
    for option, value in (("clear_winner_margin", clear_winner_margin),
                          ("shortlist_band", shortlist_band)):
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or math.isnan(value) or value < 0):
            raise ConfigurationError(
                f"ranking_confidence: {option}={value!r} must be a number >= 0")
    labels: list[str] = []
    values: list[float] = []
    for position, item in enumerate(scores):
        if isinstance(item, RankedSuspect):
            labels.append(item.label)
            raw: object = item.score
        else:
            labels.append(f"#{position + 1}")
            raw = item
        number = float(raw) if isinstance(raw, (int, float)) else math.nan
        values.append(number if math.isfinite(number) else -math.inf)
    if not values:
        return RankingConfidence(False, None, None, (), "No suspects to rank.")
    order = sorted(range(len(values)), key=lambda i: -values[i])
    lead = order[0]
    proxy = "A lead is a correlational PROXY, not a proven cause — confirm by re-runs."
    if len(values) == 1:
        if not math.isfinite(values[lead]):
            return RankingConfidence(False, None, lead, (lead,),
                                     f"The only suspect, {labels[lead]}, has no valid score.")
        return RankingConfidence(True, None, lead, (lead,),
                                 f"Only one suspect: {labels[lead]} leads by default. {proxy}")
    top, second = values[order[0]], values[order[1]]
    rule = f"margin>={clear_winner_margin:g}"
    margin: float | None = None
    if not math.isfinite(top):
        clear = False
        reason = "No suspect has a valid score; the ranking says nothing."
    elif not math.isfinite(second):
        clear = True
        reason = (f"Clear winner [{rule}]: {labels[lead]} is the only suspect with a valid "
                  f"score. {proxy}")
    else:
        margin = top - second
        clear = margin >= clear_winner_margin
        if clear:
            reason = (f"Clear winner [{rule}]: {labels[lead]} leads (top-2 margin "
                      f"{margin:.3f}). {proxy}")
        else:
            reason = ""  # filled in below, once the shortlist is known
    shortlist = [i for i in order if math.isfinite(values[i])
                 and math.isfinite(top) and top - values[i] <= shortlist_band]
    must = [order[0]] if clear else [order[0], order[1]]
    for index in must:
        if index not in shortlist:
            shortlist.append(index)
    shortlist.sort(key=order.index)
    if not reason:
        names = ", ".join(labels[i] for i in shortlist)
        reason = (f"Too close to call [{rule}]: top-2 margin {margin:.3f} — the ranking is too "
                  f"flat to trust. Check the {len(shortlist)} shortlisted suspect(s) by "
                  f"re-runs: {names}.")
    return RankingConfidence(clear, margin, lead, tuple(shortlist), reason)
