"""The SQL the SQLite and PostgreSQL session stores share, written once.

Two tables: ``{sessions}`` (one row per session; the owner column is written by the INSERT and
by nothing else) and ``{entries}`` (transcript lines, ``(session_id, seq)``). Statements use
``?`` placeholders, ``{sessions}``/``{entries}`` for the table names and ``{columns}`` for
``COLUMNS``; the PostgreSQL store
swaps in ``%s`` and quoted, schema-qualified names. Every write that must be atomic is one
statement or runs inside one transaction the store opens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ._sessions import SessionRecord, check_record

__all__ = ["COLUMNS", "DDL", "SQL", "record_of"]

COLUMNS: Final = ("id, owner, agent, created_at, updated_at, turns, status, checkpoint, holder, "
                  "lease_until")

DDL: Final = (
    "CREATE TABLE IF NOT EXISTS {sessions} (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "agent TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, "
    "updated_at DOUBLE PRECISION NOT NULL, turns INTEGER NOT NULL, status TEXT NOT NULL, "
    "checkpoint TEXT, holder TEXT, lease_until DOUBLE PRECISION NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS {owner_index} ON {sessions} (owner, updated_at, id)",
    "CREATE INDEX IF NOT EXISTS {updated_index} ON {sessions} (updated_at)",
    "CREATE TABLE IF NOT EXISTS {entries} (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "body TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
)

SQL: Final = {
    "insert": "INSERT INTO {sessions} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (id) DO NOTHING",
    "get": "SELECT {columns} FROM {sessions} WHERE id = ?",
    "claim": "UPDATE {sessions} SET holder = ?, lease_until = ? WHERE id = ? AND "
             "(holder IS NULL OR lease_until < ?)",
    "renew": "UPDATE {sessions} SET lease_until = ? WHERE id = ? AND holder = ?",
    "free": "UPDATE {sessions} SET holder = NULL, lease_until = 0 WHERE id = ? AND holder = ?",
    "finish": "UPDATE {sessions} SET holder = NULL, lease_until = 0, turns = ?, status = ?, "
              "checkpoint = ?, updated_at = ? WHERE id = ? AND holder = ?",
    "append": "INSERT INTO {entries} (session_id, seq, body) VALUES (?, (SELECT "
              "COALESCE(MAX(seq), 0) + 1 FROM {entries} WHERE session_id = ?), ?)",
    "transcript": "SELECT body FROM {entries} WHERE session_id = ? ORDER BY seq",
    "list": "SELECT {columns} FROM {sessions} WHERE owner = ? "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
    "delete_entries": "DELETE FROM {entries} WHERE session_id = ?",
    "delete": "DELETE FROM {sessions} WHERE id = ?",
    "stale": "SELECT id FROM {sessions} WHERE updated_at < ? AND "
             "(holder IS NULL OR lease_until < ?)",
    "delete_stale": "DELETE FROM {sessions} WHERE id = ? AND updated_at < ? AND "
                    "(holder IS NULL OR lease_until < ?)",
}
"""Every statement the two stores run, by name."""


def record_of(row: Sequence[Any], store: str) -> SessionRecord:
    """A ``SessionRecord`` from a row of ``COLUMNS``, checked (see ``check_record``)."""
    (session_id, owner, agent, created_at, updated_at, turns, status, checkpoint, holder,
     lease_until) = row
    return check_record(SessionRecord(
        id=str(session_id), owner=str(owner), agent=str(agent), created_at=float(created_at),
        updated_at=float(updated_at), turns=int(turns), status=status, checkpoint=checkpoint,
        holder=holder, lease_until=float(lease_until)), store)
