"""Retry, fallback and circuit breaking around any provider, streamed calls included.

A streamed call is retried (or falls back) only while nothing has been yielded yet; after the
first chunk the answer is committed and an error propagates. Every decorator reports what it
did (``retried``, ``recovered``, ``fell_back``, ``circuit_changed``) to whoever is listening in
the current context (the agent turns these into events), so no report is lost by a wrapper
that forgot to forward a hook.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from ..errors import CircuitOpenError, ConfigurationError, ProviderError
from ._base import LLMRequest, LLMResponse, Provider, StreamChunk

__all__ = [
    "CircuitBreaker",
    "Fallback",
    "Retry",
    "resilience_reports",
    "with_circuit_breaker",
    "with_fallback",
    "with_retry",
]

Report = dict[str, Any]
resilience_reports: contextvars.ContextVar[Callable[[Report], None] | None] = (
    contextvars.ContextVar("resilience_reports", default=None))


def _report(kind: str, **data: Any) -> None:
    sink = resilience_reports.get()
    if sink is not None:
        sink({"kind": kind, **data})


def default_should_retry(error: BaseException) -> bool:
    """Retry 429, 5xx and failures without a status; never other 4xx or cancellations."""
    if isinstance(error, ProviderError):
        return bool(error.retryable)
    return isinstance(error, (ConnectionError, TimeoutError, OSError))


class Retry(Provider):
    """Retries a failed call with exponential backoff."""

    def __init__(self, inner: Provider, *, max_attempts: int, initial_delay: float,
                 backoff: float, max_delay: float,
                 should_retry: Callable[[BaseException], bool],
                 sleep: Callable[[float], Awaitable[Any]]) -> None:
        self.inner = inner
        self.name = f"{inner.name}+retry"
        self.streams = inner.streams
        self.max_attempts = max_attempts
        self.initial_delay = initial_delay
        self.backoff = backoff
        self.max_delay = max_delay
        self.should_retry = should_retry
        self.sleep = sleep

    def _delay(self, attempt: int) -> float:
        return float(min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1)))

    async def _pause_before_retry(self, attempt: int, error: BaseException) -> None:
        delay = self._delay(attempt)
        _report("retried", provider=self.inner.name, attempt=attempt + 1,
                max_attempts=self.max_attempts, error=f"{type(error).__name__}: {error}",
                status=getattr(error, "status", None), backoff=delay)
        await self.sleep(delay)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = await self.inner.complete(request)
            except Exception as error:
                if attempt >= self.max_attempts or not self.should_retry(error):
                    raise
                await self._pause_before_retry(attempt, error)
                continue
            if attempt > 1:
                _report("recovered", provider=self.inner.name, attempt=attempt,
                        duration=time.monotonic() - started)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        started = time.monotonic()
        for attempt in range(1, self.max_attempts + 1):
            yielded = False
            try:
                async for chunk in self.inner.stream(request):
                    if not yielded and attempt > 1:
                        _report("recovered", provider=self.inner.name, attempt=attempt,
                                duration=time.monotonic() - started)
                    yielded = True
                    yield chunk
                return
            except Exception as error:
                if yielded or attempt >= self.max_attempts or not self.should_retry(error):
                    raise
                await self._pause_before_retry(attempt, error)


class Fallback(Provider):
    """Calls ``fallback`` when ``primary`` fails (for streams: before its first chunk)."""

    def __init__(self, primary: Provider, fallback: Provider, *,
                 should_fallback: Callable[[BaseException], bool]) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = f"{primary.name}|{fallback.name}"
        self.streams = primary.streams or fallback.streams
        self.should_fallback = should_fallback

    async def complete(self, request: LLMRequest) -> LLMResponse:
        try:
            return await self.primary.complete(request)
        except Exception as error:
            if not self.should_fallback(error):
                raise
            _report("fell_back", primary=self.primary.name, fallback=self.fallback.name,
                    error=f"{type(error).__name__}: {error}")
            return await self.fallback.complete(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        yielded = False
        try:
            async for chunk in self.primary.stream(request):
                yielded = True
                yield chunk
            return
        except Exception as error:
            if yielded or not self.should_fallback(error):
                raise
            _report("fell_back", primary=self.primary.name, fallback=self.fallback.name,
                    error=f"{type(error).__name__}: {error}")
        async for chunk in self.fallback.stream(request):
            yield chunk


class CircuitBreaker(Provider):
    """Stops calling a failing provider for ``cooldown`` seconds after repeated failures."""

    def __init__(self, inner: Provider, *, failure_threshold: int, cooldown: float,
                 half_open_successes: int, clock: Callable[[], float]) -> None:
        self.inner = inner
        self.name = f"{inner.name}+breaker"
        self.streams = inner.streams
        self.failure_threshold = failure_threshold
        self.cooldown = cooldown
        self.half_open_successes = half_open_successes
        self.clock = clock
        self.state: Literal["closed", "open", "half_open"] = "closed"
        self.failures = 0
        self.successes = 0
        self.opened_at = 0.0

    def _move(self, state: Literal["closed", "open", "half_open"], reason: str) -> None:
        if state != self.state:
            self.state = state
            _report("circuit_changed", provider=self.inner.name, state=state, reason=reason)

    def _admit(self) -> None:
        if self.state == "open":
            if self.clock() - self.opened_at < self.cooldown:
                raise CircuitOpenError(
                    f"circuit for provider {self.inner.name!r} is open after {self.failures} "
                    f"failures; calls resume after {self.cooldown}s", provider=self.inner.name)
            self.successes = 0
            self._move("half_open", "cooldown elapsed")

    def _succeeded(self) -> None:
        if self.state == "half_open":
            self.successes += 1
            if self.successes >= self.half_open_successes:
                self.failures = 0
                self._move("closed", "probes succeeded")
        else:
            self.failures = 0

    def _failed(self) -> None:
        self.failures += 1
        if self.state == "half_open" or self.failures >= self.failure_threshold:
            self.opened_at = self.clock()
            self._move("open", f"{self.failures} consecutive failures")

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self._admit()
        try:
            response = await self.inner.complete(request)
        except Exception:
            self._failed()
            raise
        self._succeeded()
        return response

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamChunk]:
        self._admit()
        try:
            async for chunk in self.inner.stream(request):
                yield chunk
        except Exception:
            self._failed()
            raise
        self._succeeded()


def with_retry(provider: Provider, *, max_attempts: int = 3, initial_delay: float = 0.2,
               backoff: float = 2.0, max_delay: float = 10.0,
               should_retry: Callable[[BaseException], bool] = default_should_retry,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> Provider:
    """Retry failed calls (streams too, until their first chunk)."""
    if max_attempts < 1:
        raise ConfigurationError(f"with_retry(max_attempts={max_attempts}) must be at least 1")
    return Retry(provider, max_attempts=max_attempts, initial_delay=initial_delay,
                 backoff=backoff, max_delay=max_delay, should_retry=should_retry, sleep=sleep)


def with_fallback(primary: Provider, fallback: Provider, *,
                  should_fallback: Callable[[BaseException], bool] = lambda e: True) -> Provider:
    """Use ``fallback`` when ``primary`` fails."""
    return Fallback(primary, fallback, should_fallback=should_fallback)


def with_circuit_breaker(provider: Provider, *, failure_threshold: int = 5, cooldown: float = 30.0,
                         half_open_successes: int = 2,
                         clock: Callable[[], float] = time.monotonic) -> Provider:
    """Open after ``failure_threshold`` consecutive failures; probe again after ``cooldown``."""
    if failure_threshold < 1:
        raise ConfigurationError(
            f"with_circuit_breaker(failure_threshold={failure_threshold}) must be at least 1")
    return CircuitBreaker(provider, failure_threshold=failure_threshold, cooldown=cooldown,
                          half_open_successes=half_open_successes, clock=clock)
