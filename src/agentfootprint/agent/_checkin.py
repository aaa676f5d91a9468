"""Check-in: consent with receipts, before a tool with consequences runs.

A tool declares ``check_in=True`` (always ask) or ``check_in=fn(args) -> bool`` (ask when it
returns true; a predicate that raises asks too — consent fails closed). When the model calls
it, the run pauses BEFORE the tool runs and ``RunResult.pause["data"]`` is the evidence pack:

* ``will_do`` — the tool, its description and the exact arguments;
* ``context_consumed`` — every piece of context the run had given the model so far;
* ``drivers`` — which of those drove the choice, ranked by token overlap with the call
  (a proxy score, no model call);
* ``trail`` — how the run got here.

The pack is a record too (it is in the checkpoint and in the ``pause.requested`` event): under
a redaction policy what the policy masks reads ``[REDACTED]`` in it, as in the recording. The
checkpoint's resume state keeps the real arguments, so an approved call runs with them.

``agent.resume(checkpoint, check_in_approved(by=...))`` runs the tool;
``check_in_declined(by=..., note=...)`` does not, and the model reads the note and adapts.
Both are recorded (``pause.check_in_settled``) with who decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError

__all__ = ["CheckInRequest", "check_in_approved", "check_in_declined"]


@dataclass(frozen=True, slots=True)
class CheckInRequest:
    """What a person is asked to consent to: ``RunResult.check_in`` of a consent pause."""

    tool: str
    args: dict[str, Any]
    evidence: dict[str, Any]
    """``will_do``, ``context_consumed``, ``drivers`` (ranked, tier proxy) and ``trail``."""


def _who(by: Any) -> str:
    if not isinstance(by, str) or not by.strip():
        raise ConfigurationError("a check-in decision needs by='who decided' (a name or id)")
    return by


def check_in_approved(*, by: str) -> dict[str, Any]:
    """The answer that lets the paused tool run."""
    return {"check_in": "approved", "by": _who(by)}


def check_in_declined(*, by: str, note: str | None = None) -> dict[str, Any]:
    """The answer that refuses the paused tool; the model reads ``note``."""
    return {"check_in": "declined", "by": _who(by), "note": note}
