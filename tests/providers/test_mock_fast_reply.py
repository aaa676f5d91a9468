"""The mock's straight-line reply builders make exactly what ``model_construct`` makes, and its
inlined reply checks keep every refusal and every count of the checked path."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from _same_model import same_model
from pydantic import ValidationError

from agentfootprint import ConfigurationError
from agentfootprint.providers import LLMRequest, LLMResponse, mock
from agentfootprint.providers._base import Usage
from agentfootprint.providers._mock import _reply


def test_reply_builder_is_model_construct() -> None:
    calls: list[Any] = [{"id": "call_1", "name": "add", "args": {"a": 1}}]
    built = _reply("hi", calls, 7, 3, "tool_use", "m")
    usage = Usage.model_construct(input=7, output=3)
    same_model(built.usage, usage)
    same_model(built, LLMResponse.model_construct(content="hi", tool_calls=calls, usage=usage,
                                             stop_reason="tool_use", model="m"))
    assert built.tool_calls is calls
    assert LLMResponse.model_validate(built.model_dump()) == built
    built.provider_ref = "r"  # a fresh fields set per response: one change stays its own
    built.usage.cache_read = 1
    other = _reply("x", [], 0, 0, "stop", "m")
    assert "provider_ref" not in other.model_fields_set
    assert "cache_read" not in other.usage.model_fields_set


def _run(reply: Any, **request: Any) -> LLMResponse:
    sent = LLMRequest(model="mock", messages=[{"role": "user", "content": "hi there"}],
                      **request)
    return asyncio.run(mock(script=[reply]).complete(sent))


def test_usage_is_the_ceiling_of_characters_over_four() -> None:
    for size in range(0, 13):
        got = _run({"content": "y" * size}, system="s" * size)
        assert got.usage.input == math.ceil((size + 8) / 4)
        assert got.usage.output == math.ceil(size / 4)


@pytest.mark.parametrize(("reply", "error"), [
    ({"contnet": "x"}, r"unknown key\(s\) 'contnet'"),
    ({"tool_calls": [{"name": "a", "arg": {}}]}, r"unknown key\(s\) 'arg'"),
    ({"tool_calls": [{"args": {}}]}, "must be a dict with a 'name'"),
    ({"tool_calls": "add"}, "tool_calls='add' must be a list"),
])
def test_malformed_dict_replies_are_refused(reply: Any, error: str) -> None:
    with pytest.raises(ConfigurationError, match=error):
        _run(reply)


@pytest.mark.parametrize("reply", [
    {"content": "x", "tool_calls": [{"name": "add", "args": {2: "b"}}]},  # a non-str arg key
    {"content": ["not", "text"]},
])
def test_values_validation_would_refuse_still_go_to_validation(reply: Any) -> None:
    with pytest.raises(ValidationError):
        _run(reply)


def test_ids_count_every_call_given_ids_included() -> None:
    got = _run({"tool_calls": [{"name": "a"}, {"id": "own", "name": "b"}, {"name": "c"}]})
    assert [c["id"] for c in got.tool_calls] == ["call_1", "own", "call_3"]
    assert [c["args"] for c in got.tool_calls] == [{}, {}, {}]
    assert got.stop_reason == "tool_use" and got.model_fields_set == {
        "content", "tool_calls", "usage", "stop_reason", "model"}


def test_given_usage_and_tuple_calls_are_validated() -> None:
    got = _run({"content": "x", "usage": {"input": 5}, "tool_calls": ({"name": "a"},)})
    assert got.usage == Usage(input=5) and got.tool_calls[0]["id"] == "call_1"
