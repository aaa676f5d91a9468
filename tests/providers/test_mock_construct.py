"""The mock builds a well-formed reply without validation (cold start); it must be exactly the
response validation would have built, and a malformed reply must still be refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from agentfootprint.providers import LLMRequest, LLMResponse, mock
from agentfootprint.providers._base import Usage


def _answer(reply: Any) -> LLMResponse:
    request = LLMRequest(model="mock", messages=[{"role": "user", "content": "hi there"}])
    return asyncio.run(mock(script=[reply]).complete(request))


@pytest.mark.parametrize("reply", [
    "hello",
    {"content": "x", "tool_calls": [{"name": "add", "args": {"a": 1}}]},
    {"tool_calls": [{"id": "c9", "name": "add", "args": {}}], "stop_reason": "tool_use"},
])
def test_constructed_reply_equals_the_validated_one(reply: Any) -> None:
    got = _answer(reply)
    again = LLMResponse.model_validate(got.model_dump())
    assert got == again
    assert got.model_fields_set == {"content", "tool_calls", "usage", "stop_reason", "model"}
    assert got.usage.model_fields_set == {"input", "output"}
    assert type(got.usage) is Usage and got.usage.input == 2
    assert got.model_dump() == again.model_dump()


@pytest.mark.parametrize("reply", [
    {"content": "x", "tool_calls": [{"name": "add", "args": {1: 2}}]},
    {"content": "x", "stop_reason": 3},
    {"tool_calls": [{"id": 7, "name": "add", "args": {}}]},
])
def test_malformed_reply_is_still_validated(reply: Any) -> None:
    with pytest.raises(ValidationError):
        _answer(reply)
