"""``verify_audit_bundle``: check an audit bundle offline and name its first broken record.

The check is of bytes, not of meaning: each line must be valid UTF-8, parse as JSON, and be
exactly the RFC 8785 canonical bytes of what it parses to (then ``\\n``); the header's own hash
must hold; every record's ``seq`` must follow the one before, its ``prev_hash`` must be that
record's hash and its ``hash`` must be recomputed from it; and the header's record count and
final hash must match the chain, so a record removed from the end is caught like any other.

``broken_at`` names the first line that fails, by the seq it should carry: ``0`` for the
header, ``1``…``N`` for the records, ``N + 1`` for a line beyond the header's count. A removed
record is reported at the seq that is missing; a reordered or inserted one at the first place
the chain differs from the one that was exported.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..runs._chain import AUDIT_FORMAT, GENESIS, canonical, digest, link_hash
from ._export import header_fields

__all__ = ["AuditVerification", "verify_audit_bundle"]

_RECORD_FIELDS = frozenset({"seq", "prev_hash", "record", "hash"})
_MAX_SAFE = 2**53 - 1


class AuditVerification(BaseModel):
    """What ``verify_audit_bundle`` found."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    """True when every line, hash and link holds and the header matches the chain."""
    records_checked: int
    """How many records verified before the first break (all of them when ``ok``)."""
    broken_at: int | None
    """The seq of the first broken line (0: the header); None when ``ok``."""
    reason: str
    """One sentence: what holds, or what broke there."""
    run_id: str | None = None
    """The run the header names (None when the header itself is unreadable)."""
    final_hash: str | None = None
    """The chain's head as the header states it: compare it with the one published."""


