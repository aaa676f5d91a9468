"""Moved to ``agentfootprint.runs.sqlite``; this path works for one release and warns."""

from .._lazy import moved_module
from ..runs.sqlite import DEFAULT_RUN_STORE, RunStore
from ..runs.store import RunSummary

moved_module(__name__, "agentfootprint.runs")

__all__ = ['DEFAULT_RUN_STORE', 'RunStore', 'RunSummary']
