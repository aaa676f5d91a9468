"""Runs: what a run records and where recordings are kept, below every layer that records.

* ``trace`` — the trace contract: every run-state key, stage id and id prefix the agent loop,
  memory, RAG, tools, context and compositions write, declared once with the kinds of content
  it holds (``from agentfootprint.runs import trace``; ``trace.HISTORY``).
* ``RedactionPolicy(kinds=...)`` — kinds of content kept out of every recording.
* ``Recording`` — one run as portable, versioned JSON; ``RunStore`` (SQLite, the default) and
  ``PostgresRunStore`` keep them, with query tables beside the bodies.

This layer knows flows, not agents: everything above can take a recording or a store with a
real type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names

if TYPE_CHECKING:
    from ._postgres import PostgresRunStore
    from ._recording import Recording
    from ._redaction import RedactionPolicy
    from ._sqlite import RunStore
    from ._store import RunStorePort, RunSummary

__all__ = [
    "PostgresRunStore",
    "Recording",
    "RedactionPolicy",
    "RunStore",
    "RunStorePort",
    "RunSummary",
]

_LAZY = {
    "RunStore": "_sqlite", "PostgresRunStore": "_postgres", "Recording": "_recording",
    "RunStorePort": "_store", "RunSummary": "_store", "RedactionPolicy": "_redaction",
}

_MOVED = {
    **dict.fromkeys(("AgentRun", "RECORDING_FORMAT"), "agentfootprint.runs._recording"),
    "DEFAULT_RUN_STORE": "agentfootprint.runs._sqlite",
    **dict.fromkeys(("RUN_STORE_SCHEMA", "RunSource"), "agentfootprint.runs._store"),
}
"""Names this package no longer exports, and the module each is imported from (one release)."""

_lazy, __dir__ = _lazy_names(__name__, _LAZY)
_moved = _moved_names(__name__, _MOVED, stacklevel=3)


def __getattr__(name: str) -> Any:
    """A lazy name on first use; else a name that moved, with a DeprecationWarning."""
    return _lazy(name) if name in _LAZY else _moved(name)
