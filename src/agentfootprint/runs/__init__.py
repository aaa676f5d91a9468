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

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .redaction import RedactionPolicy

if TYPE_CHECKING:
    from .postgres import PostgresRunStore
    from .recording import RECORDING_FORMAT, AgentRun, Recording
    from .sqlite import DEFAULT_RUN_STORE, RunStore
    from .store import RUN_STORE_SCHEMA, RunSource, RunStorePort, RunSummary

__all__ = [
    "DEFAULT_RUN_STORE",
    "RECORDING_FORMAT",
    "RUN_STORE_SCHEMA",
    "AgentRun",
    "PostgresRunStore",
    "Recording",
    "RedactionPolicy",
    "RunSource",
    "RunStore",
    "RunStorePort",
    "RunSummary",
]

__getattr__, __dir__ = _lazy_names(__name__, {
    "DEFAULT_RUN_STORE": "sqlite", "RunStore": "sqlite", "PostgresRunStore": "postgres",
    "RECORDING_FORMAT": "recording", "AgentRun": "recording", "Recording": "recording",
    "RUN_STORE_SCHEMA": "store", "RunSource": "store", "RunStorePort": "store",
    "RunSummary": "store",
})
