"""Retry, fallback and circuit breaking around any provider, streamed calls included.

A streamed call is retried (or falls back) only while nothing has been yielded yet; after the
first chunk the answer is committed and an error propagates, with one exception: a stream cut
before its finish signal (``StreamIncompleteError``) is retried from the start, announced by a
``restart`` chunk, because what was yielded is known not to be the answer. A retry never comes
sooner than the server's ``Retry-After``. The real adapters (``openai()``, ``anthropic()``,
``ollama()``) come wrapped in a ``Retry`` by default (``RetryPolicy()``; ``retry=None`` turns it
off); an explicit ``with_retry`` around one replaces that default instead of nesting in it.
Wrappers answer for the wrapped provider's ``model`` and ``configured_model``, so an agent
built on ``with_retry(openai(model="x"))`` runs model ``"x"``. Every decorator reports what it
did (``retried``, ``recovered``, ``fell_back``, ``circuit_changed``) to whoever is listening in
the current context (the agent turns these into events), so no report is lost by a wrapper
that forgot to forward a hook; with no one listening (a provider called outside an agent run)
the report is logged at INFO under ``agentfootprint.providers``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from ..errors import CircuitOpenError, ConfigurationError, ProviderError, StreamIncompleteError
from ._base import LLMRequest, LLMResponse, Provider, StreamChunk
from ._retry_policy import RetryPolicy, resilience_reports

__all__ = [
    "CircuitBreaker",
    "Fallback",
    "Retry",
    "RetryPolicy",
    "resilience_reports",
    "with_circuit_breaker",
    "with_fallback",
    "with_retry",
]

_log = logging.getLogger("agentfootprint.providers")


def _report(kind: str, **data: Any) -> None:
    sink = resilience_reports.get()
    if sink is not None:
        sink({"kind": kind, **data})
    elif _log.isEnabledFor(logging.INFO):  # outside an agent run: no events, so the log says it
        _log.info("%s: %s", kind.replace("_", " "),
                  ", ".join(f"{key}={value!r}" for key, value in data.items()))


def default_should_retry(error: BaseException) -> bool:
    """Retry 429, 5xx and failures without a status; never other 4xx or cancellations."""
    if isinstance(error, ProviderError):
        return bool(error.retryable)
    return isinstance(error, (ConnectionError, TimeoutError, OSError))


class Retry(Provider):
    """Retries a failed call with exponential backoff, never sooner than the server asked.

    The wait before attempt ``n + 1`` is ``initial_delay * backoff ** (n - 1)`` capped at
    ``max_delay``, raised to the error's ``retry_after`` (the server's ``Retry-After``) when that
    is longer; then up to ``jitter`` times that wait is added at random, the total still capped
    at ``max_delay``. So ``Retry-After`` is a floor that jitter only ever adds to. A server that
    asks for more than ``max_delay`` is not retried: waiting less is pointless and waiting more
    breaks the budget, so a ``ProviderError`` names the wait and the fix instead.
    """

    def __init__(self, inner: Provider, *, max_attempts: int, initial_delay: float,
                 backoff: float, max_delay: float, jitter: float,
                 should_retry: Callable[[BaseException], bool],
                 sleep: Callable[[float], Awaitable[Any]], by_default: bool = False) -> None:
        self.inner = inner
        self.by_default = by_default
        """Put there by an adapter's ``retry=`` default: keeps the adapter's name, and an
        explicit ``with_retry`` replaces it."""
        self.name = inner.name if by_default else f"{inner.name}+retry"
        self.streams = inner.streams
        self.max_attempts = max_attempts
        self.initial_delay = initial_delay
        self.backoff = backoff
        self.max_delay = max_delay
        self.jitter = jitter
        self.should_retry = should_retry
        self.sleep = sleep
        self.random: Callable[[], float] = random.random
        """Uniform in [0, 1): the jitter's source (replace it to pin the jitter in a test)."""

    model = property(lambda self: self.inner.model)
    configured_model = property(lambda self: self.inner.configured_model)
    deterministic = property(lambda self: self.inner.deterministic)
    structured_output = property(lambda self: self.inner.structured_output)

    def __getattr__(self, name: str) -> Any:
        # The wrapped adapter's own surface (client, params, base_url, aclose, close_sync)
        # stays reachable through a default retry; dunders and ``inner`` itself never recurse.
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def fork(self) -> Provider:
        inner = self.inner.fork()
        if inner is self.inner:
            return self
        twin = Retry(inner, max_attempts=self.max_attempts, initial_delay=self.initial_delay,
                     backoff=self.backoff, max_delay=self.max_delay, jitter=self.jitter,
                     should_retry=self.should_retry, sleep=self.sleep,
                     by_default=self.by_default)
        twin.random = self.random
        return twin

    def __repr__(self) -> str:
        return f"<Retry {self.inner!r} max_attempts={self.max_attempts}>"

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (see the class docstring).

        ``retry_after`` must not exceed ``max_delay`` (the caller gives up first).
        """
        wait = min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1))
        if retry_after is not None and retry_after > wait:
            wait = retry_after
        extra = self.jitter * wait * self.random() if self.jitter else 0.0
        return float(min(wait + extra, max(self.max_delay, wait)))

    async def _pause_before_retry(self, attempt: int, error: BaseException) -> None:
        retry_after = getattr(error, "retry_after", None)
        if not isinstance(retry_after, int | float) or retry_after != retry_after:
            retry_after = None
        if retry_after is not None and retry_after > self.max_delay:
            provider = getattr(error, "provider", self.inner.name)
            raise ProviderError(
                f"[{provider}] the server asked to wait {retry_after:g}s before trying again "
                f"(Retry-After), longer than with_retry(max_delay={self.max_delay:g}) waits; "
                "try again later, or raise max_delay= to wait it out "
                f"(after: {type(error).__name__}: {error})",
                provider=provider, status=getattr(error, "status", None), retryable=False,
                retry_after=float(retry_after)) from error
        delay = self.delay(attempt, retry_after)
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
        following = 0  # the next index, so a restarted attempt's chunks keep counting up
        offset = 0
        restart = False
        for attempt in range(1, self.max_attempts + 1):
            yielded = False
            try:
                async for chunk in self.inner.stream(request):
                    if not yielded and attempt > 1:
                        _report("recovered", provider=self.inner.name, attempt=attempt,
                                duration=time.monotonic() - started)
                    if restart:
                        yield StreamChunk(index=following, restart=True)
                        offset = following + 1
                        restart = False
                    yielded = True
                    if offset:
                        chunk = chunk.model_copy(update={"index": chunk.index + offset})
                    following = chunk.index + 1
                    yield chunk
                return
            except Exception as error:
                cut = isinstance(error, StreamIncompleteError)
                if ((yielded and not cut) or attempt >= self.max_attempts
                        or not self.should_retry(error)):
                    raise
                restart = restart or yielded
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

    model = property(lambda self: self.primary.model)
    configured_model = property(lambda self: self.primary.configured_model)
    deterministic = property(
        lambda self: self.primary.deterministic and self.fallback.deterministic)
    structured_output = property(  # a native mode only when both sides share it
        lambda self: self.primary.structured_output
        if self.primary.structured_output == self.fallback.structured_output else None)

    def fork(self) -> Provider:
        primary, fallback = self.primary.fork(), self.fallback.fork()
        if primary is self.primary and fallback is self.fallback:
            return self
        return Fallback(primary, fallback, should_fallback=self.should_fallback)

    def _for_fallback(self, request: LLMRequest) -> LLMRequest:
        """The request as the fallback should get it: the primary's default model (what an
        agent without ``model=`` asks for) becomes the fallback's own."""
        own = self.fallback.model
        if own and request.model and request.model == self.primary.model:
            return request.model_copy(update={"model": own})
        return request

    async def complete(self, request: LLMRequest) -> LLMResponse:
        try:
            return await self.primary.complete(request)
        except Exception as error:
            if not self.should_fallback(error):
                raise
            _report("fell_back", primary=self.primary.name, fallback=self.fallback.name,
                    error=f"{type(error).__name__}: {error}")
            return await self.fallback.complete(self._for_fallback(request))

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
        async for chunk in self.fallback.stream(self._for_fallback(request)):
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

    model = property(lambda self: self.inner.model)
    configured_model = property(lambda self: self.inner.configured_model)
    deterministic = property(lambda self: self.inner.deterministic)
    structured_output = property(lambda self: self.inner.structured_output)

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
               backoff: float = 2.0, max_delay: float = 10.0, jitter: float = 0.0,
               should_retry: Callable[[BaseException], bool] = default_should_retry,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> Provider:
    """Retry failed calls (streams too, until their first chunk, or from the start when cut).

    Waits back off exponentially up to ``max_delay`` seconds and never undercut the server's
    ``Retry-After``; ``jitter`` (e.g. ``0.2``) adds up to that fraction of each wait at random,
    so many clients do not retry in step. See ``Retry`` for the exact rule.
    """
    if isinstance(provider, Retry) and provider.by_default:
        provider = provider.inner  # the explicit policy replaces the adapter's default
    _check_policy("with_retry", max_attempts, initial_delay, max_delay, jitter)
    return Retry(provider, max_attempts=max_attempts, initial_delay=initial_delay,
                 backoff=backoff, max_delay=max_delay, jitter=jitter, should_retry=should_retry,
                 sleep=sleep)


