"""agentfootprint: the explainable AI-agent framework.

Every read, write, decision and call of a run is recorded as connected evidence, so a wrong
answer can be walked back to the exact context that caused it. The flowchart engine that
records it all lives in ``agentfootprint.flow``.
"""

from .errors import (
    AgentFootprintError,
    ChartBuildError,
    CheckpointError,
    ConfigurationError,
    FlowTimeoutError,
    LoopLimitError,
    RunError,
    StageError,
)

__version__ = "0.1.0"

__all__ = [
    "AgentFootprintError",
    "ChartBuildError",
    "CheckpointError",
    "ConfigurationError",
    "FlowTimeoutError",
    "LoopLimitError",
    "RunError",
    "StageError",
    "__version__",
]
