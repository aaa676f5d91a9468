"""Sealing a paused run's resume state: the real values leave the process encrypted.

A paused checkpoint must keep the values the run holds (the run state, its input, each
unfinished nesting level's state and input): approving a paused tool call runs it with its
real arguments, also in another process. Under a redaction policy those values are exactly
what the record masks, so with ``RedactionPolicy(seal_key=...)`` they travel as one Fernet
token (authenticated encryption from the ``cryptography`` package, an optional extra):

    {"flow": {..., "sealed": "<token>"}}   # no "state", "args" or "frames" in the clear

The token also binds the run id and the paused step, so a token pasted from another paused
run is refused, and Fernet refuses a token changed by one bit. Opening needs the same key:
a missing key, another key, or a changed token is a ``ConfigurationError`` naming the fix —
never a resume with masked or forged values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

__all__ = ["RESUME_FIELDS", "check_seal_key", "open_resume_state", "seal_resume_state"]

RESUME_FIELDS: Final = ("state", "args", "frames")
"""The fields of a flow checkpoint that hold the run's live values."""
SEALED: Final = "sealed"
_INSTALL: Final = 'pip install "agentfootprint[seal]"'
_FIX: Final = ("resume it with an agent whose Tracing(redaction=RedactionPolicy(..., "
               "seal_key=KEY)) holds the key that sealed it")


def _fernet(key: bytes | str) -> Fernet:
    try:
        from cryptography.fernet import Fernet
    except ImportError as exc:
        raise ConfigurationError(
            f"RedactionPolicy(seal_key=...) needs the cryptography package: {_INSTALL}"
        ) from exc
    try:
        return Fernet(key)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(
            "RedactionPolicy(seal_key=...) is not a Fernet key (32 url-safe base64-encoded "
            "bytes); make one with cryptography.fernet.Fernet.generate_key() and keep it"
        ) from exc


def check_seal_key(key: bytes | str) -> None:
    """Refuse, when the policy is built, a key that could never seal (or a missing package)."""
    _fernet(key)


def seal_resume_state(flow: Mapping[str, Any], key: bytes | str) -> dict[str, Any]:
    """``flow`` (a checkpoint's JSON dict) with its resume fields replaced by one token."""
    sealed = {k: v for k, v in flow.items() if k not in RESUME_FIELDS}
    inside = {k: flow[k] for k in RESUME_FIELDS if k in flow}
    inside["bound"] = _binding(flow)
    sealed[SEALED] = _fernet(key).encrypt(json.dumps(inside).encode()).decode("ascii")
    return sealed


def open_resume_state(flow: Mapping[str, Any], key: bytes | str | None) -> dict[str, Any]:
    """``flow`` with its resume fields back, checked: the inverse of :func:`seal_resume_state`.

    A flow that is not sealed comes back as it is when no key is given; an agent that holds a
    key refuses it (its resume state could have been written by anyone)."""
    token = flow.get(SEALED)
    if token is None:
        if key is not None:
            raise ConfigurationError(
                "this checkpoint's resume state is not sealed, but this agent seals its "
                "checkpoints (RedactionPolicy(seal_key=...)): resume the checkpoint the run "
                "returned, unchanged, or use an agent without seal_key")
        return dict(flow)
    if key is None:
        raise ConfigurationError(
            f"this checkpoint's resume state is sealed and this agent has no key: {_FIX}")
    from cryptography.fernet import InvalidToken

    try:
        inside = json.loads(_fernet(key).decrypt(str(token).encode("ascii")))
    except (InvalidToken, UnicodeEncodeError, ValueError) as exc:
        raise ConfigurationError(
            "this checkpoint's sealed resume state does not open with this agent's key: it "
            f"was sealed with another key, or changed after it was written; {_FIX}, and pass "
            "the checkpoint unchanged") from exc
    if not isinstance(inside, dict) or inside.pop("bound", None) != _binding(flow):
        raise ConfigurationError(
            "this checkpoint's sealed resume state belongs to another paused run (its run id "
            "or paused step differ); resume the checkpoint the run returned, unchanged")
    opened = {k: v for k, v in flow.items() if k != SEALED}
    opened.update({k: v for k, v in inside.items() if k in RESUME_FIELDS})
    return opened


def _binding(flow: Mapping[str, Any]) -> list[Any]:
    return [flow.get("run_id"), flow.get("paused_runtime_stage_id"), flow.get("chart")]
