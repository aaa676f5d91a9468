"""What the HTTP adapters read off a response beyond its parsed body: how long the server asked
us to wait, a clipped excerpt of a body we could not read, the transport errors that can escape
an SDK while a stream is being read, and the errors for a cut stream and an unreadable body
(worded once, so the three adapters say the same thing).

Pure functions (no I/O), shared by the ``openai``, ``anthropic`` and ``ollama`` adapters so the
three read ``Retry-After`` the same way.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

from ..errors import MalformedResponseError, StreamIncompleteError

__all__ = [
    "LONGEST_RETRY_AFTER",
    "broke_off",
    "excerpt",
    "malformed",
    "parse_retry_after",
    "stream_cut",
    "transport_errors",
]

LONGEST_RETRY_AFTER = 365 * 24 * 3600.0
"""Waits are clipped here: a server asking for more than a year means "not any time soon"."""

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait before the next request, or ``None`` when it did not say.

    Reads ``retry-after-ms`` (milliseconds, as OpenAI and Anthropic send it) first, then
    ``Retry-After`` as delay-seconds (a fraction is accepted) or an HTTP-date (RFC 9110 §10.2.3),
    header names in any case. A date in the past is ``0.0``; a negative, non-finite or
    unreadable value is ignored, so a broken header never shortens or stalls a retry. The result
    is in ``[0, LONGEST_RETRY_AFTER]``. ``now`` (epoch seconds) is for tests.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = _number(lowered.get("retry-after-ms"), fraction=True)
    if millis is not None:
        return min(millis / 1000.0, LONGEST_RETRY_AFTER)
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw, fraction=False)
    if seconds is not None:
        return min(seconds, LONGEST_RETRY_AFTER)
    return _until(raw, time.time() if now is None else now)


def _number(raw: str | None, *, fraction: bool) -> float | None:
    """A non-negative finite number from a header value, else ``None``."""
    if raw is None:
        return None
    text = raw.strip()
    if fraction:
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) and value >= 0 else None
    if not _SECONDS.fullmatch(text):
        return None
    value = float(text)  # digits only: never negative or NaN, but may overflow to inf
    return value if math.isfinite(value) else LONGEST_RETRY_AFTER


def _until(raw: str, now: float) -> float | None:
    """Seconds from ``now`` to an HTTP-date, ``0.0`` if it is past, ``None`` if not a date."""
    try:
        when = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    try:
        # HTTP-dates are always GMT; a date without a zone is read as GMT too.
        stamp = when.timestamp() if when.tzinfo is not None else (
            when.replace(tzinfo=UTC).timestamp())
    except (OverflowError, ValueError, OSError):
        return None
    return min(max(0.0, stamp - now), LONGEST_RETRY_AFTER)


def excerpt(text: str, limit: int = 200) -> str:
    """``text`` clipped to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def broke_off(exc: BaseException) -> bool:
    """True when an SDK's connection error happened after the server answered (a read that
    failed, a body cut short), not while connecting: "cannot reach" would then be wrong."""
    cause = exc.__cause__ or exc.__context__
    return cause is not None and type(cause).__name__ in (
        "ReadError", "RemoteProtocolError", "ReadTimeout", "LocalProtocolError")


def transport_errors() -> tuple[type[BaseException], ...]:
    """Low-level HTTP errors that can escape an SDK while a stream is being read.

    The SDKs wrap errors raised while a request is sent, not while its streamed body is read;
    ``openai`` >= 3 and ``anthropic`` >= 2 run on ``httpx2`` unless given an ``httpx`` client.
    """
    import httpx

    errors: list[type[BaseException]] = [httpx.TransportError]
    try:
        import httpx2

        errors.append(httpx2.TransportError)
    except ImportError:  # pragma: no cover - older SDKs
        pass
    return tuple(errors)


def stream_cut(provider: str, where: str, *, signal: str, how: str, partial: str,
               status: int | None = None, retryable: bool = True) -> StreamIncompleteError:
    """The error for a stream that ended before ``signal``; ``partial`` is kept as evidence."""
    if partial:
        evidence = (f"the {len(partial)} characters received are kept as evidence, not taken "
                    f"as the answer: {excerpt(partial)!r}")
    else:
        evidence = "no text had arrived"
    return StreamIncompleteError(
        f"[{provider}] the stream from {where} ended before its finish signal ({signal}): "
        f"{how}; {evidence}; with_retry(provider) asks again",
        provider=provider, partial=partial, status=status, retryable=retryable)


def malformed(provider: str, where: str, *, status: int, body: str,
              expected: str = "JSON") -> MalformedResponseError:
    """The error for an answer whose body cannot be read; its status and an excerpt kept."""
    clipped = excerpt(body)
    return MalformedResponseError(
        f"[{provider}] {where} answered HTTP {status} with a body that is not {expected}: "
        f"{clipped!r}; with_retry(provider) asks again (a proxy or an overloaded server sends "
        "these)", provider=provider, status=status, body_excerpt=clipped)
