"""LLM providers: one port, a mock for tests, and adapters for real models.

``mock`` needs nothing. ``openai`` (every OpenAI-compatible server too), ``anthropic`` and
``ollama`` import their SDK or HTTP client only when called, so importing this package is free.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from .._lazy import moved_names as _moved_names
from ._base import LLMRequest, LLMResponse, Provider
from ._mock import MockProvider, mock
from ._resilience import with_circuit_breaker, with_fallback, with_retry

__all__ = [
    "LLMRequest",
    "LLMResponse",
    "MockProvider",
    "Provider",
    "anthropic",
    "mock",
    "ollama",
    "openai",
    "with_circuit_breaker",
    "with_fallback",
    "with_retry",
]


# The adapter modules (private: ``_openai.py``) load on the first call of their factory.


def _adapter(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}._{name}")


def openai(**options: Any) -> Provider:
    """The OpenAI provider (and any OpenAI-compatible server via ``base_url=``)."""
    provider: Provider = _adapter("openai").OpenAIProvider(**options)
    return provider


def anthropic(**options: Any) -> Provider:
    """The Anthropic provider (official SDK)."""
    provider: Provider = _adapter("anthropic").AnthropicProvider(**options)
    return provider


def ollama(**options: Any) -> Provider:
    """The Ollama provider (native ``/api/chat``)."""
    provider: Provider = _adapter("ollama").OllamaProvider(**options)
    return provider



# The port's parts a provider author needs (messages, tool calls and schemas, stream chunks,
# usage) are imported from agentfootprint.providers._base.
__getattr__ = _moved_names(__name__, dict.fromkeys(
    ("Message", "StreamChunk", "ToolCall", "ToolSchema", "Usage"),
    "agentfootprint.providers._base"))
