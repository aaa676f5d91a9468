"""The scripted provider's input-token count is the whole prompt's, however requests follow."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest


def _full(request: LLMRequest) -> int:
    chars = len(request.system or "") + sum(len(m["content"]) for m in request.messages)
    return math.ceil(chars / 4)


def test_input_tokens_count_every_message_of_every_request() -> None:
    msgs: list[Any] = [{"role": "user", "content": "a" * 9}]
    grown = [*msgs, {"role": "assistant", "content": "b" * 13}]
    requests = [
        LLMRequest(model="m", messages=msgs, system="sys"),
        LLMRequest(model="m", messages=grown),  # the last request plus a message
        LLMRequest(model="m", messages=[dict(m) for m in grown]),  # equal copies
        LLMRequest(model="m", messages=[{"role": "user", "content": "c" * 40}]),  # another
        LLMRequest(model="m", messages=[*grown, {"role": "tool", "content": "d" * 7}]),
        LLMRequest(model="m", messages=grown[:1]),  # shorter than the last one
        LLMRequest(model="m", messages=[]),
        LLMRequest(model="m", messages=[{"role": "user", "content": "e" * 9}, grown[1]]),
    ]
    provider = mock(reply="ok")
    for request in requests:
        answer = asyncio.run(provider.complete(request))
        assert answer.usage.input == _full(request)


def test_a_changed_earlier_message_is_counted_again() -> None:
    provider = mock(reply="ok")
    messages: list[Any] = [{"role": "user", "content": "x" * 8}]
    asyncio.run(provider.complete(LLMRequest(model="m", messages=messages)))
    messages[0] = {"role": "user", "content": "x" * 80}  # same list, a different message
    again = LLMRequest(model="m", messages=[*messages, {"role": "user", "content": "y"}])
    assert asyncio.run(provider.complete(again)).usage.input == _full(again)
