"""Content stored once, as a property: any JSON object with large strings anywhere (repeated,
nested, under keys that look like the stored form's own) reads back exactly as it was given."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfootprint.errors import RunError
from agentfootprint.runs import _content as content

SMALL_LARGE = 8
"""The threshold these tests run under, so hypothesis's short strings count as large too."""

keys = st.sampled_from(["$refs", "$$refs", "$content", "refs", "a", "", "é"]) | st.text(max_size=6)
texts = st.sampled_from(["x" * 9, "y" * 40, "é" * 3, "\ud800 lone surrogate", "[REDACTED]"]) \
    | st.text(max_size=30)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(keys, inner, max_size=5), max_leaves=25)
objects = st.dictionaries(keys, values, max_size=6)


def _no_rows(wanted: list[str]) -> dict[str, str]:
    raise AssertionError("a body without references must not read the contents")


@settings(max_examples=100, deadline=None)
@given(objects)
def test_pack_then_unpack_is_the_identity(data: dict[str, Any]) -> None:
    """``unpack(pack(x)) == x``; x is untouched; each distinct string is kept once."""
    before = json.dumps(data)
    with mock.patch.object(content, "LARGE", SMALL_LARGE):
        body, strings = content.pack(data)
        stored = json.dumps(body)
        assert content.unpack(body, strings) == data
        assert json.dumps(body) == stored  # the stored form is read, never changed
    assert json.dumps(data) == before
    assert all(content.address_of(text) == address for address, text in strings.items())
    if not strings and not any(key.endswith("refs") and set(key[:-4]) == {"$"} for key in data):
        assert body is data  # nothing to keep: the very object, no copy
    else:
        assert next(iter(body)) == content.REFS  # the index first: a reader knows at once


@settings(max_examples=100, deadline=None)
@given(objects)
def test_a_kept_body_reads_back_as_its_json(data: dict[str, Any]) -> None:
    """Through text and the contents rows, as a store writes and reads them."""
    text = json.dumps(data)
    with mock.patch.object(content, "LARGE", SMALL_LARGE):
        stored = content.kept(text)
        assert content.kept(text, data) == stored  # the source's quick look agrees
    rows = stored.contents
    fetch = (lambda wanted: {a: rows[a] for a in wanted if a in rows}) if rows else _no_rows
    back = content.read_body(stored.text, fetch, what="a body")
    assert json.loads(back) == data
    for row in rows.values():  # every row is text a store can encode
        row.encode("utf-8")
    stored.text.encode("utf-8")


def test_a_missing_or_misplaced_reference_is_refused() -> None:
    """A row gone, or a path that no longer leads to its marker, is an error naming it."""
    text = json.dumps({"a": "z" * 5000, "b": ["z" * 5000, 1]})
    stored = content.kept(text)
    (address,) = stored.contents
    with pytest.raises(RunError, match=f"{address} it references is missing"):
        content.read_body(stored.text, lambda wanted: {}, what="a body")
    moved = json.loads(stored.text)
    moved["$refs"][0][0] = ["b", 1]
    with pytest.raises(RunError, match=f"no reference to {address} stands at"):
        content.read_body(json.dumps(moved), lambda wanted: stored.contents, what="a body")


lines = st.lists(st.sampled_from(["", "a", "bb\n", "line\n", "\n", "é\r\n", "long" * 9, "\u2028"]),
                 max_size=60).map("".join)


@settings(max_examples=100, deadline=None)
@given(lines)
def test_chunks_join_back_to_the_text(text: str) -> None:
    """Chunks are non-empty, bounded, and join to the text exactly."""
    with mock.patch.multiple(content, CHUNK_MIN=8, CHUNK_MAX=24):
        chunks = content.chunks_of(text)
    assert "".join(chunks) == text and all(chunks)
    assert all(len(chunk) < 48 for chunk in chunks)


@settings(max_examples=100, deadline=None)
@given(objects)
def test_a_body_kept_in_chunks_reads_back_as_its_json(data: dict[str, Any]) -> None:
    """With chunking from 16 characters, rows list chunks and the body still reads back."""
    text = json.dumps(data)
    with mock.patch.multiple(content, LARGE=SMALL_LARGE, CHUNKED=16, CHUNK_MIN=4, CHUNK_MAX=12):
        stored = content.kept(text)
    rows = stored.contents  # fetched as a store does: the strings' rows, then their chunks'
    back = content.read_body(stored.text, lambda wanted: {a: rows[a] for a in wanted},
                             what="a body")
    assert json.loads(back) == data
