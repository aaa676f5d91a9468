"""Retry-After: read the same way by every adapter, and a floor for ``with_retry``'s next wait.

The parser is pinned by properties (seconds, HTTP-dates, milliseconds, and anything else a
server might send); the wait rule by a property over the retry settings; the adapters by a real
server on 127.0.0.1 that answers 429/503/529 with the header.
"""

from __future__ import annotations

import math
import time
from email.utils import formatdate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_server import (
    WireServer,
    anthropic_message,
    json_reply,
    openai_completion,
)

from agentfootprint.errors import ConfigurationError, ProviderError
from agentfootprint.providers import LLMRequest, LLMResponse, Provider, mock, with_retry
from agentfootprint.providers._http import LONGEST_RETRY_AFTER, parse_retry_after
from agentfootprint.providers._resilience import Retry

NOW = 1_800_000_000.0
REQUEST = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}])


class Sleeps:
    """An injected sleep that records its delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def throttled(retry_after: float | None, status: int = 429) -> ProviderError:
    return ProviderError(f"HTTP {status}", provider="inner", status=status,
                         retry_after=retry_after)


# -- the parser ------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**40))
def test_delay_seconds_are_read_as_given_up_to_a_year(seconds: int) -> None:
    assert parse_retry_after({"Retry-After": str(seconds)}, now=NOW) == min(
        float(seconds), LONGEST_RETRY_AFTER)


@given(st.integers(min_value=-10**7, max_value=10**7))
def test_an_http_date_is_the_seconds_until_it_and_zero_once_past(offset: int) -> None:
    header = formatdate(NOW + offset, usegmt=True)  # IMF-fixdate, as RFC 9110 asks
    assert parse_retry_after({"retry-after": header}, now=NOW) == max(0.0, float(offset))


@pytest.mark.parametrize("header", [
    "Sun, 06 Nov 1994 08:49:37 GMT",   # IMF-fixdate
    "Sunday, 06-Nov-94 08:49:37 GMT",  # obsolete RFC 850
    "Sun Nov  6 08:49:37 1994",        # obsolete asctime
])
def test_every_http_date_form_is_read(header: str) -> None:
    assert parse_retry_after({"Retry-After": header}, now=784111777.0 - 30) == 30.0


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_retry_after_ms_wins_and_is_milliseconds(millis: float) -> None:
    found = parse_retry_after({"retry-after-ms": repr(millis), "Retry-After": "99"}, now=NOW)
    assert found == min(millis / 1000.0, LONGEST_RETRY_AFTER)


@pytest.mark.parametrize("millis", ["-5", "nan", "inf", "soon", ""])
def test_an_unusable_retry_after_ms_falls_back_to_retry_after(millis: str) -> None:
    assert parse_retry_after({"retry-after-ms": millis, "Retry-After": "7"}, now=NOW) == 7.0


@given(st.dictionaries(st.sampled_from(["Retry-After", "retry-after", "RETRY-AFTER-MS",
                                        "retry-after-ms", "x-other"]),
                       st.text(max_size=40)))
@settings(max_examples=300)
def test_any_header_value_gives_none_or_a_bounded_wait(headers: dict[str, str]) -> None:
    """Whatever a server sends, the parser never raises, and never returns a negative, NaN or
    unbounded wait."""
    found = parse_retry_after(headers, now=NOW)
    assert found is None or (math.isfinite(found) and 0.0 <= found <= LONGEST_RETRY_AFTER)


@pytest.mark.parametrize("value", ["-1", "1e3", "3 seconds", "Tomorrow", "", "0x10", "+5"])
def test_values_that_are_neither_seconds_nor_a_date_are_ignored(value: str) -> None:
    assert parse_retry_after({"Retry-After": value}, now=NOW) is None


def test_no_header_is_none() -> None:
    assert parse_retry_after({"Content-Type": "application/json"}, now=NOW) is None


# -- the wait rule ---------------------------------------------------------------------------


@given(attempt=st.integers(min_value=1, max_value=12),
       initial=st.floats(min_value=0, max_value=5),
       backoff=st.floats(min_value=1, max_value=4),
       max_delay=st.floats(min_value=0, max_value=60),
       jitter=st.floats(min_value=0, max_value=3),
       draw=st.floats(min_value=0, max_value=1, exclude_max=True),
       share=st.one_of(st.none(), st.floats(min_value=0, max_value=1)))
def test_the_wait_is_never_below_retry_after_nor_above_max_delay(
        attempt: int, initial: float, backoff: float, max_delay: float, jitter: float,
        draw: float, share: float | None) -> None:
    """Retry-After is a floor; jitter only adds to it; max_delay caps everything."""
    retry = with_retry(mock(reply="x"), initial_delay=initial, backoff=backoff,
                       max_delay=max_delay, jitter=jitter)
    assert isinstance(retry, Retry)
    retry.random = lambda: draw
    retry_after = None if share is None else share * max_delay
    wait = retry.delay(attempt, retry_after)
    backed_off = min(max_delay, initial * backoff ** (attempt - 1))
    assert wait <= max_delay
    assert wait >= backed_off
    if retry_after is not None:
        assert wait >= retry_after


async def test_retry_after_raises_the_next_wait_and_jitter_goes_on_top() -> None:
    sleep = Sleeps()
    inner = mock(script=[throttled(3.0), throttled(0.5), LLMResponse(content="ok")])
    retry = with_retry(inner, sleep=sleep, jitter=0.5)
    assert isinstance(retry, Retry)
    retry.random = lambda: 0.5
    assert (await retry.complete(REQUEST)).content == "ok"
    # 3 s asked (over 0.2 s of backoff), then 0.5 s asked (over 0.4 s): each + 25 % jitter
    assert sleep.delays == [3.75, 0.625]


async def test_a_wait_longer_than_max_delay_gives_up_naming_it() -> None:
    """Waiting less than asked is pointless, more breaks the budget: a clear error instead."""
    sleep = Sleeps()
    inner = mock(script=[throttled(120.0), LLMResponse(content="never")])
    with pytest.raises(ProviderError) as caught:
        await with_retry(inner, sleep=sleep, max_delay=10).complete(REQUEST)
    error = caught.value
    assert sleep.delays == []
    assert (error.status, error.retry_after, error.retryable) == (429, 120.0, False)
    assert "120s" in str(error) and "max_delay=10" in str(error)
    assert isinstance(error.__cause__, ProviderError)


async def test_streams_honour_retry_after_too() -> None:
    sleep = Sleeps()

    class Throttled(Provider):
        streams = True

        def __init__(self) -> None:
            self.calls = 0

        async def stream(self, request: LLMRequest) -> Any:
            self.calls += 1
            if self.calls == 1:
                raise throttled(2.0, status=503)
            async for chunk in mock(reply="fine").stream(request):
                yield chunk

    chunks = [c async for c in with_retry(Throttled(), sleep=sleep).stream(REQUEST)]
    assert chunks[-1].response is not None and chunks[-1].response.content == "fine"
    assert sleep.delays == [2.0]


@pytest.mark.parametrize(("argument", "value"), [
    ("jitter", -0.1), ("max_delay", -1.0), ("initial_delay", float("nan"))])
def test_negative_or_nan_settings_are_refused(argument: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=argument):
        with_retry(mock(reply="x"), **{argument: value})  # type: ignore[arg-type]


# -- the adapters, over a real socket --------------------------------------------------------


def throttle_reply(status: int, headers: dict[str, str]) -> Any:
    body: dict[str, Any] = {"error": {"type": "rate_limit_error", "message": "slow down"}}
    if status == 529:
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    return json_reply(body, status=status, headers=headers)


async def test_openai_waits_out_retry_after_seconds_on_the_wire(wire: WireServer) -> None:
    """The repro's case for real: a 429 with ``Retry-After: 1`` and the default with_retry;
    the second request comes no sooner than one second later."""
    pytest.importorskip("openai")
    from agentfootprint.providers._openai import OpenAIProvider

    wire.plan(throttle_reply(429, {"Retry-After": "1"}), json_reply(openai_completion("fine")))
    provider = OpenAIProvider(base_url=f"{wire.url}/v1", model="m")
    try:
        response = await with_retry(provider).complete(REQUEST)
    finally:
        await provider.aclose()
    assert response.content == "fine"
    assert wire.requests[1].at - wire.requests[0].at >= 1.0


@pytest.mark.parametrize(("kind", "status", "headers", "floor"), [
    ("openai", 429, {"retry-after-ms": "2500"}, 2.5),
    ("openai", 503, {"Retry-After": "DATE+10"}, 8.0),
    ("anthropic", 529, {"retry-after-ms": "1500", "retry-after": "2"}, 1.5),
    ("anthropic", 429, {"Retry-After": "6"}, 6.0),
    ("ollama", 503, {"Retry-After": "5"}, 5.0),
])
async def test_each_adapter_reads_retry_after_into_the_next_wait(
        kind: str, status: int, headers: dict[str, str], floor: float,
        wire: WireServer) -> None:
    """The error keeps the server's wait; with_retry's next sleep is at least that."""
    headers = {name: (formatdate(time.time() + 10, usegmt=True) if value == "DATE+10" else value)
               for name, value in headers.items()}
    provider: Any
    if kind == "openai":
        pytest.importorskip("openai")
        from agentfootprint.providers._openai import OpenAIProvider

        provider = OpenAIProvider(base_url=f"{wire.url}/v1", model="m")
        whole = json_reply(openai_completion("fine"))
    elif kind == "anthropic":
        anthropic = pytest.importorskip("anthropic")
        from agentfootprint.providers._anthropic import AnthropicProvider

        provider = AnthropicProvider(client=anthropic.AsyncAnthropic(
            api_key="t", base_url=wire.url, max_retries=0))
        whole = json_reply(anthropic_message("fine"))
    else:
        from agentfootprint.providers._ollama import OllamaProvider

        provider = OllamaProvider(base_url=wire.url, model="wire")
        whole = json_reply({"model": "wire", "done": True,
                            "message": {"role": "assistant", "content": "fine"}})
    wire.plan(throttle_reply(status, headers), whole)
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(REQUEST)
        assert caught.value.status == status
        assert caught.value.retry_after is not None
        assert floor <= caught.value.retry_after <= floor + 2.0
        wire.plan(throttle_reply(status, headers), whole)
        sleep = Sleeps()
        response = await with_retry(provider, sleep=sleep).complete(REQUEST)
    finally:
        closer = getattr(provider, "aclose", None)
        if closer is not None:
            await closer()
    assert response.content == "fine"
    assert len(sleep.delays) == 1 and sleep.delays[0] >= floor
