"""Audit bundles: a run as a hash-chained, canonical JSON file anyone can verify offline.

* ``audit_export(recording)`` — the bundle (bytes): a header and an append-only chain of typed
  records (decisions, LLM calls with usage and cost, tool calls, validation rejections,
  permission verdicts, budgets, the answer, kept proofs), each ``{seq, prev_hash, record,
  hash}`` over RFC 8785 canonical JSON; payloads bounded unless ``full_content=True``; an
  optional HMAC ``key``.
* ``verify_audit_bundle(bundle)`` — ``AuditVerification`` (``ok``, ``records_checked``,
  ``broken_at``, ``reason``); ``agentfootprint audit verify FILE`` on the command line.

Needs the ``rfc8785`` package: ``pip install "agentfootprint[audit]"``. The chain is
tamper-evident once its head is published elsewhere or the bundle is keyed; it is not
tamper-proof against someone who can rewrite the bundle and every copy of its head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._export import audit_export
    from ._verify import AuditVerification, verify_audit_bundle

__all__ = ["AuditVerification", "audit_export", "verify_audit_bundle"]

_LAZY = {"audit_export": "_export", "AuditVerification": "_verify",
         "verify_audit_bundle": "_verify"}

_lazy, __dir__ = _lazy_names(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """A public name, imported on first use."""
    return _lazy(name)
