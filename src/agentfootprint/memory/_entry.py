"""``MemoryEntry``: one stored item of memory, with its provenance.

Timestamps are unix milliseconds. ``expires_at`` is an absolute expiry: an entry is expired when
``expires_at <= now``, and stores never return an expired entry from any read.
"""

from __future__ import annotations

import math
import time
from array import array
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from agentfootprint.memory._identity import MemoryIdentity

__all__ = ["MemoryEntry", "MemorySource", "Tier", "now_ms", "turn_of"]

Tier = Literal["hot", "warm", "cold"]
"""A MemGPT-style storage class; tier-filtered reads skip untiered entries."""


def now_ms() -> int:
    """The current wall-clock time in unix milliseconds."""
    return time.time_ns() // 1_000_000


class MemorySource(BaseModel):
    """Where an entry came from: the turn that wrote it and whose conversation it was."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int | None = None
    """The turn number that wrote the entry; ``None`` or ``<= 0`` means unnumbered."""
    identity: MemoryIdentity | None = None
    """The identity of the run that wrote it, round-tripped verbatim by every store."""
    runtime_stage_id: str | None = None
    """The stage run that wrote it, when known."""
    message_id: str | None = None
    """The message it records, when it records one."""


class MemoryEntry(BaseModel):
    """One item of memory. Ids are deterministic and turn-stamped, so re-runs overwrite."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    """Stable id within the identity's namespace (``msg-{turn}-{index}``, ``snap-{turn}``…)."""
    value: JsonValue
    """The payload; any JSON value."""
    source: MemorySource | None = None
    """Provenance: turn and identity of the writer."""
    tier: Tier | None = None
    """Storage class, or ``None`` for untiered."""
    metadata: dict[str, JsonValue] | None = None
    """Free-form annotations (a summary lists what it covers under ``"summarizes"``)."""
    version: int = Field(default=1, ge=1)
    """Optimistic-concurrency counter; 1 on first write, callers increment."""
    created_at: int = Field(default_factory=now_ms)
    """Unix ms of the first write."""
    updated_at: int = -1
    """Unix ms of the latest write; defaults to ``created_at``. Lists sort by it, newest first."""
    expires_at: int | None = None
    """Absolute expiry in unix ms; expired when ``expires_at <= now``. ``None`` never expires."""
    signature: str | None = None
    """A content signature the writer also records with ``record_signature`` to dedupe."""
    embedding: list[float] | None = None
    """A vector for similarity search, held as float32 (values are rounded to float32 on
    construction, so every store round-trips it exactly)."""
    embedding_model: str | None = None
    """The id of the embedder that produced ``embedding``; searches skip other embedders'."""

    @field_validator("embedding")
    @classmethod
    def _float32(cls, value: list[float] | None) -> list[float] | None:
        if value is None:
            return None
        if not value or not all(math.isfinite(x) for x in value):
            raise ValueError("an embedding must be a non-empty list of finite numbers")
        return array("f", value).tolist()

    @model_validator(mode="after")
    def _default_updated_at(self) -> MemoryEntry:
        if self.updated_at == -1:
            object.__setattr__(self, "updated_at", self.created_at)
        return self

    @classmethod
    def with_ttl(cls, *, ttl_ms: int, now: int | None = None, **fields: object) -> MemoryEntry:
        """Build an entry that expires ``ttl_ms`` after ``now`` (default: the current time)."""
        start = now_ms() if now is None else now
        fields.setdefault("created_at", start)
        return cls.model_validate({**fields, "expires_at": start + ttl_ms})

    def is_expired(self, now: int) -> bool:
        """True when this entry must be invisible to reads at unix-ms time ``now``."""
        return self.expires_at is not None and self.expires_at <= now


def turn_of(entry: MemoryEntry) -> int:
    """The entry's turn number: ``source.turn`` floored, and 0 when absent or ``<= 0``."""
    turn = entry.source.turn if entry.source is not None else None
    if turn is None or isinstance(turn, bool) or not math.isfinite(turn):
        return 0
    return max(0, math.floor(turn))
