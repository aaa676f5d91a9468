"""What an agent is given beyond its first names: governance, check-in and window strategies.

``Agent``, ``LLMCall``, ``RunResult`` and the option objects (``Limits``, ``ModelSettings``,
``Governance``, ``Tracing``) are imported from ``agentfootprint``. Here: ``act(...)`` rules
at five moments answered with ``allow``/``deny``/``ask``, a ``PermissionPolicy`` of
``PermissionRule`` lines, the ``CheckInRequest`` a consequential tool waits on, and the
strategies that choose which part of the conversation the model is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names
from .._lazy import moved_names as _moved_names

if TYPE_CHECKING:
    from ._checkin import CheckInRequest
    from ._moments import act, allow, ask, deny
    from ._permissions import PermissionPolicy, PermissionRule
    from ._window import WindowStrategy, sliding_window, summarize_window, token_budget

_LAZY = {
    **dict.fromkeys(("WindowStrategy", "sliding_window", "summarize_window", "token_budget"),
                    "_window"),
    **dict.fromkeys(("act", "allow", "ask", "deny"), "_moments"),
    **dict.fromkeys(("PermissionPolicy", "PermissionRule"), "_permissions"),
    "CheckInRequest": "_checkin",
}
"""Names loaded on first use: most agents set no window, rules or check-ins."""

_MOVED = {
    **dict.fromkeys(("Agent", "Governance", "LLMCall", "Limits", "ModelSettings", "RunResult",
                     "Tracing", "check_in_approved", "check_in_declined"), "agentfootprint"),
    "WRAP_UP_INSTRUCTION": "agentfootprint.agent._loop",
    "restoring": "agentfootprint.agent._window",
    "windowed_messages": "agentfootprint.runs._window",
}
"""Names this package no longer exports, and where each is imported from (one release)."""

__all__ = [
    "CheckInRequest",
    "PermissionPolicy",
    "PermissionRule",
    "WindowStrategy",
    "act",
    "allow",
    "ask",
    "deny",
    "sliding_window",
    "summarize_window",
    "token_budget",
]

_lazy, __dir__ = _lazy_names(__name__, _LAZY)
_moved = _moved_names(__name__, _MOVED, stacklevel=3)


def __getattr__(name: str) -> Any:
    """A lazy name on first use; else a name that moved, with a DeprecationWarning."""
    return _lazy(name) if name in _LAZY else _moved(name)
