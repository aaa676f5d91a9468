"""Content stored once: a run's large strings kept once per run in its store, referenced elsewhere.

A run repeats its large values: a 10 MB user message sits in ``user_message``, in ``history``,
in the ``turn_start`` event, in a memory's recall and in what the memory writes. The in-memory
trace keeps every copy (the engine pays nothing for this); a run store keeps each once. When a
store writes a body (a recording's JSON, a progress entry), :func:`kept` replaces every string
of at least :data:`LARGE` bytes by a reference ``{"$content": "sha256:<hex>"}`` and hands the
strings back to be kept in the run's ``contents`` rows (``run_id, address, body``), one row per
distinct string whatever the number of places and bodies (progress entries included) that hold
it. Reading resolves the references before anything else sees the body, so every reader —
explain, the report, the CLI, backtrack, the audit chain — gets the same values as before.

A string of :data:`CHUNKED` characters or more is kept as content-defined chunks (its row lists
their addresses, each chunk its own row), because a run also holds texts *built from* a large
one: a memory's recall wraps each recalled entry in a ``<memory>`` block, once in the prompt
text and once in its piece. Cut by content, the entry's chunks are the same inside the block,
so a recalled 10 MB entry costs its 10 MB once, not three times.

**Addresses are taken from what is kept, after redaction.** A store is given a recording (or an
entry) whose values were redacted at the source, so an address is the SHA-256 of the redacted
string: a masked secret is never hashed. Strings under :data:`LARGE` bytes are never addressed
at all, so no short value — a password, a key — has a hash in the store to be guessed against.

**The audit chain hashes the resolved recording**, not its stored form: the chain is
recomputed from a ``Recording`` wherever it travels (an exported file, another store, a store
that keeps strings from another size), so it must not depend on how one store laid the bytes
out. A kept string that was changed still breaks the chain (it resolves to other content), and
a kept string whose bytes no longer hash to its address is refused on load, naming it.

**The stored form** is the body's own JSON with one more top-level key, first: ``"$refs"``,
the list of ``[path, address]`` pairs (``path`` the keys and indices from the top), so reading
visits only the references, never the whole body. A body without references is written as it
always was, so every body written before this existed is read unchanged. In a body written with
the index, every top-level key of ``$`` signs then ``refs`` (``"$refs"``, ``"$$refs"``, ...)
of its own gets one more ``$`` in front, which reading takes off again; a body of its own whose
first key is ``"$refs"`` is always written with the index, so the index is never ambiguous.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import RunError
from ._recording import Recording
from ._store import parse_stored

__all__ = ["LARGE", "Kept", "address_of", "chunks_of", "kept", "pack", "read_body",
           "read_recording", "unpack"]

LARGE: Final = 4096
"""A string of at least this many bytes (UTF-8) is kept once per run and referenced."""
REFS: Final = "$refs"
"""The top-level key of a stored body that lists its references."""
MARKER: Final = "$content"
"""The key of the object that stands where a kept string was."""
CHUNKED: Final = 128 * 1024
"""A kept string of at least this many characters is kept as chunks (:func:`chunks_of`)."""
CHUNK_MIN: Final = 64 * 1024
CHUNK_MAX: Final = 256 * 1024
"""Chunks of 64-256 KiB characters (about 70 KiB on average): few rows, little page slack."""
CHUNKS: Final = "$chunks"
"""The key of a ``contents`` row that keeps a string as the addresses of its chunks."""
_STARTS: Final = '{"' + REFS + '":'
"""How every stored body with references begins (the index is written first)."""
_REFS_KEY: Final = re.compile(r"\$+refs")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ADDRESS: Final = re.compile(r"sha256:[0-9a-f]{64}")

Path = list[str | int]
Fetch = Callable[[list[str]], Mapping[str, str]]
"""Gives the ``contents`` rows of one run at these addresses: address -> the row's JSON text
(a row not found is left out)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A body as a store writes it: its text, and the ``contents`` rows it needs (address ->
    the row's ``body``: the string as JSON text, or the list of its chunks' addresses)."""

    text: str
    contents: dict[str, str] = field(default_factory=dict)


def address_of(text: str) -> str:
    """The content address of ``text``: ``sha256:`` and the hex digest of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _large(text: str) -> bool:
    size = len(text)
    if size >= LARGE:
        return True
    return size * 4 >= LARGE and len(text.encode("utf-8", "surrogatepass")) >= LARGE


def pack(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[str, str]]:
    """``data`` (a JSON object) in its stored form, and the strings it now references
    (address -> string). ``data`` is not changed; it is returned itself when its stored form
    is the same. Pure: no I/O, no policy."""
    refs: list[list[Any]] = []
    strings: dict[str, str] = {}
    top = data if type(data) is dict else dict(data)
    if any(_REFS_KEY.fullmatch(key) for key in top):
        top = {("$" + key if _REFS_KEY.fullmatch(key) else key): value
               for key, value in top.items()}
    body = _packed(top, [], refs, strings)
    if not refs and top is data:
        return body, strings
    return {REFS: refs, **body}, strings  # with a renamed key, the (empty) index says so


