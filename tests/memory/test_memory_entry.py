"""MemoryEntry defaults, expiry, JSON round trip and turn extraction."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentfootprint.memory import MemoryEntry, MemoryIdentity, MemorySource
from agentfootprint.memory._entry import turn_of


def test_updated_at_defaults_to_created_at() -> None:
    """A first write has updated_at == created_at."""
    e = MemoryEntry(id="a", value=1, created_at=42)
    assert e.updated_at == 42


def test_with_ttl_sets_absolute_expiry() -> None:
    """with_ttl turns a relative TTL into an absolute expires_at; expiry is inclusive."""
    e = MemoryEntry.with_ttl(ttl_ms=100, now=1000, id="a", value=None)
    assert e.expires_at == 1100
    assert not e.is_expired(1099) and e.is_expired(1100)


def test_json_round_trip_keeps_source_identity() -> None:
    """An entry survives JSON serialisation, identity included."""
    e = MemoryEntry(
        id="msg-3-1", value={"a": [1]}, source=MemorySource(turn=3, identity=MemoryIdentity("c"))
    )
    assert MemoryEntry.model_validate_json(e.model_dump_json()) == e


def test_entry_is_frozen_and_strict() -> None:
    """Entries are immutable, need an id and refuse unknown fields and tiers."""
    e = MemoryEntry(id="a", value=1)
    with pytest.raises(ValidationError):
        e.id = "b"  # type: ignore[misc]
    for bad in (
        {"id": "", "value": 1},
        {"id": "a", "value": 1, "bogus": 1},
        {"id": "a", "value": 1, "tier": "lukewarm"},
    ):
        with pytest.raises(ValidationError):
            MemoryEntry.model_validate(bad)


@pytest.mark.parametrize(
    ("source", "turn"),
    [
        (None, 0),
        (MemorySource(), 0),
        (MemorySource(turn=-3), 0),
        (MemorySource(turn=0), 0),
        (MemorySource(turn=7), 7),
    ],
)
def test_turn_of(source: MemorySource | None, turn: int) -> None:
    """turn_of is source.turn, with absent or non-positive turns counting as 0 (unnumbered)."""
    assert turn_of(MemoryEntry(id="a", value=None, source=source)) == turn
