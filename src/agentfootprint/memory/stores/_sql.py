"""The SQL the two SQL stores share, written once over a small ``Dialect``.

SQLite and PostgreSQL keep the same tables (see ``sqlite._SCHEMA`` and ``_pgschema``), so
paging (newest first, a keyset cursor on ``(updated_at, seq)``), expiry (an entry whose
``expires_at`` is at or before ``now`` is not there), the reads and writes by key, signatures
and turn claims are one set of statements; a ``Dialect`` holds only what the two spell
differently. Statements are templates: shared text is written with ``?`` marks, swapped for the
dialect's, and ``{entries}``, ``{signatures}``, ``{claims}``, ``{holders}`` and ``{vector}``
(pgvector's type) are filled in by each store — plain names in SQLite, quoted identifiers in
PostgreSQL. Only column names and marks are spliced into the text; every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from agentfootprint.memory._entry import MemoryEntry
from agentfootprint.memory._errors import UnreadableEntryError
from agentfootprint.memory._store import MemoryPage, ScoredEntry
from agentfootprint.memory.stores._keyset import encode_cursor

__all__ = [
    "ENTRY_COLUMNS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Statements",
    "entry_row",
    "live",
    "page_of",
    "page_query",
    "same_id",
    "scored",
    "statements",
    "tier_filter",
]

ENTRY_COLUMNS = ("namespace", "id", "updated_at", "expires_at", "tier", "body", "embedding",
                 "embedding_model")
"""The columns a put writes, in :func:`entry_row`'s order (``seq`` is drawn by the table)."""

_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_BY_KEY = "namespace = ? AND id = ?"
_CLAIM = "namespace = ? AND turn = ?"


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialect:
    """What SQLite and PostgreSQL spell differently in the shared statements."""

    mark: str
    """The driver's parameter mark: ``?`` (sqlite3) or ``%s`` (psycopg)."""
    read_vector: str
    """The select expression that reads a row's vector: the float32 blob, or pgvector's text."""
    bind_vector: str
    """The mark that writes a vector into its column (pgvector's needs a cast to its type)."""
    tiers_as_array: bool
    """Bind a tier filter as one ``text[]`` (``= ANY``) rather than one mark per tier (``IN``)."""
    on_conflict: bool
    """Settle key conflicts with ``ON CONFLICT`` clauses rather than ``INSERT OR IGNORE`` /
    ``INSERT OR REPLACE``; either way a replaced entry draws a new ``seq``."""

    def marked(self, text: str) -> str:
        """``text`` (written with ``?`` marks, and no other ``?``) with this dialect's marks."""
        return text if self.mark == "?" else text.replace("?", self.mark)


SQLITE = Dialect(mark="?", read_vector="embedding", bind_vector="?", tiers_as_array=False,
                 on_conflict=False)
POSTGRES = Dialect(mark="%s", read_vector="embedding::text", bind_vector="?::{vector}",
                   tiers_as_array=True, on_conflict=True)


@dataclass(frozen=True, slots=True)
class Statements:
    """A dialect's fixed statements, as templates; parameters in the order each names."""

    get: str
    """``body, vector`` of the live entry: namespace, id, now."""
    read: str
    """``body, vector`` of the entry, live or not: namespace, id."""
    put: str
    """Write one :func:`entry_row`, replacing the entry under the same key."""
    delete: str
    """namespace, id."""
    seen: str
    """A row when the signature is recorded: namespace, signature."""
    record_signature: str
    """namespace, signature; a second record of it changes nothing."""
    claim_turn: str
    """namespace, turn, claimed_at; one changed row means this caller won the turn."""
    holder: str
    """The owner holding a claim: namespace, turn."""
    hold: str
    """Record (or replace) the owner holding a claim: namespace, turn, owner."""
    unhold: str
    """End an owner's hold: namespace, turn, owner; one changed row means it held the turn."""
    reclaim: str
    """Take over a claim nobody holds that was stamped before a cutoff: claimed_at, namespace,
    turn, cutoff, namespace, turn; one changed row means this caller won it."""
    restamp: str
    """Stamp a claim anew: claimed_at, namespace, turn."""
    unclaim: str
    """Remove a claim: namespace, turn."""

    def named(self, names: dict[str, str]) -> Statements:
        """Every template with its table names filled in as plain text."""
        return Statements(**{f.name: getattr(self, f.name).format_map(names)
                              for f in fields(self)})


