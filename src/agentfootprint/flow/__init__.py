"""The flowchart engine: charts whose every read, write and decision is recorded.

It knows nothing about LLMs and is useful alone: a business pipeline written as a flowchart
explains its own decisions. Everything above it (agents, compositions, memory) is built from
flowcharts, so every trace in the product is a commit log of this kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .builder import BranchBuilder, FlowBuilder, flow_chart
from .chart import Chart, Node
from .commitlog import Change, CommitLog, CommitRecord
from .decide import Decision, Selection, decide, select
from .pause import Pause, pause
from .recorders import Deferred, FlowEvent, ObserverFailure, deferred
from .redact import REDACTED, RedactionPolicy
from .run import FlowRun
from .scope import Scope

if TYPE_CHECKING:
    from .causal import CausalChain, CausalEdge, CausalNode, causal_chain, format_causal_chain
    from .checkpoint import Checkpoint, load_checkpoint
    from .narrative import NarrativeEntry, NarrativeRecorder, narrative

__all__ = [
    "REDACTED",
    "BranchBuilder",
    "CausalChain",
    "CausalEdge",
    "CausalNode",
    "Change",
    "Chart",
    "Checkpoint",
    "CommitLog",
    "CommitRecord",
    "Decision",
    "Deferred",
    "FlowBuilder",
    "FlowEvent",
    "FlowRun",
    "NarrativeEntry",
    "NarrativeRecorder",
    "Node",
    "ObserverFailure",
    "Pause",
    "RedactionPolicy",
    "Scope",
    "Selection",
    "causal_chain",
    "decide",
    "deferred",
    "flow_chart",
    "format_causal_chain",
    "load_checkpoint",
    "narrative",
    "pause",
    "select",
]

# Loaded on first use: a run only needs them to pause (checkpoint) or to be explained (causal,
# narrative).
_LAZY = {
    "CausalChain": "causal", "CausalEdge": "causal", "CausalNode": "causal",
    "causal_chain": "causal", "format_causal_chain": "causal",
    "Checkpoint": "checkpoint", "load_checkpoint": "checkpoint",
    "NarrativeEntry": "narrative", "NarrativeRecorder": "narrative", "narrative": "narrative",
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY, keep=("narrative",))
