"""What a model call costs: a price per model, and the cost of one call's usage.

Prices are USD per million tokens, split the way the vendors bill them: uncached input, output,
input read from the prompt cache and input written to it. ``PRICES`` is a small built-in table
of common OpenAI and Anthropic models as their pricing pages listed them on ``PRICES_AS_OF``;
vendors change prices, so an agent takes its own table (``Budget(prices={...})``), merged over
this one. A model in neither has no price: its cost is ``None`` (unknown), never 0.

A model name matches a table entry exactly, or as that entry plus a release date
(``gpt-4o-mini-2024-07-18``, ``claude-sonnet-4-5-20250929``), which is how APIs name the
snapshot they answered with. A longer name (``gpt-4o-mini`` under ``gpt-4o``) is never taken
for a shorter one's price.

Usage follows ``providers.Usage``: ``input`` counts every prompt token, cached ones included,
and ``cache_read`` / ``cache_write`` say how many of them were read from / written to the cache.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from .._record import Value, assign, record_class
from ..errors import ConfigurationError

__all__ = ["PRICES", "PRICES_AS_OF", "Price", "built_in_price", "call_cost", "check_prices",
           "price_for"]


@record_class(kw_only=True)
class Price(Value):
    """USD per million tokens. A cache price left ``None`` bills those tokens as input.

    (A frozen dataclass with its methods written once: ``_record.py``, for cold start.)"""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def __init__(self, *, input: float, output: float, cache_read: float | None = None,
                 cache_write: float | None = None) -> None:
        assign(self, input=input, output=output, cache_read=cache_read, cache_write=cache_write)
        self._check()

    def _check(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or value < 0):
                raise ConfigurationError(
                    f"Price({name}={value!r}) must be a finite number >= 0 (USD per million "
                    "tokens)")


PRICES_AS_OF: Final = "2025-11-15"
"""The day the built-in prices were read from the vendors' pricing pages."""

PRICES: Final[Mapping[str, Price]] = MappingProxyType({
    # OpenAI: cached input is billed at the cached rate; writing the cache costs nothing extra.
    "gpt-4o": Price(input=2.50, output=10.00, cache_read=1.25),
    "gpt-4o-mini": Price(input=0.15, output=0.60, cache_read=0.075),
    "gpt-4.1": Price(input=2.00, output=8.00, cache_read=0.50),
    "gpt-4.1-mini": Price(input=0.40, output=1.60, cache_read=0.10),
    "gpt-4.1-nano": Price(input=0.10, output=0.40, cache_read=0.025),
    "gpt-5": Price(input=1.25, output=10.00, cache_read=0.125),
    "gpt-5-mini": Price(input=0.25, output=2.00, cache_read=0.025),
    "gpt-5-nano": Price(input=0.05, output=0.40, cache_read=0.005),
    "o3": Price(input=2.00, output=8.00, cache_read=0.50),
    "o4-mini": Price(input=1.10, output=4.40, cache_read=0.275),
    # Anthropic: a cache read is 0.1x input, a (5-minute) cache write 1.25x input.
    "claude-opus-4-1": Price(input=15.00, output=75.00, cache_read=1.50, cache_write=18.75),
    "claude-opus-4": Price(input=15.00, output=75.00, cache_read=1.50, cache_write=18.75),
    "claude-sonnet-4-5": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-sonnet-4": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-3-7-sonnet": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-haiku-4-5": Price(input=1.00, output=5.00, cache_read=0.10, cache_write=1.25),
    "claude-3-5-haiku": Price(input=0.80, output=4.00, cache_read=0.08, cache_write=1.00),
})
"""Built-in prices (USD per million tokens) as of ``PRICES_AS_OF``; override per agent."""

_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def check_prices(prices: object) -> dict[str, Price]:
    """``prices`` as a plain dict of model name to ``Price``; anything else is refused."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise ConfigurationError(
            f"prices={prices!r} must map model names to Price(input=..., output=...)")
    for model, price in prices.items():
        if not isinstance(model, str) or not model or not isinstance(price, Price):
            raise ConfigurationError(
                f"prices[{model!r}]={price!r}: prices map a model name (str) to "
                "Price(input=..., output=...) in USD per million tokens")
    return dict(prices)


def price_for(model: str | None, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: from ``prices`` first, then the built-in table; ``None`` if
    neither knows it (exactly, or as a dated snapshot of a known name)."""
    if not model:
        return None
    for table in (prices or {}, PRICES):
        found = table.get(model)
        if found is not None:
            return found
    base = _undated(model)
    if base != model:
        return price_for(base, prices)
    return None


@functools.lru_cache(maxsize=256)
def built_in_price(model: str | None) -> Price | None:
    """``price_for(model)`` over the built-in table alone, remembered (the table never
    changes, and a run asks for the same name at every call)."""
    return price_for(model)


@functools.lru_cache(maxsize=256)
def _undated(model: str) -> str:
    """``model`` without a dated-snapshot suffix (a run asks for the same names every call)."""
    return _DATED.sub("", model)


def call_cost(price: Price | None, *, input: int, output: int, cache_read: int = 0,
              cache_write: int = 0) -> float | None:
    """USD for one call's tokens at ``price`` (``None`` when there is no price).

    ``input`` includes the cached tokens; the uncached rest is billed at the input price.
    """
    if price is None:
        return None
    uncached = max(0, input - cache_read - cache_write)
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    total = (uncached * price.input + output * price.output + cache_read * read
             + cache_write * write)
    return total / 1_000_000
