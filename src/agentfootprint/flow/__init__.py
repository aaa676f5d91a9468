"""The flowchart engine: charts whose every read, write and decision is recorded.

It knows nothing about LLMs and is useful alone: a business pipeline written as a flowchart
explains its own decisions. Everything above it (agents, compositions, memory) is built from
flowcharts, so every trace in the product is a commit log of this kind.
"""

from .builder import BranchBuilder, FlowBuilder, flow_chart
from .causal import CausalChain, CausalEdge, CausalNode, causal_chain, format_causal_chain
from .chart import Chart, Node
from .checkpoint import Checkpoint, load_checkpoint
from .commitlog import Change, CommitLog, CommitRecord
from .decide import Decision, Selection, decide, select
from .narrative import NarrativeEntry, NarrativeRecorder, narrative
from .pause import Pause, pause
from .recorders import Deferred, FlowEvent, ObserverFailure, deferred
from .redact import REDACTED, RedactionPolicy
from .run import FlowRun
from .scope import Scope

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
