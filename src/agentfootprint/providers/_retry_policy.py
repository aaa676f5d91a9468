"""What the run needs of the resilience wrappers without loading them (cold start).

``RetryPolicy`` is the real adapters' default (``openai(retry=RetryPolicy())``) and
``resilience_reports`` the channel through which a wrapper's retries, fallbacks and open
circuits reach the running agent's events; both are read while a plain mock run is set up, the
wrappers themselves (``_resilience.py``, which re-exports these) only when one is used.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from .._record import Value, assign, record_class

__all__ = ["Report", "RetryPolicy", "resilience_reports"]

Report = dict[str, Any]
resilience_reports: contextvars.ContextVar[Callable[[Report], None] | None] = (
    contextvars.ContextVar("resilience_reports", default=None))


@record_class(kw_only=True)
class RetryPolicy(Value):
    """How a real adapter retries by default: ``openai(retry=RetryPolicy(max_attempts=5))``.

    The fields mean what ``with_retry``'s arguments of the same names mean. The default retries
    429, 5xx, timeouts and connection failures twice (three attempts), waiting 0.5 s then 1 s
    (plus up to 10% jitter), never less than the server's ``Retry-After`` and giving up at once
    when that asks for more than ``max_delay``.
    """

    max_attempts: int = 3
    """Attempts in all, the first included (1: never retry)."""
    initial_delay: float = 0.5
    """Seconds before the second attempt."""
    backoff: float = 2.0
    """Factor each later wait grows by."""
    max_delay: float = 30.0
    """Longest single wait; a longer ``Retry-After`` is not waited out."""
    jitter: float = 0.1
    """Up to this fraction of a wait is added at random, so clients do not retry in step."""

    def __init__(self, *, max_attempts: int = 3, initial_delay: float = 0.5,
                 backoff: float = 2.0, max_delay: float = 30.0, jitter: float = 0.1) -> None:
        assign(self, max_attempts=max_attempts, initial_delay=initial_delay, backoff=backoff,
               max_delay=max_delay, jitter=jitter)
