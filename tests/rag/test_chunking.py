"""The heading splitter: offsets that never lie, full coverage, sizes, headings and ids."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.errors import ConfigurationError
from agentfootprint.rag import Chunk, Document, HeadingSplitter
from agentfootprint.rag._chunking import split_document, split_documents

PIECES = st.sampled_from([
    "# Title", "## Sub heading", "###### Deep", "####### not a heading", "#no-space",
    "```", "~~~", "```python", "\n", "\r\n", "\r", "\n\n", "\r\n\r\n", " ", "\t", "  \n  \n",
    "Hello world.", "Is it? Yes! ", "“Quoted.” Next", "句子。下一句！", "e\u0301", "😀🎉",
    "\u00a0", "\u2028", "\x0b", "word" * 30, ". ", "#", "a",
])
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=40)), max_size=40).map("".join)


@st.composite
def splitters(draw: st.DrawFn) -> HeadingSplitter:
    max_chars = draw(st.integers(min_value=1, max_value=300))
    overlap = draw(st.integers(min_value=0, max_value=max_chars - 1))
    min_chars = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=max_chars - 1)))
    return HeadingSplitter(max_chars=max_chars, overlap=overlap, min_chars=min_chars,
                           headings=draw(st.one_of(st.none(), st.booleans())))


def check_contract(document: Document, chunks: list[Chunk], splitter: HeadingSplitter) -> None:
    text = document.text
    for index, chunk in enumerate(chunks):
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.id == f"{document.uri}#{index}" and chunk.index == index
        assert chunk.uri == document.uri
        assert chunk.text and not chunk.text[0].isspace() and not chunk.text[-1].isspace()
        assert len(chunk.text) <= splitter.max_chars
    assert all(a.start < b.start and a.end < b.end for a, b in itertools.pairwise(chunks))
    covered = [False] * len(text)
    for chunk in chunks:
        covered[chunk.start:chunk.end] = [True] * (chunk.end - chunk.start)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert missing == []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT, splitter=splitters())
def test_chunks_are_exact_slices_that_cover_every_visible_character(
        text: str, splitter: HeadingSplitter) -> None:
    """Over arbitrary text (unicode, CRLF, headings, fences, empty): slices, order, coverage."""
    document = Document(uri="docs/a.md", text=text)
    check_contract(document, splitter.split(document), splitter)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300), max_chars=st.integers(min_value=1, max_value=50))
def test_any_unicode_text_keeps_the_contract(text: str, max_chars: int) -> None:
    """Fully arbitrary code points (surrogates, controls) keep the contract too."""
    splitter = HeadingSplitter(max_chars=max_chars)
    document = Document(uri="u", text=text)
    check_contract(document, splitter.split(document), splitter)


@settings(max_examples=100, deadline=None)
@given(text=TEXT)
def test_splitting_is_deterministic(text: str) -> None:
    """The same document always gives the same chunks (ids and hashes are stable)."""
    document = Document(uri="d.md", text=text)
    assert split_document(document, max_chars=80) == split_document(document, max_chars=80)


def test_empty_and_whitespace_documents_have_no_chunks() -> None:
    """Nothing visible, nothing to retrieve."""
    assert split_document(Document(uri="e", text="")) == []
    assert split_document(Document(uri="e", text=" \r\n\t\n\u00a0")) == []


def test_headings_start_sections_and_name_their_path() -> None:
    """Each section that fits is one chunk, labelled with its heading path."""
    body = "Some words here. " * 6
    text = f"# Guide\n\n{body}\n\n## Install\n\n{body}\n\n## Usage\n\n{body}\n\n# FAQ\n\n{body}"
    chunks = split_document(Document(uri="g.md", text=text), max_chars=200, min_chars=0)
    assert [c.heading_path for c in chunks] == [
        ("Guide",), ("Guide", "Install"), ("Guide", "Usage"), ("FAQ",)]
    assert chunks[1].text.startswith("## Install")


def test_a_bare_heading_is_folded_into_the_section_it_introduces() -> None:
    """A heading with no body never becomes a chunk of its own."""
    body = "Install with pip and run the command line tool to start. " * 2
    text = f"# Guide\n\n## Install\n\n{body}"
    chunks = split_document(Document(uri="g.md", text=text), max_chars=400)
    assert len(chunks) == 1
    assert chunks[0].text.startswith("# Guide") and chunks[0].heading_path == ("Guide", "Install")


def test_hash_lines_in_fenced_code_are_not_headings() -> None:
    """A shell comment in a code block does not cut the section."""
    text = "# Setup\n\n```bash\n# install it\npip install x\n```\n\nDone."
    chunks = split_document(Document(uri="s.md", text=text), max_chars=500, min_chars=0)
    assert len(chunks) == 1 and chunks[0].heading_path == ("Setup",)


def test_plain_text_documents_ignore_hash_lines() -> None:
    """A text file's ``# comment`` does not start a section."""
    document = Document(uri="n.txt", text="# comment\nvalue\n# other\nvalue",
                        metadata={"format": "text"})
    assert [c.heading_path for c in split_document(document, min_chars=0)] == [()]


