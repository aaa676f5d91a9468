"""MemoryIdentity and its namespace encoding: injective, reversible, and `..`/`/` are names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.memory import MemoryIdentity
from agentfootprint.memory._identity import (
    decode_identity_field,
    encode_identity_field,
    identity_namespace,
    parse_namespace,
)

tricky = st.sampled_from(["_", ".", "..", "/", "%", "%2F", "%5F", "%2E", "a/b", "_/_", "../x"])
storable = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                   min_size=1, max_size=12)
fields = st.one_of(st.none(), tricky, storable)
identities = st.builds(
    MemoryIdentity,
    conversation_id=st.one_of(tricky, storable),
    principal=fields,
    tenant=fields,
)


@given(identities)
def test_namespace_round_trips(identity: MemoryIdentity) -> None:
    """Decoding a namespace gives back the identity it was encoded from."""
    assert parse_namespace(identity_namespace(identity)) == identity


@given(identities, identities)
def test_namespace_is_injective(a: MemoryIdentity, b: MemoryIdentity) -> None:
    """Two different identities never share a namespace."""
    if a != b:
        assert identity_namespace(a) != identity_namespace(b)


@given(identities)
def test_namespace_has_three_segments_and_no_dot_hops(identity: MemoryIdentity) -> None:
    """A namespace is always three segments and no segment is `.` or `..`."""
    segments = identity_namespace(identity).split("/")
    assert len(segments) == 3
    assert all(s not in (".", "..", "") for s in segments)


def test_reference_examples() -> None:
    """Well-behaved values pass through; slashes, `_` and dot runs are escaped."""
    assert identity_namespace(MemoryIdentity("c1")) == "_/_/c1"
    assert identity_namespace(MemoryIdentity("c1", "alice", "acme")) == "acme/alice/c1"
    assert identity_namespace(MemoryIdentity("c1", "alice", "acme/hr")) == "acme%2Fhr/alice/c1"
    assert identity_namespace(MemoryIdentity("c1", "hr/alice", "acme")) == "acme/hr%2Falice/c1"
    assert identity_namespace(MemoryIdentity("..", tenant="_")) == "%5F/_/%2E%2E"
    assert encode_identity_field("v1.2") == "v1.2"


def test_empty_means_absent() -> None:
    """An empty principal or tenant is the same identity as an absent one."""
    assert MemoryIdentity("c", principal="", tenant="") == MemoryIdentity("c")


def test_bad_identity_refused_without_quoting() -> None:
    """A missing conversation id or non-string field raises TypeError that does not echo it."""
    with pytest.raises(TypeError, match="conversation_id"):
        MemoryIdentity("")
    with pytest.raises(TypeError) as info:
        MemoryIdentity("c", principal=12345)  # type: ignore[arg-type]
    assert "12345" not in str(info.value)


@pytest.mark.parametrize("bad", ["a/b/c/d", "_/_", "_/_/_"])
def test_parse_refuses_non_namespaces(bad: str) -> None:
    """A string that is not three segments with a conversation id is refused."""
    with pytest.raises(ValueError):
        parse_namespace(bad)


def test_decode_refuses_foreign_escapes() -> None:
    """A `%` that is not one of the encoder's escapes is refused."""
    with pytest.raises(ValueError):
        decode_identity_field("%41")