def _ref(text: str, path: Path, refs: list[list[Any]], strings: dict[str, str]) -> Any:
    address = address_of(text)
    strings.setdefault(address, text)
    refs.append([list(path), address])
    return {MARKER: address}


def _packed(value: Any, path: Path, refs: list[list[Any]], strings: dict[str, str]) -> Any:
    """``value`` (a dict or a list) with each large string inside replaced by its marker;
    a container is copied only when something inside it changed."""
    out: Any = None
    items = value.items() if type(value) is dict else enumerate(value)
    for key, item in items:
        kind = type(item)
        if kind is str:
            if len(item) * 4 < LARGE or not _large(item):
                continue
            path.append(key)
            new = _ref(item, path, refs, strings)
        elif kind is dict or kind is list:
            path.append(key)
            new = _packed(item, path, refs, strings)
            if new is item:
                path.pop()
                continue
        else:
            continue
        path.pop()
        if out is None:
            out = dict(value) if type(value) is dict else list(value)
        out[key] = new
    return value if out is None else out


def unpack(data: Mapping[str, Any], strings: Mapping[str, str]) -> dict[str, Any]:
    """``data`` (a stored form from :func:`pack`) with every reference replaced by its string
    from ``strings``; a reference that is missing or does not stand where its path says is a
    ``ValueError`` naming it. The inverse of :func:`pack`."""
    body = dict(data)
    refs = body.pop(REFS, [])
    if not isinstance(refs, list):
        raise ValueError(f"its {REFS!r} is not a list")
    copied = {id(body)}
    for ref in refs:
        if not (isinstance(ref, list) and len(ref) == 2 and isinstance(ref[0], list)
                and isinstance(ref[1], str)):
            raise ValueError(f"its reference {ref!r} is not a [path, address] pair")
        path, address = ref
        if address not in strings:
            raise ValueError(f"the content {address} it references is missing")
        _put(body, path, address, strings[address], copied)
    return {(key[1:] if _REFS_KEY.fullmatch(key) else key): value
            for key, value in body.items()}


def _put(body: dict[str, Any], path: list[Any], address: str, text: str,
         copied: set[int]) -> None:
    """Replace the marker at ``path`` by ``text``; each container on the way is copied once
    (``copied`` holds the copies' ids), so the stored form given is never changed."""
    if not path:
        raise ValueError(f"the reference to {address} has an empty path")
    holder: Any = body
    for step in path[:-1]:
        child = _step(holder, step, address)
        if id(child) not in copied and isinstance(child, dict | list):
            child = child.copy()
            holder[step] = child
            copied.add(id(child))
        holder = child
    last = path[-1]
    found = _step(holder, last, address)
    if found != {MARKER: address}:
        raise ValueError(f"no reference to {address} stands at {path!r}")
    holder[last] = text


def _step(holder: Any, step: Any, address: str) -> Any:
    if isinstance(holder, dict) and isinstance(step, str) and step in holder:
        return holder[step]
    if isinstance(holder, list) and type(step) is int and 0 <= step < len(holder):
        return holder[step]
    raise ValueError(f"the path of the reference to {address} does not exist in the body")


def _dumps(value: Any) -> str:
    """Compact JSON text a store can hold (a lone surrogate written as its escape)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def kept(text: str, source: object = None) -> Kept:
    """A body's JSON ``text`` as a store writes it (see the module docstring); a body with
    no large string is returned as it is, byte for byte (unless its first key is ``$refs``).

    ``source`` is what ``text`` was written from (a ``Recording``, an entry), when the caller
    has it: a body whose source holds no large string is then known as such without parsing
    the text (most bodies: half the cost of the parse and walk is saved)."""
    as_is = not has_refs(text)  # read back as it is, unless a large string is taken out
    if as_is and len(text) * 4 < LARGE:
        return Kept(text)
    if as_is and source is not None:
        fields = source.__dict__ if isinstance(source, Recording) else source
        if type(fields) in (dict, list, tuple) and not _holds_large(fields):
            return Kept(text)
    data = json.loads(text)
    if not isinstance(data, dict):
        return Kept(text)
    body, strings = pack(data)
    if not strings and as_is:
        return Kept(text)
    rows: dict[str, str] = {}
    for address, value in strings.items():
        _add_rows(rows, address, value)
    return Kept(_dumps(body), rows)


def _add_rows(rows: dict[str, str], address: str, text: str) -> None:
    """The ``contents`` rows of one kept string: itself, or (from CHUNKED bytes) the list of
    its chunks' addresses and one row per chunk."""
    if len(text) < CHUNKED:
        rows[address] = _dumps(text)
        return
    listed = []
    for chunk in chunks_of(text):
        part = address_of(chunk)
        rows.setdefault(part, _dumps(chunk))
        listed.append(part)
    rows[address] = _dumps({CHUNKS: listed})


