"""agentfootprint: the explainable AI-agent framework.

Every read, write, decision and call of a run is recorded as connected evidence, so a wrong
answer can be walked back to the exact context that caused it. The flowchart engine that
records it all lives in ``agentfootprint.flow``.
"""

from typing import TYPE_CHECKING, Any

from .agent import Agent, LLMCall, RunResult
from .context import (
    define_fact,
    define_injection,
    define_instruction,
    define_skill,
    define_steering,
)
from .errors import (
    AgentFootprintError,
    ChartBuildError,
    CheckpointError,
    CircuitOpenError,
    ConfigurationError,
    ContextWindowExceededError,
    FlowTimeoutError,
    LoopLimitError,
    ProviderError,
    ProviderUnavailableError,
    RunError,
    StageError,
)
from .tools import Tool, ToolContext, define_tool, tool

if TYPE_CHECKING:
    from .agent.checkin import check_in_approved, check_in_declined

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentFootprintError",
    "ChartBuildError",
    "CheckpointError",
    "CircuitOpenError",
    "ConfigurationError",
    "ContextWindowExceededError",
    "FlowTimeoutError",
    "LLMCall",
    "LoopLimitError",
    "ProviderError",
    "ProviderUnavailableError",
    "RunError",
    "RunResult",
    "StageError",
    "Tool",
    "ToolContext",
    "__version__",
    "check_in_approved",
    "check_in_declined",
    "define_fact",
    "define_injection",
    "define_instruction",
    "define_skill",
    "define_steering",
    "define_tool",
    "tool",
]


def __getattr__(name: str) -> Any:
    """The check-in answers load on first use, like the rest of ``agentfootprint.agent``'s
    governance names (most agents never pause for consent)."""
    if name in ("check_in_approved", "check_in_declined"):
        from .agent import checkin

        value = getattr(checkin, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
