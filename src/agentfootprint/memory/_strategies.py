"""Memory strategies: how much of the past to recall, and how to choose it.

A memory is ``TYPE × STRATEGY × STORE``. The strategy objects here are plain, frozen values;
``define_memory`` turns a (type, strategy) pair into read and write flowcharts and refuses pairs
that make no sense, naming the ones that do. :func:`list_memory_strategies` is the catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agentfootprint.errors import ConfigurationError
from agentfootprint.providers._tokens import ESTIMATE, TokenCounter, token_counter

if TYPE_CHECKING:
    from agentfootprint.memory.embedding._base import Embedder
    from agentfootprint.providers._base import Provider

__all__ = [
    "MemoryType",
    "Strategy",
    "StrategyInfo",
    "budget",
    "list_memory_strategies",
    "summarize",
    "top_k",
    "window",
]

MemoryType = Literal["episodic", "semantic", "narrative", "causal"]


@dataclass(frozen=True, slots=True)
class Window:
    """The newest ``size`` entries."""

    size: int
    kind: Literal["window"] = "window"


@dataclass(frozen=True, slots=True)
class RecallBudget:
    """The newest entries that fit the context budget (``load`` read, newest kept first).

    Made by ``memory.budget(...)``; not to be confused with ``agentfootprint.Budget``, a run's
    token and cost limits."""

    reserve_tokens: int = 256
    minimum_tokens: int = 100
    max_entries: int | None = None
    load: int = 20
    kind: Literal["budget"] = "budget"
    counter: TokenCounter = ESTIMATE
    """How an entry's tokens are counted (``budget(tokenizer=...)``; else the estimate)."""


@dataclass(frozen=True, slots=True)
class Summarize:
    """The newest ``recent`` messages verbatim, older ones of the last ``size`` folded."""

    recent: int
    provider: Provider
    model: str
    size: int = 20
    kind: Literal["summarize"] = "summarize"


@dataclass(frozen=True, slots=True)
class TopK:
    """The ``k`` entries most similar to the user's message (``threshold``: minimum score)."""

    k: int
    embedder: Embedder
    threshold: float | None = None
    kind: Literal["top_k"] = "top_k"


Strategy = Window | RecallBudget | Summarize | TopK


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name}={value!r} must be an int >= 1.")
    return value


def window(size: int) -> Window:
    """Recall the newest ``size`` entries."""
    return Window(_positive("window(size)", size))


def budget(*, reserve_tokens: int = 256, minimum_tokens: int = 100,
           max_entries: int | None = None, load: int = 20,
           tokenizer: object = None) -> RecallBudget:
    """Recall the newest entries that fit what is left of the context window.

    ``tokenizer`` counts their tokens (an encoding name such as ``"o200k_base"``, a
    ``tokenizer.json`` path or a tokenizer object, see ``providers/_tokens.py``); without one
    they are estimated as ``len/4``, and the recall records which.
    """
    if max_entries is not None:
        _positive("budget(max_entries)", max_entries)
    return RecallBudget(reserve_tokens, minimum_tokens, max_entries,
                        _positive("budget(load)", load),
                        counter=token_counter(tokenizer) if tokenizer is not None else ESTIMATE)


def summarize(*, recent: int, provider: Provider, model: str, size: int = 20) -> Summarize:
    """Keep ``recent`` messages verbatim and fold the older ones into a summary."""
    _positive("summarize(recent)", recent)
    _positive("summarize(size)", size)
    if recent >= size:
        raise ConfigurationError(
            f"summarize(recent={recent}, size={size}) would never fold anything; make recent "
            "smaller than size."
        )
    if not isinstance(model, str) or not model:
        raise ConfigurationError("summarize(model=...) must name the summarizer's model.")
    return Summarize(recent, provider, model, size)


def top_k(*, k: int = 3, embedder: Embedder, threshold: float | None = None) -> TopK:
    """Recall the ``k`` most similar entries scoring at least ``threshold``."""
    _positive("top_k(k)", k)
    if threshold is not None and not -1.0 <= threshold <= 1.0:
        raise ConfigurationError(f"top_k(threshold={threshold!r}) must lie in [-1, 1].")
    if embedder is None or not hasattr(embedder, "embed"):
        raise ConfigurationError(
            "top_k(embedder=...) needs an embedder, e.g. mock_embedder() or minilm_embedder()."
        )
    return TopK(k, embedder, threshold)


@dataclass(frozen=True, slots=True)
class StrategyInfo:
    """One row of the catalogue: a strategy, what it needs and which memory types take it."""

    kind: str
    requirements: tuple[str, ...]
    types: tuple[MemoryType, ...]


_CATALOGUE = (
    StrategyInfo("window", (), ("episodic", "narrative")),
    StrategyInfo("budget", (), ("episodic",)),
    StrategyInfo("summarize", ("provider", "model"), ("episodic",)),
    StrategyInfo("top_k", ("embedder", "vector-store"), ("semantic", "causal")),
)


def list_memory_strategies() -> tuple[StrategyInfo, ...]:
    """Every strategy, its requirements and the memory types it applies to."""
    return _CATALOGUE
