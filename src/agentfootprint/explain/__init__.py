"""Explain: backtrack, influence ranking, the ablation proof, recorded chats and the report.

Evidence, then proof: ``backtrack`` walks the recorded chain from an answer to the context
that reached it and ranks the candidates with a proxy score; ``localize_context_bug`` re-runs
the agent without each candidate and is the only thing allowed to say CAUSAL;
``recorded_chat`` keeps a conversation's turns as frozen evidence to reason about, re-run and fork.
"""

from .._lazy import moved_names as _moved_names
from ._backtrack import Backtrack, backtrack
from ._chat import RecordedChat, recorded_chat
from ._criterion import WrongIf, wrong_if
from ._dropped import DroppedContextReport, find_dropped_context
from ._influence import semantic_alignment
from ._integrity import ContextErrorReport, find_context_errors
from ._localize import ContextBugReport, localize_context_bug
from ._self_explain import self_explain
from ._toolpack import trace_debug_agent, trace_toolpack
from .report._render import render_html_report, write_html_report

__getattr__ = _moved_names(__name__, {
    **dict.fromkeys(("PostgresRunStore", "Recording", "RunStore", "RunSummary"),
                    "agentfootprint.runs"),
    "Hop": "agentfootprint.explain._backtrack",
    **dict.fromkeys(("ChatTurn", "TurnReason", "TurnRerun"), "agentfootprint.explain._chat"),
    "dropped_candidates": "agentfootprint.explain._dropped",
    **dict.fromkeys(("content_word_embedder", "lexical_overlap", "list_influence_strategies",
                     "rank_suspects", "ranking_confidence"), "agentfootprint.explain._influence"),
    **dict.fromkeys(("bisect_culprits", "rerun_without_sources"), "agentfootprint.explain._whatif"),
    **dict.fromkeys(("Suspect", "suspects_of"), "agentfootprint.explain._suspects"),
    **dict.fromkeys(("TRACE_TOOL_NAMES", "call_trace_tool"), "agentfootprint.explain._toolpack"),
})

__all__ = [
    "Backtrack",
    "ContextBugReport",
    "ContextErrorReport",
    "DroppedContextReport",
    "RecordedChat",
    "WrongIf",
    "backtrack",
    "find_context_errors",
    "find_dropped_context",
    "localize_context_bug",
    "recorded_chat",
    "render_html_report",
    "self_explain",
    "semantic_alignment",
    "trace_debug_agent",
    "trace_toolpack",
    "write_html_report",
    "wrong_if",
]
