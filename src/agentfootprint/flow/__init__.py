"""The flowchart engine: charts whose every read, write and decision is recorded.

It knows nothing about LLMs and is useful alone: a business pipeline written as a flowchart
explains its own decisions. Everything above it (agents, compositions, memory) is built from
flowcharts, so every trace in the product is a commit log of this kind.

The engine's parts (the commit log's records, causal edges, builders, the key-only redaction
policy) live in their modules; to keep content out of a recording, use
``agentfootprint.runs.RedactionPolicy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names
from ._builder import flow_chart
from ._chart import Chart
from ._decide import Decision, Selection, decide, select
from ._pause import pause
from ._recorders import FlowEvent, deferred
from ._run import FlowRun
from ._scope import Scope

if TYPE_CHECKING:
    from ._causal import CausalChain, causal_chain
    from ._checkpoint import Checkpoint
    from ._narrative import NarrativeRecorder, narrative

__all__ = [
    "CausalChain",
    "Chart",
    "Checkpoint",
    "Decision",
    "FlowEvent",
    "FlowRun",
    "NarrativeRecorder",
    "Scope",
    "Selection",
    "causal_chain",
    "decide",
    "deferred",
    "flow_chart",
    "narrative",
    "pause",
    "select",
]

# Loaded on first use: a run only needs them to pause (checkpoint) or to be explained (causal,
# narrative).
_LAZY = {
    "CausalChain": "_causal", "causal_chain": "_causal",
    "Checkpoint": "_checkpoint",
    "NarrativeRecorder": "_narrative", "narrative": "_narrative",
}

_MOVED = {
    **dict.fromkeys(("BranchBuilder", "FlowBuilder"), "agentfootprint.flow._builder"),
    **dict.fromkeys(("CausalEdge", "CausalNode", "format_causal_chain"),
                    "agentfootprint.flow._causal"),
    "Node": "agentfootprint.flow._chart",
    "load_checkpoint": "agentfootprint.flow._checkpoint",
    **dict.fromkeys(("Change", "CommitLog", "CommitRecord"), "agentfootprint.flow._commitlog"),
    "NarrativeEntry": "agentfootprint.flow._narrative",
    "Pause": "agentfootprint.flow._pause",
    **dict.fromkeys(("Deferred", "ObserverFailure"), "agentfootprint.flow._recorders"),
    **dict.fromkeys(("REDACTED", "RedactionPolicy"), "agentfootprint.flow._redact"),
}
"""Names this package no longer exports, and the module each is imported from (one release)."""

_lazy, __dir__ = _lazy_names(__name__, _LAZY)
_moved = _moved_names(__name__, _MOVED, stacklevel=3, notes={
    "RedactionPolicy": "to keep kinds of content (and keys) out of a recording, use "
                       "agentfootprint.runs.RedactionPolicy"})


def __getattr__(name: str) -> Any:
    """A lazy name on first use; else a name that moved, with a DeprecationWarning."""
    return _lazy(name) if name in _LAZY else _moved(name)
