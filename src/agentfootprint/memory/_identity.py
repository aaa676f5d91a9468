"""Who a memory belongs to, and the namespace string every store key starts with.

The namespace is ``enc(tenant)/enc(principal)/enc(conversation_id)`` — always three segments.
The per-field encoding is injective and reversible: ``%`` and ``/`` are percent-escaped (``%``
first), a segment made only of dots (``.``, ``..``) is escaped to ``%2E`` runs so it is a name and
never a hop, absence is spelled ``_`` and a real value ``_`` is escaped to ``%5F``. Well-behaved
values (no ``%``, no ``/``, not ``_``, not only dots) pass through byte for byte.

Every store applies one rule to every field, checked when the identity is made: at most
``MAX_IDENTITY_CHARS`` characters, no NUL, no lone surrogate (a Python string that is not
valid Unicode). Those are what some store cannot hold (PostgreSQL text refuses NUL, its index
rows are bounded, UTF-8 cannot encode a surrogate), so an identity that works on SQLite works
on Redis and PostgreSQL too, and a bad one fails before the run, not inside a driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentfootprint.memory._errors import InvalidIdentityError

__all__ = [
    "IDENTITY_ABSENT",
    "MAX_IDENTITY_CHARS",
    "MemoryIdentity",
    "decode_identity_field",
    "encode_identity_field",
    "identity_namespace",
    "parse_namespace",
]

IDENTITY_ABSENT = "_"
"""The one spelling of an absent tenant or principal inside a namespace."""

MAX_IDENTITY_CHARS = 256
"""The longest conversation id, principal or tenant (in characters) any store accepts."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_ESCAPE = re.compile(r"%(25|2F|2E|5F)")
_UNESCAPE = {"25": "%", "2F": "/", "2E": ".", "5F": "_"}


@dataclass(frozen=True, slots=True)
class MemoryIdentity:
    """The isolation tuple of a memory: one conversation, optionally of a principal in a tenant.

    An empty ``principal`` or ``tenant`` means absent and is stored as ``None``, so there is one
    spelling of absence and two equal identities always share one namespace.
    """

    conversation_id: str
    """The thread; stable across runs so history accumulates."""
    principal: str | None = None
    """The end user or service account within the tenant."""
    tenant: str | None = None
    """The organisation or workspace boundary."""

    def __post_init__(self) -> None:
        if not isinstance(self.conversation_id, str) or not self.conversation_id:
            raise TypeError(
                "MemoryIdentity.conversation_id must be a non-empty string; "
                "pass the id of the conversation whose memory this is."
            )
        for name in ("principal", "tenant"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                # The value is never quoted: identity values do not belong in messages.
                raise TypeError(f"MemoryIdentity.{name} must be a string or None.")
            if value == "":
                object.__setattr__(self, name, None)
        for name in ("conversation_id", "principal", "tenant"):
            _check_storable(name, getattr(self, name))

    @property
    def namespace(self) -> str:
        """This identity's namespace (see :func:`identity_namespace`)."""
        return identity_namespace(self)


def _check_storable(name: str, value: str | None) -> None:
    """The one rule every store shares (see the module docstring); the value is never quoted."""
    if value is None:
        return
    if len(value) > MAX_IDENTITY_CHARS:
        raise InvalidIdentityError(
            f"MemoryIdentity.{name} is {len(value)} characters long, over the "
            f"{MAX_IDENTITY_CHARS} every store accepts; pass a shorter id (a hash of the long "
            "one keeps it unique).")
    found = _UNSTORABLE.search(value)
    if found is not None:
        what = ("a NUL character" if found.group() == "\x00"
                else "a lone surrogate (not valid Unicode)")
        raise InvalidIdentityError(
            f"MemoryIdentity.{name} holds {what} at position {found.start()}, which not every "
            "store can keep; remove it, or decode the raw id with errors='replace' first.")


def encode_identity_field(raw: str | None) -> str:
    """Encode one identity field as a namespace segment (injective; ``None``/``''`` → ``_``)."""
    if raw is None or raw == "":
        return IDENTITY_ABSENT
    if not isinstance(raw, str):
        raise TypeError("An identity field must be a string or None.")
    encoded = raw.replace("%", "%25").replace("/", "%2F")
    if encoded == IDENTITY_ABSENT:
        return "%5F"
    if set(encoded) == {"."}:
        return "%2E" * len(encoded)
    return encoded


def decode_identity_field(segment: str) -> str | None:
    """The left inverse of :func:`encode_identity_field`."""
    if segment == IDENTITY_ABSENT:
        return None
    if not segment or "/" in segment:
        raise ValueError(f"{segment!r} is not an encoded identity field.")
    if re.search(r"%(?!25|2F|2E|5F)", segment):
        raise ValueError(f"{segment!r} holds a '%' that is not one of our escapes.")
    return _ESCAPE.sub(lambda m: _UNESCAPE[m.group(1)], segment)


def identity_namespace(identity: MemoryIdentity) -> str:
    """``enc(tenant)/enc(principal)/enc(conversation_id)``: collision-free and reversible."""
    return "/".join(
        (
            encode_identity_field(identity.tenant),
            encode_identity_field(identity.principal),
            encode_identity_field(identity.conversation_id),
        )
    )


def parse_namespace(namespace: str) -> MemoryIdentity:
    """Decode a namespace back into the identity it was made from."""
    parts = namespace.split("/")
    if len(parts) != 3:
        raise ValueError(f"{namespace!r} is not a memory namespace (want three segments).")
    tenant, principal, conversation_id = (decode_identity_field(p) for p in parts)
    if conversation_id is None:
        raise ValueError(f"{namespace!r} has no conversation id.")
    return MemoryIdentity(conversation_id, principal=principal, tenant=tenant)