def statements(dialect: Dialect) -> Statements:
    """The fixed statements in ``dialect``."""
    read = f"SELECT body, {dialect.read_vector} FROM {{entries}} WHERE {_BY_KEY}"  # noqa: S608
    values = ", ".join(dialect.bind_vector if c == "embedding" else "?" for c in ENTRY_COLUMNS)
    put = f"INTO {{entries}} ({', '.join(ENTRY_COLUMNS)}) VALUES ({values})"
    if dialect.on_conflict:
        updated = ", ".join(f"{c} = EXCLUDED.{c}" for c in ("seq", *ENTRY_COLUMNS[2:]))
        put = f"INSERT {put} ON CONFLICT (namespace, id) DO UPDATE SET {updated}"
    else:
        put = f"INSERT OR REPLACE {put}"
    return Statements(
        get=dialect.marked(f"{read} AND {_LIVE}"),
        read=dialect.marked(read),
        put=dialect.marked(put),
        delete=dialect.marked(f"DELETE FROM {{entries}} WHERE {_BY_KEY}"),  # noqa: S608
        seen=dialect.marked("SELECT 1 FROM {signatures} WHERE namespace = ? AND signature = ?"),
        record_signature=_insert_new(dialect, "{signatures}", ("namespace", "signature")),
        claim_turn=_insert_new(dialect, "{claims}", ("namespace", "turn", "claimed_at")),
        holder=dialect.marked(f"SELECT owner FROM {{holders}} WHERE {_CLAIM}"),  # noqa: S608
        hold=dialect.marked(
            "INSERT INTO {holders} (namespace, turn, owner) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace, turn) DO UPDATE SET owner = excluded.owner"),
        unhold=dialect.marked(
            f"DELETE FROM {{holders}} WHERE {_CLAIM} AND owner = ?"),  # noqa: S608
        reclaim=dialect.marked(
            f"UPDATE {{claims}} SET claimed_at = ? WHERE {_CLAIM} AND claimed_at < ? "  # noqa: S608
            f"AND NOT EXISTS (SELECT 1 FROM {{holders}} WHERE {_CLAIM})"),
        restamp=dialect.marked(f"UPDATE {{claims}} SET claimed_at = ? WHERE {_CLAIM}"),  # noqa: S608
        unclaim=dialect.marked(f"DELETE FROM {{claims}} WHERE {_CLAIM}"),  # noqa: S608
    )


def _insert_new(dialect: Dialect, table: str, columns: Sequence[str]) -> str:
    """Insert a row unless its key is taken (then nothing changes and no error is raised)."""
    row = f"{table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    if dialect.on_conflict:
        return dialect.marked(f"INSERT INTO {row} ON CONFLICT DO NOTHING")
    return dialect.marked(f"INSERT OR IGNORE INTO {row}")


def live(dialect: Dialect) -> str:
    """The condition that keeps entries not expired at the bound ``now``."""
    return dialect.marked(_LIVE)


def tier_filter(dialect: Dialect, tiers: Sequence[str]) -> tuple[str, list[object]]:
    """The condition that keeps entries of ``tiers`` (none when empty), and its parameters."""
    if dialect.tiers_as_array:
        return dialect.marked("tier = ANY(?::text[])"), [list(tiers)]
    if not tiers:
        return "0", []
    return f"tier IN ({', '.join([dialect.mark] * len(tiers))})", list(tiers)


def page_query(
    dialect: Dialect,
    namespace: str,
    now: int,
    *,
    tiers: Sequence[str] | None,
    after: tuple[int, int] | None,
    size: int,
) -> tuple[str, list[object]]:
    """One page of live entries, newest first, after the keyset ``after``; one row more than
    ``size`` is asked for, so :func:`page_of` knows whether another page follows.

    Rows are ``id, body, vector, updated_at, seq``. The row-value comparison lets both backends
    start the page with a range seek on the ``(namespace, updated_at, seq)`` index.
    """
    where = [dialect.marked(f"namespace = ? AND {_LIVE}")]
    params: list[object] = [namespace, now]
    if tiers is not None:
        clause, values = tier_filter(dialect, tiers)
        where.append(clause)
        params += values
    if after is not None:
        where.append(dialect.marked("(updated_at, seq) < (?, ?)"))
        params += after
    params.append(size + 1)
    query = (
        f"SELECT id, body, {dialect.read_vector}, updated_at, seq FROM {{entries}} "  # noqa: S608
        f"WHERE {' AND '.join(where)} ORDER BY updated_at DESC, seq DESC LIMIT {dialect.mark}"
    )
    return query, params


def page_of(
    rows: Sequence[Sequence[Any]], size: int, decode: Callable[[str, str, Any], MemoryEntry]
) -> MemoryPage:
    """The page :func:`page_query`'s rows make, each entry read by the store's ``decode``."""
    page = rows[:size]
    entries = [decode(row[0], row[1], row[2]) for row in page]
    more = len(rows) > size
    return MemoryPage(
        entries=entries, cursor=encode_cursor(page[-1][3], page[-1][4]) if more else None
    )


def scored(
    rows: Sequence[Sequence[Any]], decode: Callable[[str, str, Any], MemoryEntry]
) -> list[ScoredEntry]:
    """Search hits from rows ``id, body, vector, score``, best first as given; scores are
    clamped to [-1, 1] (float rounding may step just outside)."""
    return [
        ScoredEntry(entry=decode(row[0], row[1], row[2]), score=max(-1.0, min(1.0, row[3])))
        for row in rows
    ]


def same_id(entry: MemoryEntry, entry_id: str, *, store: str) -> MemoryEntry:
    """``entry`` when it is the one its row's key names; a row holding another entry is
    refused (and left as it is), never read as that other entry."""
    if entry.id != entry_id:
        raise UnreadableEntryError(
            f"{store} row {entry_id!r} holds an entry with id {entry.id!r}; "
            "the row is left as it is — repair or delete it.",
            store=store,
            entry_id=entry_id,
        )
    return entry


def entry_row(
    namespace: str, entry: MemoryEntry, pack: Callable[[Sequence[float]], object]
) -> tuple[object, ...]:
    """``entry`` as one row in :data:`ENTRY_COLUMNS` order: the body is its JSON without the
    vector, which is stored apart in the backend's own form by ``pack``."""
    return (namespace, entry.id, entry.updated_at, entry.expires_at, entry.tier,
            entry.model_dump_json(exclude={"embedding"}),
            None if entry.embedding is None else pack(entry.embedding), entry.embedding_model)
