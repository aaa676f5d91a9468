"""Loaders: stable uris, UTF-8 with clear refusals, normalised line endings, sorted walks."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfootprint.errors import ConfigurationError
from agentfootprint.rag import (
    Document,
    DocumentLoadError,
    load_documents,
    load_file,
    load_folder,
)


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    return path


def test_a_folder_loads_sorted_with_relative_posix_uris(tmp_path: Path) -> None:
    """Uris are paths relative to the folder, so ids match on every machine; order is sorted."""
    write(tmp_path / "b.md", "# B")
    write(tmp_path / "a.txt", "alpha")
    write(tmp_path / "guide" / "install.md", "# Install")
    write(tmp_path / "image.png", b"\x89PNG")
    write(tmp_path / ".git" / "notes.md", "hidden")
    write(tmp_path / ".draft.md", "hidden")
    documents = load_folder(tmp_path)
    assert [d.uri for d in documents] == ["a.txt", "b.md", "guide/install.md"]
    assert documents[1].metadata == {"format": "markdown", "bytes": 3}
    assert documents[0].metadata["format"] == "text"


def test_non_recursive_prefix_and_include(tmp_path: Path) -> None:
    """A walk can stay shallow, keep only some endings, and prefix its uris."""
    write(tmp_path / "a.md", "A")
    write(tmp_path / "b.txt", "B")
    write(tmp_path / "sub" / "c.md", "C")
    documents = load_folder(tmp_path, recursive=False, include=[".md"], uri_prefix="kb/")
    assert [d.uri for d in documents] == ["kb/a.md"]


def test_bom_is_dropped_and_line_endings_normalised(tmp_path: Path) -> None:
    """A Windows file and a Unix file with the same words give the same text (and hashes)."""
    crlf = write(tmp_path / "win.md", b"\xef\xbb\xbf# Title\r\nline one\r\rline two\r\n")
    lf = write(tmp_path / "unix.md", b"# Title\nline one\n\nline two\n")
    assert load_file(crlf).text == load_file(lf).text == "# Title\nline one\n\nline two\n"


def test_undecodable_bytes_name_the_file_and_the_byte(tmp_path: Path) -> None:
    """Latin-1 bytes are refused with the file, the offset and the fix; nothing is guessed."""
    bad = write(tmp_path / "docs" / "legacy.txt", "café".encode("latin-1"))
    write(tmp_path / "docs" / "fine.md", "fine")
    with pytest.raises(DocumentLoadError, match=r"legacy\.txt.*byte 3.*UTF-8") as caught:
        load_folder(tmp_path / "docs")
    assert caught.value.path == str(bad)
    assert isinstance(caught.value, ConfigurationError)


def test_missing_paths_and_oversized_files_are_refused(tmp_path: Path) -> None:
    """Every refusal names the path."""
    with pytest.raises(DocumentLoadError, match=r"nope\.md"):
        load_file(tmp_path / "nope.md")
    with pytest.raises(DocumentLoadError, match="missing-dir"):
        load_folder(tmp_path / "missing-dir")
    big = write(tmp_path / "big.txt", "x" * 100)
    with pytest.raises(DocumentLoadError, match=r"big\.txt.*100 bytes.*max_bytes"):
        load_file(big, max_bytes=10)
    with pytest.raises(ConfigurationError, match="include"):
        load_folder(tmp_path, include=["md"])


def test_load_documents_mixes_files_and_folders(tmp_path: Path) -> None:
    """Files keep the path given (or an explicit uri); folders use relative uris."""
    write(tmp_path / "kb" / "x.md", "X")
    single = write(tmp_path / "notes.txt", "N")
    documents = load_documents(single, tmp_path / "kb")
    assert [d.uri for d in documents] == [single.as_posix(), "x.md"]
    assert load_file(single, uri="notes").uri == "notes"


def test_documents_are_frozen_and_need_a_uri() -> None:
    """A document is a value; an empty uri cannot make chunk ids."""
    with pytest.raises(ValueError, match="uri"):
        Document(uri="", text="t")
    document = Document(uri="u", text="t")
    with pytest.raises(ValueError, match="frozen"):
        document.text = "changed"
