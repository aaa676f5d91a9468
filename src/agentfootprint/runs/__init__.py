"""What a run records, below every layer that records it.

``runs.trace`` is the trace contract: every run-state key, stage id and id prefix the agent loop,
memory, RAG, tools, context and compositions write, declared once with the kinds of content it
holds. Import it as a module (``from agentfootprint.runs import trace``; ``trace.HISTORY``).
``RedactionPolicy(kinds=...)`` keeps kinds of content out of every recording, resolved through it.
"""

from __future__ import annotations

from .redaction import RedactionPolicy

__all__ = ["RedactionPolicy"]
