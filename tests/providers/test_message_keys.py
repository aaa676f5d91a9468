"""The wire TypedDicts know which keys are optional (``NotRequired``), and the request model
validates a message with or without them."""

from __future__ import annotations

from agentfootprint.providers import LLMRequest
from agentfootprint.providers._base import Message


def test_message_optional_keys_are_declared_optional() -> None:
    assert Message.__required_keys__ == {"role", "content"}
    assert Message.__optional_keys__ == {"tool_calls", "tool_call_id", "tool_name",
                                         "injected_by"}


def test_request_validates_messages_with_and_without_optional_keys() -> None:
    request = LLMRequest.model_validate({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "a", "args": {}}]},
    ]})
    assert request.messages[1]["tool_calls"][0]["name"] == "a"
    assert "tool_calls" not in request.messages[0]
