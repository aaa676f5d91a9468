"""Explain: recordings, the run store, backtrack, influence ranking and the ablation proof.

Evidence, then proof: ``backtrack`` walks the recorded chain from an answer to the context
that reached it and ranks the candidates with a proxy score; ``localize_context_bug`` re-runs
the agent without each candidate and is the only thing allowed to say CAUSAL;
``recorded_chat`` keeps a conversation's turns as frozen evidence to reason about, re-run and fork.
"""

from .._lazy import moved_names as _moved_names
from .backtrack import Backtrack, Hop, backtrack
from .chat import ChatTurn, RecordedChat, TurnReason, TurnRerun, recorded_chat
from .dropped import DroppedContextReport, dropped_candidates, find_dropped_context
from .influence import (
    content_word_embedder,
    lexical_overlap,
    list_influence_strategies,
    rank_suspects,
    ranking_confidence,
    semantic_alignment,
)
from .localize import ContextBugReport, localize_context_bug
from .report import render_html_report, write_html_report
from .rerun import bisect_culprits, rerun_without_sources
from .suspects import Suspect, suspects_of
from .toolpack import TRACE_TOOL_NAMES, call_trace_tool, trace_debug_agent, trace_toolpack

__getattr__ = _moved_names(__name__, {
    name: "agentfootprint.runs"
    for name in ("PostgresRunStore", "Recording", "RunStore", "RunSummary")})

__all__ = [
    "TRACE_TOOL_NAMES",
    "Backtrack",
    "ChatTurn",
    "ContextBugReport",
    "DroppedContextReport",
    "Hop",
    "RecordedChat",
    "Suspect",
    "TurnReason",
    "TurnRerun",
    "backtrack",
    "bisect_culprits",
    "call_trace_tool",
    "content_word_embedder",
    "dropped_candidates",
    "find_dropped_context",
    "lexical_overlap",
    "list_influence_strategies",
    "localize_context_bug",
    "rank_suspects",
    "ranking_confidence",
    "recorded_chat",
    "render_html_report",
    "rerun_without_sources",
    "semantic_alignment",
    "suspects_of",
    "trace_debug_agent",
    "trace_toolpack",
    "write_html_report",
]
