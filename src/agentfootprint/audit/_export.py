"""``audit_export``: a run as an audit bundle — canonical JSON lines, hash-chained.

A bundle is UTF-8 text, one JSON value per line, each line exactly the RFC 8785 canonical bytes
of its value followed by ``\\n``:

* line 0, the **header**: ``format`` (``agentfootprint.audit.v1``), ``run_id``, ``records``
  (how many follow), ``first_seq`` (1), ``final_hash`` (the last record's hash), ``hash_algorithm``
  (``sha256``, or ``hmac-sha256`` when keyed), ``keyed``, ``content`` (``bounded`` or ``full``)
  and ``hash``, the header's own hash over its other fields;
* lines 1…N, the **records**: ``{"seq", "prev_hash", "record", "hash"}`` where ``hash`` is
  SHA-256 (HMAC-SHA-256 with a key) of the canonical bytes of ``{"seq", "prev_hash",
  "record"}`` and ``prev_hash`` is the hash of the record before (64 zeros for the first).

What the records are, and how payloads are bounded, is ``runs/_audit_records.py``; how values
RFC 8785 refuses (NaN, ±Infinity, integers beyond 2**53, lone surrogates) are mapped is
``runs/_chain.py``. The threat model: the chain is tamper-*evident* once its head (``final_hash``)
is published somewhere else or the bundle is keyed (an HMAC key the verifier holds); it is not
tamper-*proof* against someone who can rewrite the whole bundle and every copy of its head.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..runs._audit_records import audit_records
from ..runs._chain import AUDIT_FORMAT, GENESIS, canonical, digest, link_hash
from ..runs._recording import Recording

__all__ = ["FIRST_SEQ", "audit_export", "header_fields"]

FIRST_SEQ: Final = 1
"""The seq of a bundle's first record (the header is line 0)."""
HEADER_FIELDS: Final = frozenset({"format", "run_id", "records", "first_seq", "final_hash",
                                  "hash_algorithm", "keyed", "content", "hash"})


def header_fields() -> frozenset[str]:
    """The keys a header line has, exactly."""
    return HEADER_FIELDS


def _line(value: Mapping[str, Any]) -> bytes:
    return canonical(value) + b"\n"


def audit_export(recording: Recording, *, key: bytes | None = None, full_content: bool = False,
                 proofs: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """The audit bundle of ``recording``: canonical JSON lines, a header and a hash chain.

    Args:
        recording: the run (``Recording.of(result)`` or ``RunStore(...).load(run_id)``),
            already redacted by its policy; nothing is un-redacted.
        key: an HMAC key: every hash becomes HMAC-SHA-256, so only a holder of the key can
            make a bundle that verifies (``verify_audit_bundle(bundle, key=...)``).
        full_content: keep argument values, results and answers; by default a record holds
            argument names, result types and ``[N chars]``, never anyone's words.
        proofs: the proofs a run store kept with the run (``store.proofs(run_id)``), appended
            after the answer, so the chain without them ends where the store's head does.

    Raises ``ConfigurationError`` when the ``rfc8785`` package is missing (the ``[audit]``
    extra) and ``TypeError`` when ``recording`` is not a ``Recording`` or ``key`` not bytes.
    """
    if not isinstance(recording, Recording):
        raise TypeError(f"audit_export needs a Recording, not {type(recording).__name__}; use "
                        "Recording.of(result) or RunStore(...).load(run_id)")
    if key is not None and (not isinstance(key, bytes) or not key):
        raise TypeError("audit_export(key=...) must be non-empty bytes (e.g. "
                        "Path('audit.key').read_bytes()), or None for an unkeyed bundle")
    records = audit_records(recording, full_content=full_content, proofs=proofs)
    lines: list[bytes] = []
    prev = GENESIS
    for seq, record in enumerate(records, start=FIRST_SEQ):
        hashed, body = link_hash(seq, prev, record, key=key)
        # canonical order puts "hash" first: the line is the hashed body with it prepended
        lines.append(b'{"hash":"' + hashed.encode("ascii") + b'",' + body[1:] + b"\n")
        prev = hashed
    header: dict[str, Any] = {
        "format": AUDIT_FORMAT, "run_id": recording.run_id, "records": len(records),
        "first_seq": FIRST_SEQ, "final_hash": prev,
        "hash_algorithm": "hmac-sha256" if key is not None else "sha256",
        "keyed": key is not None, "content": "full" if full_content else "bounded"}
    header["hash"] = digest(canonical(header), key)
    return _line(header) + b"".join(lines)
