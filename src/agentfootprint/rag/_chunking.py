"""Splitting documents into chunks: heading-aware, size-bounded, offsets that never lie.

Why heading-aware: a passage is retrieved alone, so it should be one topic. Markdown ATX headings
(``#`` … ``######``, not inside fenced code) start sections; a section that fits ``max_chars`` is
one chunk; a longer one is cut at the largest boundary that works — paragraphs, then sentences,
then lines, then words, and only as a last resort mid-word — and the pieces are packed greedily
back up to the size limit. Sections shorter than ``min_chars`` (a bare heading, a one-line intro)
are folded into the next section's first chunk (or, at the end, into the previous chunk), because
a tiny heading-only chunk can outrank the body it introduces and leave the model guessing.

The contract every chunk keeps, checked by property tests over arbitrary text:

* ``document.text[chunk.start:chunk.end] == chunk.text`` — chunks are slices, never rebuilt text;
* ``chunk.id == f"{uri}#{index}"`` with indexes 0, 1, 2 … in document order;
* starts and ends strictly increase, and every non-whitespace character of the document lies in
  some chunk (whitespace is all that is ever dropped, and only at chunk edges);
* ``len(chunk.text) <= max_chars``; a chunk never starts or ends with whitespace;
* ``overlap`` repeats up to that many characters of the previous chunk of the same section
  (snapped to a word start), never across sections.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigurationError
from ._loaders import Document

__all__ = [
    "DEFAULT_MAX_CHARS",
    "Chunk",
    "HeadingSplitter",
    "split_document",
    "split_documents",
]

DEFAULT_MAX_CHARS = 1000
"""About 250 word-piece tokens: well under the 512-token window of MiniLM-class embedders."""

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
# Separators between units, coarsest first. Each matches only whitespace (or nothing), so cutting
# at them can drop nothing but whitespace.
_LEVELS = (
    re.compile(r"(?:\r\n|\r|\n)[^\S\r\n]*(?:\r\n|\r|\n)\s*"),  # blank line: paragraphs
    re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’)\]]))\s+|(?<=[。！？])"),  # sentences
    re.compile(r"\s*(?:\r\n|\r|\n)\s*"),  # lines
    re.compile(r"\s+"),  # words
)

Span = tuple[int, int]


class Chunk(BaseModel):
    """A slice of a document: ``document.text[start:end] == text``, always."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """``<uri>#<index>``: what the model cites and the trace names."""
    uri: str
    """The document's uri."""
    index: int = Field(ge=0)
    """Position among the document's chunks, from 0."""
    text: str
    start: int = Field(ge=0)
    """Offset of the first character in the document text."""
    end: int = Field(ge=0)
    """Offset just past the last character (exclusive)."""
    heading_path: tuple[str, ...] = ()
    """The markdown headings the chunk sits under, outermost first (empty before any)."""

    @property
    def content_hash(self) -> str:
        """SHA-256 of the text: what incremental indexing compares to skip unchanged chunks."""
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class _Section:
    start: int
    end: int
    path: tuple[str, ...]


