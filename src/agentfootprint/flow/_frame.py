"""One traversal's context (``Frame``) and one executing stage's identity (``Step``).

A frame is a namespace's state and control flags, with the run's redaction policy and the
run's :class:`~agentfootprint.flow._redact.RunSecrets` (one object shared by every frame of a
run, so a value masked in a subflow is masked everywhere). The engine creates them; scopes read
and write through them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._recorders import Dispatcher
from ._redact import RedactionPolicy, RunSecrets

__all__ = ["Frame", "Step"]


class Frame:
    """One traversal's context: the namespace it reads and writes, and its control flags."""

    __slots__ = (
        "_redacted",
        "args",
        "break_reason",
        "depth",
        "dispatch",
        "env",
        "loops",
        "ns",
        "readonly",
        "redaction",
        "run_id",
        "secrets",
        "state",
    )

    def __init__(self, *, ns: str, state: dict[str, Any], args: Mapping[str, Any],
                 env: Mapping[str, Any], readonly: frozenset[str], dispatch: Dispatcher,
                 redaction: RedactionPolicy | None, run_id: str, depth: int,
                 secrets: RunSecrets | None = None) -> None:
        self.ns = ns
        self.state = state
        self.args = args
        self.env = env
        self.readonly = readonly
        self.dispatch = dispatch
        self.redaction = redaction
        self.run_id = run_id
        self.secrets = secrets if secrets is not None else RunSecrets(redaction)
        """What the run's record must not show in the clear (one object for the whole run)."""
        self.break_reason: str | None = None
        self.loops: dict[str, int] = {}
        self.depth = depth

    def redacts(self, key: str) -> bool:
        policy = self.redaction
        return policy is not None and policy.is_redacted(key)

    def shown(self, key: str, value: object) -> Any:
        """``value`` as the record may show it under ``key``: masked when the key is redacted,
        and with no string repeating what the run masked elsewhere."""
        policy = self.redaction
        secrets = self.secrets
        if policy is None or not policy.is_redacted(key):
            return secrets.scrub(value)
        shown = policy.redact_value(key, value)
        secrets.learn(value, shown)
        return secrets.scrub(shown)

    def child(self) -> Frame:
        """Same namespace and state, own break flag and loop counters (a parallel child)."""
        return Frame(ns=self.ns, state=self.state, args=self.args, env=self.env,
                     readonly=self.readonly, dispatch=self.dispatch, redaction=self.redaction,
                     run_id=self.run_id, depth=self.depth + 1, secrets=self.secrets)


class Step:
    """The identity of one executing stage, shared by its scope and its record."""

    __slots__ = ("break_reason", "rid", "stage", "stage_id")

    def __init__(self, rid: str, stage_id: str, stage: str) -> None:
        self.rid = rid
        self.stage_id = stage_id
        self.stage = stage
        self.break_reason: str | None = None
