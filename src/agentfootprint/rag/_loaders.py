"""Loading a corpus: text and markdown files (or whole folders) into ``Document`` objects.

A ``Document`` is the unit the splitter cuts and the indexer keys on: its ``uri`` becomes the
prefix of every chunk id (``<uri>#<index>``), the id the model cites and the trace names. So a
loader makes uris that are stable across machines: a folder's files are named by their path
relative to the folder (POSIX separators), never by an absolute path.

Contract: files are decoded as strict UTF-8 (a leading byte-order mark is dropped) and line
endings are normalised to ``\\n``, so a Windows checkout and a Linux checkout of one corpus give
the same text, the same chunk hashes, and nothing to re-embed. Undecodable bytes, a missing path
or an oversized file raise ``DocumentLoadError`` naming the file; nothing is silently skipped or
replaced. A folder walk is sorted and skips hidden (dot) files and folders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MARKDOWN_SUFFIXES",
    "TEXT_SUFFIXES",
    "Document",
    "DocumentLoadError",
    "load_documents",
    "load_file",
    "load_folder",
]

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
"""File endings read as markdown (headings start sections when split)."""
TEXT_SUFFIXES = (".txt", ".text", ".rst", ".log")
"""File endings read as plain text."""
DEFAULT_MAX_BYTES = 25 * 1024 * 1024
"""Files larger than this are refused rather than loaded whole into memory."""

DocumentFormat = Literal["markdown", "text"]

_NEWLINES = re.compile(r"\r\n?")


class Document(BaseModel):
    """One loaded document: where it came from, its text, and free-form metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uri: str = Field(min_length=1)
    """Stable name of the document; chunk ids are ``<uri>#<index>``."""
    text: str
    """The whole text; chunk offsets index into it."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Annotations (``format``: ``"markdown"`` or ``"text"``, ``bytes``…)."""


class DocumentLoadError(ConfigurationError):
    """A file that cannot be loaded as a document; ``path`` names it."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


def load_file(path: str | Path, *, uri: str | None = None,
              max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """Load one text or markdown file. ``uri`` defaults to the path as given (POSIX form)."""
    file = Path(path)
    name = uri if uri is not None else file.as_posix()
    if not file.is_file():
        raise DocumentLoadError(
            f"cannot load {str(file)!r}: no such file; check the path", path=str(file))
    return _read(file, name, _format_of(file), max_bytes)


def load_folder(path: str | Path, *, recursive: bool = True,
                include: Iterable[str] = MARKDOWN_SUFFIXES + TEXT_SUFFIXES,
                uri_prefix: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> list[Document]:
    """Load every matching file under a folder, sorted by relative path.

    Each uri is ``uri_prefix`` + the file's path relative to the folder, so two folders indexed
    into one store can be kept apart with a prefix. ``include`` lists the file endings to load.
    """
    root = Path(path)
    if not root.is_dir():
        raise DocumentLoadError(
            f"cannot load folder {str(root)!r}: no such directory; check the path",
            path=str(root))
    suffixes = tuple(s.lower() for s in include)
    if not suffixes or not all(s.startswith(".") for s in suffixes):
        raise ConfigurationError(
            f"load_folder(include={tuple(include)!r}) needs file endings such as ('.md', '.txt')")
    found = sorted(
        (file for file in (root.rglob("*") if recursive else root.glob("*"))
         if file.is_file() and file.suffix.lower() in suffixes
         and not any(part.startswith(".") for part in file.relative_to(root).parts)),
        key=lambda file: file.relative_to(root).as_posix())
    return [_read(file, uri_prefix + file.relative_to(root).as_posix(), _format_of(file),
                  max_bytes) for file in found]


def load_documents(*paths: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Document]:
    """Load files and folders in the order given (folders with ``load_folder`` defaults)."""
    documents: list[Document] = []
    for path in paths:
        if Path(path).is_dir():
            documents.extend(load_folder(path, max_bytes=max_bytes))
        else:
            documents.append(load_file(path, max_bytes=max_bytes))
    return documents


def _format_of(file: Path) -> DocumentFormat:
    return "markdown" if file.suffix.lower() in MARKDOWN_SUFFIXES else "text"


def _read(file: Path, uri: str, kind: DocumentFormat, max_bytes: int) -> Document:
    size = file.stat().st_size
    if size > max_bytes:
        raise DocumentLoadError(
            f"cannot load {str(file)!r}: it is {size} bytes, over the {max_bytes}-byte limit; "
            "split the file or pass a larger max_bytes=", path=str(file))
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start:exc.end]
        raise DocumentLoadError(
            f"cannot load {str(file)!r}: byte {exc.start} ({bad!r}) is not valid UTF-8; "
            "re-save the file as UTF-8", path=str(file)) from exc
    return Document(uri=uri, text=_NEWLINES.sub("\n", text),
                    metadata={"format": kind, "bytes": len(raw)})
