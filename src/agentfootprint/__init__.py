"""agentfootprint: the explainable AI-agent framework.

Every read, write, decision and call of a run is recorded as connected evidence, so a wrong
answer can be walked back to the exact context that caused it. The flowchart engine that
records it all lives in ``agentfootprint.flow``.
"""

import logging as _logging
from typing import TYPE_CHECKING

from ._lazy import lazy_names as _lazy_names
from ._lazy import serve_moved_modules as _serve_moved_modules
from .agent._agent import Agent, LLMCall, RunResult
from .agent._options import Governance, Limits, ModelSettings, Tracing
from .agent._usage import Budget
from .context._injection import (
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
from .tools._tool import RunContext, Tool, ToolContext, define_tool, tool

# The library logs under agentfootprint.* and leaves the handlers to the application.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

# Implementation modules are private (``flow/_engine.py``); their old paths, and the run
# stores' old home in explain/, resolve for one release with a DeprecationWarning.
_serve_moved_modules(__name__, {
    "agentfootprint.explain.recording": "agentfootprint.runs._recording",
    "agentfootprint.explain.runstore": "agentfootprint.runs._sqlite",
    "agentfootprint.explain.runstore_postgres": "agentfootprint.runs._postgres",
})

if TYPE_CHECKING:
    from .agent._checkin import check_in_approved, check_in_declined

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentFootprintError",
    "Budget",
    "ChartBuildError",
    "CheckpointError",
    "CircuitOpenError",
    "ConfigurationError",
    "ContextWindowExceededError",
    "FlowTimeoutError",
    "Governance",
    "LLMCall",
    "Limits",
    "LoopLimitError",
    "ModelSettings",
    "ProviderError",
    "ProviderUnavailableError",
    "RunContext",
    "RunError",
    "RunResult",
    "StageError",
    "Tool",
    "ToolContext",
    "Tracing",
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


# The check-in answers load on first use, like the governance names of agentfootprint.agent.
__getattr__, __dir__ = _lazy_names(__name__, dict.fromkeys(
    ("check_in_approved", "check_in_declined"), "agent._checkin"))
