"""The hash chain under an audit bundle: canonical bytes, link hashes, and a stored run's head.

A run's audit chain is its typed records (``_audit_records.py``) linked one to the next: record
``seq`` is hashed together with the hash of the record before it, over the RFC 8785 canonical
JSON bytes (the ``rfc8785`` package — a standard, so any other implementation can recompute
every hash) of ``{"seq", "prev_hash", "record"}``. The first record links to :data:`GENESIS`.
With a key the hash is HMAC-SHA-256, else SHA-256. The hash of the last record is the chain's
**head**: publish it (or key the chain) and any later edit of the run shows.

It lives here, below ``audit``, because a run store computes the head when it saves a run
(``RunStore.save``): the head kept beside the body is the final hash of the default bundle
``audit_export(recording)`` gives (bounded payloads, no key, no proofs), so an edited answer
read back from the store no longer matches it (:func:`check_chain_head`). Without ``rfc8785``
installed (a core-only install) no head is computed and the save goes on without one.

**Values RFC 8785 refuses** are mapped before canonicalization (:func:`jsonable`), the same way
a stored recording already spells them, so a run hashes the same before and after the store:
``NaN``, ``Infinity`` and ``-Infinity`` become those strings (as ``Recording.to_json`` writes
them); an integer beyond ±(2**53 − 1) becomes its decimal digits as a string (RFC 7493's
advice for big numbers); a lone surrogate in text becomes its ``\\uXXXX`` escape as plain text;
a non-string object key becomes its JSON spelling (``1`` → ``"1"``, ``None`` → ``"null"``).
The mapping is not reversible — a float ``NaN`` and the text ``"NaN"`` hash alike — which is
the recording's own limit: its JSON cannot tell them apart either.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..errors import ConfigurationError
from ._recording import Recording

__all__ = ["AUDIT_FORMAT", "GENESIS", "ChainCheck", "canonical", "chain_head",
           "check_chain_head", "digest", "head_for_save", "jsonable", "link_hash",
           "rfc8785_available", "stored_head"]

AUDIT_FORMAT: Final = "agentfootprint.audit.v1"
"""The bundle format this release writes and verifies (and the tag of a stored head)."""
GENESIS: Final = "0" * 64
"""The ``prev_hash`` of a chain's first record."""
_MAX_SAFE: Final = 2**53 - 1
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_INSTALL: Final = 'pip install "agentfootprint[audit]"'
_log = logging.getLogger("agentfootprint.runs")
_said: list[bool] = []


def rfc8785_available() -> bool:
    """True when the ``rfc8785`` package can be imported (the ``[audit]`` extra)."""
    try:
        import rfc8785  # noqa: F401
    except ImportError:
        return False
    return True


def _dumps() -> Callable[[Any], bytes]:
    try:
        import rfc8785
    except ImportError as exc:
        raise ConfigurationError(
            f"audit bundles need the rfc8785 package (canonical JSON, RFC 8785), which is not "
            f"installed; install it with: {_INSTALL}") from exc
    dumps: Callable[[Any], bytes] = rfc8785.dumps
    return dumps