def _check_policy(where: str, max_attempts: int, initial_delay: float, max_delay: float,
                  jitter: float) -> None:
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigurationError(f"{where}(max_attempts={max_attempts!r}) must be at least 1")
    for argument, value in (("initial_delay", initial_delay), ("max_delay", max_delay),
                            ("jitter", jitter)):
        if not value >= 0:  # also refuses NaN
            raise ConfigurationError(
                f"{where}({argument}={value!r}) must be a number of at least 0")


def with_default_retry(provider: Provider, retry: RetryPolicy | None) -> Provider:
    """An adapter as its factory returns it: wrapped in ``retry`` (``None``: bare).

    The wrapper keeps the adapter's name, model and attributes, so only the retries show.
    """
    if retry is None:
        return provider
    if not isinstance(retry, RetryPolicy):
        raise ConfigurationError(
            f"retry={retry!r} must be a RetryPolicy(...) from agentfootprint.providers, "
            "or None to turn retries off")
    _check_policy("RetryPolicy", retry.max_attempts, retry.initial_delay, retry.max_delay,
                  retry.jitter)
    return Retry(provider, max_attempts=retry.max_attempts, initial_delay=retry.initial_delay,
                 backoff=retry.backoff, max_delay=retry.max_delay, jitter=retry.jitter,
                 should_retry=default_should_retry, sleep=asyncio.sleep, by_default=True)


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