def test_long_sections_cut_at_paragraphs_then_sentences() -> None:
    """Paragraph boundaries are preferred; a long paragraph is cut between sentences."""
    paragraph = "First sentence is here. Second sentence follows. Third one ends it."
    text = f"# A\n\n{paragraph}\n\n{paragraph}"
    chunks = split_document(Document(uri="a.md", text=text), max_chars=50, min_chars=0)
    assert all(c.text.endswith(".") for c in chunks)
    assert [c.text for c in chunks][-1] == "Third one ends it."


def test_overlap_repeats_the_tail_of_the_previous_chunk_at_a_word_start() -> None:
    """Continuation chunks begin with up to ``overlap`` characters of their predecessor."""
    text = " ".join(f"w{i:03d}" for i in range(100))
    chunks = split_document(Document(uri="w", text=text), max_chars=60, overlap=15)
    for before, after in itertools.pairwise(chunks):
        assert after.start < before.end
        assert before.end - after.start <= 15
        assert text[after.start - 1] == " "


def test_overlap_never_crosses_a_section_boundary() -> None:
    """The next section starts clean: overlap is for continuations only."""
    body = "alpha beta gamma delta. " * 3
    text = f"# One\n\n{body}\n\n# Two\n\n{body}"
    chunks = split_document(Document(uri="o.md", text=text), max_chars=100, overlap=30,
                            min_chars=0)
    assert chunks[1].text.startswith("# Two")


def test_split_documents_keeps_document_order() -> None:
    """A corpus splits document by document."""
    docs = [Document(uri="b", text="bee"), Document(uri="a", text="ant")]
    assert [c.id for c in split_documents(docs)] == ["b#0", "a#0"]


def test_content_hash_changes_exactly_when_text_changes() -> None:
    """The hash is the text's SHA-256, independent of position and uri."""
    one = Chunk(id="a#0", uri="a", index=0, text="same", start=0, end=4)
    two = Chunk(id="b#3", uri="b", index=3, text="same", start=9, end=13)
    other = Chunk(id="a#0", uri="a", index=0, text="diff", start=0, end=4)
    assert one.content_hash == two.content_hash != other.content_hash


@pytest.mark.parametrize("options", [
    {"max_chars": 0}, {"max_chars": 10, "overlap": 10}, {"overlap": -1},
    {"max_chars": 10, "min_chars": 10}, {"min_chars": -1}, {"max_chars": True},
])
def test_bad_sizes_are_refused(options: dict[str, int]) -> None:
    """Sizes that cannot work are configuration errors naming the option."""
    with pytest.raises(ConfigurationError, match=next(iter(options))):
        HeadingSplitter(**options)  # type: ignore[arg-type]