def jsonable(value: Any) -> Any:
    """``value`` with every part RFC 8785 refuses mapped as the module docstring says."""
    kind = type(value)
    if kind is str:  # the common cases first: a chain is mostly short text and ids
        return value if value.isascii() else _SURROGATE.sub(_escaped, value)
    if kind is dict:
        return {k if type(k) is str and k.isascii() else _key(k): jsonable(item)
                for k, item in value.items()}
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _SURROGATE.sub(_escaped, value)
    if isinstance(value, int):
        return value if -_MAX_SAFE <= value <= _MAX_SAFE else str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, Mapping):
        return {_key(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return jsonable(str(value))


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _key(key: object) -> str:
    if isinstance(key, str):
        return str(jsonable(key))
    if key is None or isinstance(key, bool):
        return "null" if key is None else "true" if key else "false"
    return str(key)


def canonical(value: Any) -> bytes:
    """The RFC 8785 canonical bytes of ``value`` (mapped by :func:`jsonable` first)."""
    return _dumps()(jsonable(value))


def _digest(data: bytes, key: bytes | None) -> str:
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def link_hash(seq: int, prev_hash: str, record: Mapping[str, Any], *,
              key: bytes | None = None) -> tuple[str, bytes]:
    """The hash of one link and the canonical bytes it was computed over."""
    body = canonical({"seq": seq, "prev_hash": prev_hash, "record": record})
    return _digest(body, key), body


def digest(data: bytes, key: bytes | None = None) -> str:
    """SHA-256 (HMAC-SHA-256 with ``key``) of ``data``, as hex."""
    return _digest(data, key)


def chain_head(recording: Recording, *, body: str | None = None) -> str | None:
    """The stored form of ``recording``'s head (``agentfootprint.audit.v1:<hex>``): the final
    hash of its default bundle. ``None`` when ``rfc8785`` is not installed (nothing to keep).
    ``body`` is the recording's JSON when the caller has it already (a store saving it)."""
    if not rfc8785_available():
        return None
    from ._audit_records import audit_records

    found = audit_records(recording, body=body)
    prev = GENESIS
    for seq, record in enumerate(found, start=1):
        prev, _ = link_hash(seq, prev, record)
    return f"{AUDIT_FORMAT}:{prev}"


def head_for_save(recording: Recording, body: str) -> str | None:
    """The head a run store keeps with ``recording`` (its JSON ``body``), or None.

    A save never fails for it: without ``rfc8785`` the run is kept with no head (said once,
    on the ``agentfootprint.runs`` logger), and a recording the chain cannot read is kept
    with none either (logged), since losing the run would be worse than losing its head.
    """
    if not rfc8785_available():
        if not _said:
            _said.append(True)
            _log.warning("rfc8785 is not installed, so runs are saved without an audit chain "
                         "head (explain cannot tell an edited run); install it with: %s",
                         _INSTALL)
        return None
    try:
        return chain_head(recording, body=body)
    except Exception:  # never lose the run for its head
        _log.exception("run %r saved without an audit chain head: its records could not be "
                       "read", recording.run_id)
        return None


def stored_head(head: str | None) -> str | None:
    """The hex hash inside a stored head of this format (None for another format or none)."""
    if head is None or not head.startswith(AUDIT_FORMAT + ":"):
        return None
    return head[len(AUDIT_FORMAT) + 1:]


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """A stored run against the chain head kept when it was saved."""

    status: Literal["intact", "broken", "absent", "unchecked"]
    """``intact``: it matches; ``broken``: the run was changed after it was saved; ``absent``:
    no head was kept (an older store, a run still running, a core-only install);
    ``unchecked``: a head is kept but cannot be checked here (another format, no rfc8785)."""
    sentence: str

    @property
    def broken(self) -> bool:
        return self.status == "broken"


def check_chain_head(recording: Recording, head: str | None) -> ChainCheck:
    """Recompute ``recording``'s head and compare it with the ``head`` its store kept.

    The one place a stored run is checked against its chain (the CLI's ``explain`` and
    ``report`` call it); a mismatch means the body was edited after it was saved.
    """
    run = recording.run_id
    if head is None:
        return ChainCheck("absent", f"run {run!r} was stored without a chain head (saved by "
                          "an older release, still running, or without rfc8785); it cannot be "
                          "checked against one")
    kept = stored_head(head)
    if kept is None:
        return ChainCheck("unchecked", f"run {run!r} carries a chain head of another format "
                          f"({head.split(':', 1)[0]!r}); this release checks {AUDIT_FORMAT}")
    now = chain_head(recording)
    if now is None:
        return ChainCheck("unchecked", f"run {run!r} carries a chain head but rfc8785 is not "
                          f"installed to check it; install it with: {_INSTALL}")
    if stored_head(now) == kept:
        return ChainCheck("intact", f"run {run!r} matches the chain head kept when it was "
                          f"saved ({kept[:16]}…)")
    return ChainCheck(
        "broken",
        f"TAMPERED: run {run!r} no longer matches the chain head kept when it was saved "
        f"(kept {kept[:16]}…, now {str(stored_head(now))[:16]}…): its recording was edited "
        "after saving, so what follows explains the edited run, not the run as it happened")
