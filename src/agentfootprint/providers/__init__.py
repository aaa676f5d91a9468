"""LLM providers: one port, a mock for tests, and adapters for real models.

``mock`` needs nothing. ``openai`` (every OpenAI-compatible server too), ``anthropic`` and
``ollama`` import their SDK or HTTP client only when called, so importing this package is free.
The three real adapters retry 429, 5xx, timeouts and connection failures by default
(``retry=RetryPolicy()``; ``retry=None`` for none), each retry an ``error.retried`` event.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names
from ._base import LLMRequest, LLMResponse, Provider
from ._mock import MockProvider, mock
from ._pricing import PRICES, Price
from ._retry_policy import RetryPolicy

if TYPE_CHECKING:
    from ._resilience import with_circuit_breaker, with_fallback, with_retry

__all__ = [
    "PRICES",
    "LLMRequest",
    "LLMResponse",
    "MockProvider",
    "Price",
    "Provider",
    "RetryPolicy",
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


def _with_default_retry(provider: Provider, retry: RetryPolicy | None) -> Provider:
    from ._resilience import with_default_retry  # the wrappers load with the first use

    return with_default_retry(provider, retry)


_RETRY = RetryPolicy()


def openai(*, retry: RetryPolicy | None = _RETRY, **options: Any) -> Provider:
    """The OpenAI provider (and any OpenAI-compatible server via ``base_url=``), retrying
    transient failures as ``retry`` says (``None``: never)."""
    return _with_default_retry(_adapter("openai").OpenAIProvider(**options), retry)


def anthropic(*, retry: RetryPolicy | None = _RETRY, **options: Any) -> Provider:
    """The Anthropic provider (official SDK), retrying transient failures as ``retry`` says."""
    return _with_default_retry(_adapter("anthropic").AnthropicProvider(**options), retry)


def ollama(*, retry: RetryPolicy | None = _RETRY, **options: Any) -> Provider:
    """The Ollama provider (native ``/api/chat``), retrying transient failures as ``retry``
    says."""
    return _with_default_retry(_adapter("ollama").OllamaProvider(**options), retry)



# The port's parts a provider author needs (messages, tool calls and schemas, stream chunks,
# usage) are imported from agentfootprint.providers._base.
_moved = _moved_names(__name__, dict.fromkeys(
    ("Message", "StreamChunk", "ToolCall", "ToolSchema", "Usage"),
    "agentfootprint.providers._base"), stacklevel=3)
# The resilience wrappers load on first use (a plain run never wraps its provider).
_wrapper, __dir__ = _lazy_names(__name__, dict.fromkeys(
    ("with_circuit_breaker", "with_fallback", "with_retry"), "_resilience"))


def __getattr__(name: str) -> Any:
    if name.startswith("with_"):
        return _wrapper(name)
    return _moved(name)