class _Broken(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _number(text: str) -> int | float:
    """A JSON integer as I-JSON reads it: exact within ±(2**53 − 1), else a double (RFC 8785
    writes a large whole double such as 2**53 without a fraction, and bundles never hold an
    integer beyond that range: it is mapped to text before hashing)."""
    value = int(text)
    return value if -_MAX_SAFE <= value <= _MAX_SAFE else float(text)


def _parsed(line: bytes, what: str) -> dict[str, Any]:
    """``line`` as a JSON object whose canonical bytes it is exactly; else ``_Broken``."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Broken(f"{what} is not valid UTF-8 (byte {exc.object[exc.start]:#04x} at "
                      f"offset {exc.start})") from exc
    try:
        value = json.loads(text, parse_constant=_no_constants, parse_int=_number)
    except ValueError as exc:
        raise _Broken(f"{what} is not a JSON line ({exc})") from exc
    if not isinstance(value, dict):
        raise _Broken(f"{what} is not a JSON object")
    try:
        again = canonical(value)
    except ValueError as exc:  # rfc8785 refuses it (a number out of range): not canonical
        raise _Broken(f"{what} is not canonical JSON ({exc})") from exc
    if again != line:
        raise _Broken(f"{what} is not in canonical form (RFC 8785): it was edited or "
                      "re-serialized")
    return value


def _same(a: str, b: object) -> bool:
    return isinstance(b, str) and hmac.compare_digest(a.encode(), b.encode())


def _header(line: bytes, key: bytes | None) -> dict[str, Any]:
    header = _parsed(line, "the header")
    if set(header) != header_fields():
        raise _Broken("the header's fields are not those of an audit bundle (missing or extra "
                      f"{sorted(set(header) ^ header_fields())})")
    if header["format"] != AUDIT_FORMAT:
        raise _Broken(f"the header's format {header['format']!r} is not {AUDIT_FORMAT!r}")
    keyed = header["keyed"]
    if keyed is True and key is None:
        raise _Broken("the bundle is HMAC-keyed; pass its key (key=..., --key-file)")
    if keyed is False and key is not None:
        raise _Broken("a key was given but the bundle is not keyed: someone may have "
                      "rewritten it without the key")
    expected = "hmac-sha256" if key is not None else "sha256"
    if header["hash_algorithm"] != expected:
        raise _Broken(f"the header's hash_algorithm {header['hash_algorithm']!r} is not "
                      f"{expected!r}")
    for name in ("records", "first_seq"):
        if not isinstance(header[name], int) or isinstance(header[name], bool) or \
                header[name] < 0:
            raise _Broken(f"the header's {name} is not a count")
    stated = header["hash"]
    if not _same(digest(canonical({k: v for k, v in header.items() if k != "hash"}), key),
                 stated):
        raise _Broken("the header's hash does not match it: the header was edited"
                      + (" or the key is wrong" if key is not None else ""))
    return header


def verify_audit_bundle(bundle: bytes, *, key: bytes | None = None) -> AuditVerification:
    """Check ``bundle`` (the bytes ``audit_export`` wrote) and name its first broken record.

    ``key`` is the HMAC key the bundle was exported with (None for an unkeyed one); a keyed
    bundle without its key, or an unkeyed one with a key, does not verify. Raises
    ``TypeError`` for a ``bundle`` that is not bytes and ``ConfigurationError`` when the
    ``rfc8785`` package is missing.
    """
    if not isinstance(bundle, bytes | bytearray | memoryview):
        raise TypeError(f"verify_audit_bundle needs the bundle's bytes, not "
                        f"{type(bundle).__name__}; read the file with Path(...).read_bytes()")
    if key is not None and (not isinstance(key, bytes) or not key):
        raise TypeError("verify_audit_bundle(key=...) must be non-empty bytes, or None")
    lines = bytes(bundle).split(b"\n")
    tail = lines.pop()  # b"" when the bundle ends with its final newline, as written
    if tail:
        lines.append(tail)  # an unterminated last line: checked (and refused) like the rest
    run_id = final = None
    try:
        if not lines or lines == [b""]:
            raise _Broken("the bundle is empty")
        if len(lines) == 1 and tail:
            raise _Broken("the header does not end with a newline: the bundle was cut")
        header = _header(lines[0], key)
        run_id = header["run_id"] if isinstance(header["run_id"], str) else None
        final = header["final_hash"] if isinstance(header["final_hash"], str) else None
    except _Broken as exc:
        return AuditVerification(ok=False, records_checked=0, broken_at=0, reason=exc.reason,
                                 run_id=run_id, final_hash=final)
    first, count = header["first_seq"], header["records"]
    prev = GENESIS
    checked = 0
    for position, raw in enumerate(lines[1:]):
        seq = first + position
        what = f"record {seq}"
        try:
            if position >= count:
                raise _Broken(f"{what} is beyond the {count} record(s) the header counts: a "
                              "record was inserted or appended")
            terminated = position + 1 < len(lines) - 1 or not tail
            if not terminated:
                raise _Broken(f"{what} does not end with a newline: the bundle was cut or "
                              "edited")
            value = _parsed(raw, what)
            if set(value) != _RECORD_FIELDS:
                raise _Broken(f"{what} does not have the fields seq, prev_hash, record, hash")
            if value["seq"] != seq or isinstance(value["seq"], bool):
                raise _Broken(f"{what} carries seq {value['seq']!r}: a record was removed, "
                              "inserted or moved here")
            if not _same(prev, value["prev_hash"]):
                raise _Broken(f"{what}'s prev_hash is not the hash of the record before it")
            if not isinstance(value["record"], dict):
                raise _Broken(f"{what}'s record is not a JSON object")
            hashed, _ = link_hash(seq, prev, value["record"], key=key)
            if not _same(hashed, value["hash"]):
                raise _Broken(f"{what}'s hash does not match its content: it was edited"
                              + (" or the key is wrong" if key is not None else ""))
        except _Broken as exc:
            return AuditVerification(ok=False, records_checked=checked, broken_at=seq,
                                     reason=exc.reason, run_id=run_id, final_hash=final)
        prev = hashed
        checked += 1
    if checked < count:
        return AuditVerification(
            ok=False, records_checked=checked, broken_at=first + checked, run_id=run_id,
            final_hash=final, reason=f"record {first + checked} is missing: the header counts "
            f"{count} record(s), the bundle holds {checked}")
    if not _same(prev, header["final_hash"]):
        return AuditVerification(
            ok=False, records_checked=checked, broken_at=0, run_id=run_id, final_hash=final,
            reason="the header's final_hash is not the last record's hash")
    return AuditVerification(
        ok=True, records_checked=checked, broken_at=None, run_id=run_id, final_hash=final,
        reason=f"all {checked} record(s) of run {run_id!r} verify; head {prev}")