def chunks_of(text: str) -> list[str]:
    """``text`` cut where its content says (joined, they are ``text``): after a line whose
    CRC-32 has its low bits clear, once a chunk holds CHUNK_MIN characters (at the latest once
    it holds CHUNK_MAX); a line of more than CHUNK_MAX characters is cut in fixed pieces from
    its start. So a long text embedded
    in another on its own lines (a recalled entry inside its ``<memory>`` block) is cut the
    same way inside it, and its chunks are kept once for both."""
    lines = text.splitlines(keepends=True)
    if len(lines) * 32 > len(text):  # lines this short: fixed pieces, not a slow walk
        return [text[at:at + CHUNK_MAX] for at in range(0, len(text), CHUNK_MAX)]
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        while len(line) > CHUNK_MAX:
            if current:
                out.append("".join(current))
                current, size = [], 0
            out.append(line[:CHUNK_MAX])
            line = line[CHUNK_MAX:]
        current.append(line)
        size += len(line)
        if size >= CHUNK_MAX or (size >= CHUNK_MIN and not zlib.crc32(
                line.encode("utf-8", "surrogatepass")) & 0x3F):
            out.append("".join(current))
            current, size = [], 0
    if current:
        out.append("".join(current))
    return out


def _holds_large(value: Any) -> bool:
    """True when a string of at least LARGE bytes is inside ``value`` (JSON-shaped: dicts,
    lists and tuples are looked into; any other container is not, which costs only dedupe)."""
    for item in (value.values() if type(value) is dict else value):
        kind = type(item)
        if kind is str:
            if len(item) * 4 >= LARGE and _large(item):
                return True
        elif (kind is dict or kind is list or kind is tuple) and _holds_large(item):
            return True
    return False


def has_refs(text: str) -> bool:
    """True when a stored body references kept strings (it must be read with its contents)."""
    return text.startswith(_STARTS)


def _resolved(text: str, fetch: Fetch) -> dict[str, Any]:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("it is not a JSON object")
    wanted = {ref[1] for ref in data.get(REFS, ()) if isinstance(ref, list) and len(ref) == 2
              and isinstance(ref[1], str)}
    rows = dict(fetch(sorted(wanted))) if wanted else {}
    parts = {part for address in wanted if address in rows
             for part in _chunk_list(rows[address]) if part not in rows}
    if parts:  # a string kept in chunks: its chunks' rows too
        rows.update(fetch(sorted(parts)))
    strings = {}
    for address in wanted:
        if address not in rows:
            continue  # unpack names it as missing
        value = _row_text(rows, address)
        if value is None or not _ADDRESS.fullmatch(address) or address_of(value) != address:
            raise ValueError(f"the content kept as {address} no longer matches its address "
                             "(it was altered)")
        strings[address] = value
    return unpack(data, strings)


def _chunk_list(row: str) -> list[str]:
    """The chunk addresses a row lists (none for a row that keeps its string whole)."""
    if not row.startswith('{"' + CHUNKS + '":'):
        return []
    listed = json.loads(row).get(CHUNKS)
    return [part for part in listed if isinstance(part, str)] if isinstance(listed, list) else []


def _row_text(rows: Mapping[str, str], address: str) -> str | None:
    """The string a ``contents`` row keeps (its chunks joined); None when it is not one."""
    value = json.loads(rows[address])
    if isinstance(value, str):
        return value
    listed = value.get(CHUNKS) if isinstance(value, dict) else None
    if not isinstance(listed, list):
        return None
    parts = []
    for part in listed:
        found = json.loads(rows[part]) if isinstance(part, str) and part in rows else None
        if not isinstance(found, str):
            raise ValueError(f"a chunk of the content {address} is missing ({part!r})")
        parts.append(found)
    return "".join(parts)


def read_body(text: str, fetch: Fetch, *, what: str) -> str:
    """A stored body's JSON as it was given to :func:`kept` (its references resolved);
    ``what`` names it in the error raised when it cannot be resolved."""
    if not has_refs(text):
        return text
    try:
        return _dumps(_resolved(text, fetch))
    except ValueError as exc:
        raise RunError(f"{what} is unreadable ({exc}); it was altered — the row is left as "
                       "it is") from exc


def read_recording(run_id: str, text: str, where: str, fetch: Fetch) -> Recording:
    """A stored run body as a recording, its references resolved (``parse_stored`` for the
    rest: unreadable, an error naming the run and the store)."""
    if not has_refs(text):
        return parse_stored(run_id, text, where)
    try:
        data = _resolved(text, fetch)
    except ValueError as exc:
        raise RunError(f"run {run_id!r} in {where} is unreadable ({exc}); it was altered — "
                       "the row is left as it is") from exc
    return parse_stored(run_id, data, where)
