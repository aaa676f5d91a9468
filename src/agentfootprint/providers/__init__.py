"""LLM providers: one port, a mock for tests, and adapters for real models.

``mock`` needs nothing. ``openai`` (every OpenAI-compatible server too), ``anthropic`` and
``ollama`` import their SDK or HTTP client only when called, so importing this package is free.
"""

from __future__ import annotations

from typing import Any

from . import anthropic as _anthropic_module
from . import ollama as _ollama_module
from . import openai as _openai_module
from .base import (
    LLMRequest,
    LLMResponse,
    Message,
    Provider,
    StreamChunk,
    ToolCall,
    ToolSchema,
    Usage,
)
from .mock import MockProvider, mock
from .resilience import with_circuit_breaker, with_fallback, with_retry

__all__ = [
    "LLMRequest",
    "LLMResponse",
    "Message",
    "MockProvider",
    "Provider",
    "StreamChunk",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "anthropic",
    "mock",
    "ollama",
    "openai",
    "with_circuit_breaker",
    "with_fallback",
    "with_retry",
]


# The adapter modules are imported above (they load their SDKs only when a provider is
# built); the factories below deliberately take over their names on this package.


def openai(**options: Any) -> Provider:
    """The OpenAI provider (and any OpenAI-compatible server via ``base_url=``)."""
    return _openai_module.OpenAIProvider(**options)


def anthropic(**options: Any) -> Provider:
    """The Anthropic provider (official SDK)."""
    return _anthropic_module.AnthropicProvider(**options)


def ollama(**options: Any) -> Provider:
    """The Ollama provider (native ``/api/chat``)."""
    return _ollama_module.OllamaProvider(**options)