@dataclass(slots=True)
class _Piece:
    start: int
    end: int
    path: tuple[str, ...]
    continues: bool = False
    """True for the second and later pieces of one long section (overlap applies)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeadingSplitter:
    """The default splitter (see the module docstring). Reuse one for a whole corpus."""

    max_chars: int = DEFAULT_MAX_CHARS
    """Longest chunk, in characters."""
    overlap: int = 0
    """Characters of the previous chunk of a long section repeated at the start of the next."""
    min_chars: int | None = None
    """Sections shorter than this are folded into a neighbour; default ``min(250, max/4)``."""
    headings: bool | None = None
    """Whether ``#`` lines start sections; default: unless ``metadata["format"] == "text"``."""

    def __post_init__(self) -> None:
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) \
                or self.max_chars < 1:
            raise ConfigurationError(
                f"HeadingSplitter(max_chars={self.max_chars!r}) must be an int >= 1")
        if isinstance(self.overlap, bool) or not isinstance(self.overlap, int) \
                or not 0 <= self.overlap < self.max_chars:
            raise ConfigurationError(
                f"HeadingSplitter(overlap={self.overlap!r}) must be an int from 0 to "
                f"max_chars - 1 ({self.max_chars - 1})")
        floor = self.min_chars
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, int)
                                  or not 0 <= floor < self.max_chars):
            raise ConfigurationError(
                f"HeadingSplitter(min_chars={floor!r}) must be an int from 0 to max_chars - 1 "
                f"({self.max_chars - 1}), or None for the default")

    @property
    def floor(self) -> int:
        """The effective ``min_chars``."""
        return self.min_chars if self.min_chars is not None else min(250, self.max_chars // 4)

    def split(self, document: Document) -> list[Chunk]:
        """The document's chunks in order (none for an empty or whitespace-only document)."""
        text = document.text
        headings = (self.headings if self.headings is not None
                    else document.metadata.get("format") != "text")
        sections = _sections(text, headings)
        pieces = self._fold(text, sections)
        spans = _with_overlap(text, pieces, self.overlap, self.max_chars)
        return [Chunk(id=f"{document.uri}#{index}", uri=document.uri, index=index,
                      text=text[start:end], start=start, end=end, heading_path=path)
                for index, (start, end, path) in enumerate(spans)]

    def _fold(self, text: str, sections: list[_Section]) -> list[_Piece]:
        """Pieces of every section, short sections folded into a neighbour when they fit."""
        limit, floor = self.max_chars, self.floor
        out: list[_Piece] = []
        pending: list[_Section] = []

        def flush() -> None:
            if pending:
                out.append(_Piece(pending[0].start, pending[-1].end,
                                  _common_prefix([s.path for s in pending])))
                pending.clear()

        for section in sections:
            if section.end - section.start < floor:
                if pending and section.end - pending[0].start > limit:
                    flush()
                pending.append(section)
                continue
            pieces = _pieces(text, section, limit, limit - self.overlap)
            if pending:
                if pieces[0].end - pending[0].start <= limit:
                    pieces[0].start = pending[0].start
                    pending.clear()
                else:
                    flush()
            out.extend(pieces)
        if pending:
            if out and pending[-1].end - out[-1].start <= limit:
                out[-1].end = pending[-1].end
                pending.clear()
            else:
                flush()
        return out


def split_document(document: Document, *, max_chars: int = DEFAULT_MAX_CHARS, overlap: int = 0,
                   min_chars: int | None = None, headings: bool | None = None) -> list[Chunk]:
    """``HeadingSplitter(...).split(document)`` in one call."""
    return HeadingSplitter(max_chars=max_chars, overlap=overlap, min_chars=min_chars,
                           headings=headings).split(document)


def split_documents(documents: Sequence[Document],
                    splitter: HeadingSplitter | None = None) -> list[Chunk]:
    """Every document's chunks, document by document."""
    chosen = splitter or HeadingSplitter()
    return [chunk for document in documents for chunk in chosen.split(document)]


# -- sections --------------------------------------------------------------------------------


def _sections(text: str, headings: bool) -> list[_Section]:
    """Trimmed spans of the preamble and of each heading's section; whitespace-only ones dropped."""
    starts: list[tuple[int, tuple[str, ...]]] = [(0, ())]
    if headings:
        stack: list[tuple[int, str]] = []
        fence: tuple[str, int] | None = None
        for line in _LINE.finditer(text):
            content = line.group().rstrip("\r\n")
            opened = _FENCE.fullmatch(content)
            if fence is not None:
                if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= fence[1] \
                        and not opened.group(2).strip():
                    fence = None
                continue
            if opened:
                fence = (opened.group(1)[0], len(opened.group(1)))
                continue
            heading = _HEADING.fullmatch(content)
            if heading is None:
                continue
            level, title = len(heading.group(1)), (heading.group(2) or "").strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            if title:
                stack.append((level, title))
            starts.append((line.start(), tuple(t for _, t in stack)))
    bounds = [s for s, _ in starts[1:]] + [len(text)]
    out = []
    for (start, path), end in zip(starts, bounds, strict=True):
        lo, hi = _trim(text, start, end)
        if lo < hi:
            out.append(_Section(lo, hi, path))
    return out


def _common_prefix(paths: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    first = paths[0]
    size = len(first)
    for path in paths[1:]:
        size = min(size, len(path))
        while size and path[:size] != first[:size]:
            size -= 1
    return first[:size]


# -- cutting one section ---------------------------------------------------------------------


def _pieces(text: str, section: _Section, limit: int, pack_limit: int) -> list[_Piece]:
    """A section as one piece if it fits, else cut at the coarsest boundaries and re-packed."""
    if section.end - section.start <= limit:
        return [_Piece(section.start, section.end, section.path)]
    units = _cut(text, section.start, section.end, pack_limit, 0)
    packed = _pack(units, pack_limit)
    return [_Piece(start, end, section.path, continues=index > 0)
            for index, (start, end) in enumerate(packed)]


def _cut(text: str, start: int, end: int, limit: int, level: int) -> list[Span]:
    """Trimmed units of ``text[start:end]``, each at most ``limit`` long, in order."""
    if end - start <= limit:
        return [(start, end)]
    if level == len(_LEVELS):
        return _hard_cut(text, start, end, limit)
    units: list[Span] = []
    cursor = start
    for separator in _LEVELS[level].finditer(text, start, end):
        units.append((cursor, separator.start()))
        cursor = separator.end()
    units.append((cursor, end))
    trimmed = [span for span in (_trim(text, a, b) for a, b in units) if span[0] < span[1]]
    if len(trimmed) <= 1:
        return _cut(text, start, end, limit, level + 1)
    return [piece for a, b in trimmed for piece in _cut(text, a, b, limit, level + 1)]


def _hard_cut(text: str, start: int, end: int, limit: int) -> list[Span]:
    out = []
    while start < end:
        stop = min(start + limit, end)
        lo, hi = _trim(text, start, stop)
        if lo < hi:
            out.append((lo, hi))
        start = stop
    return out


def _pack(units: list[Span], limit: int) -> list[Span]:
    """Merge consecutive units while the merged span stays within ``limit``."""
    out = [units[0]]
    for start, end in units[1:]:
        if end - out[-1][0] <= limit:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _trim(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _with_overlap(text: str, pieces: list[_Piece], overlap: int, limit: int
                  ) -> list[tuple[int, int, tuple[str, ...]]]:
    """Final spans: continuation pieces start up to ``overlap`` earlier, at a word start."""
    out: list[tuple[int, int, tuple[str, ...]]] = []
    for piece in pieces:
        start = piece.start
        if overlap and piece.continues and out:
            lowest = max(piece.start - overlap, piece.end - limit, out[-1][0] + 1)
            for position in range(lowest, piece.start):
                if not text[position].isspace() and (position == 0
                                                     or text[position - 1].isspace()):
                    start = position
                    break
        out.append((start, piece.end, piece.path))
    return out
