"""The run store: recordings kept in a SQLite file (``.agentfootprint/runs.db`` by default).

Save a run's recording, list recent runs, load one in another process, or query the tables beside
the bodies with any SQLite client (``runs``; ``llm_calls``, one row a model call with its cached
tokens, cost and latency; ``injections``; ``tool_calls``). The file carries its schema version
(``PRAGMA user_version``): a file of an older version is upgraded in place on open, its query
tables rebuilt from the bodies; a newer one is refused. A row that cannot be read raises an error
naming the run and the file; it is never replaced by an empty recording.
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigurationError, RunError
from ._chain import head_for_save
from ._content import Kept, kept, read_body, read_recording
from ._lifecycle import (
    OPEN_STATUSES,
    check_run_id,
    entry_json,
    extends,
    parse_entry,
    refuse_reopen,
    refuse_taken,
    with_progress,
)
from ._listing import SQLListing
from ._recording import Recording
from ._store import (
    RUN_STORE_SCHEMA,
    RunSource,
    RunSummary,
    parse_proof,
    preview_of,
    proof_json,
    recording_of,
)
from ._tables import QueryRows, query_rows
from ._wal import enter_wal
from ._writer import close_writer

__all__ = ["DEFAULT_RUN_STORE", "RunStore"]

DEFAULT_RUN_STORE = Path(".agentfootprint") / "runs.db"

_RUNS: Final = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    preview TEXT NOT NULL,
    body TEXT NOT NULL
)"""
_RUN_COLUMNS: Final = (("format", "TEXT"), ("llm_calls", "INTEGER"), ("input_tokens", "INTEGER"),
                       ("output_tokens", "INTEGER"), ("tool_calls", "INTEGER"),
                       ("cache_read_tokens", "INTEGER"), ("cache_write_tokens", "INTEGER"),
                       ("cost_usd", "REAL"))
_CALL_COLUMNS: Final = (("cache_read_tokens", "INTEGER NOT NULL DEFAULT 0"),
                        ("cache_write_tokens", "INTEGER NOT NULL DEFAULT 0"),
                        ("cost_usd", "REAL"), ("latency_ms", "REAL"))
"""Added in schema 4 (a NULL cost: the model has no price; a NULL latency: not recorded)."""
_QUERY_TABLES: Final = """
CREATE TABLE IF NOT EXISTS llm_calls (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    call_idx INTEGER NOT NULL, runtime_stage_id TEXT NOT NULL, iteration INTEGER,
    model TEXT, provider TEXT, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    stop_reason TEXT, tool_calls INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL, latency_ms REAL,
    PRIMARY KEY (run_id, call_idx));
CREATE TABLE IF NOT EXISTS injections (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    call_idx INTEGER NOT NULL, injection_id TEXT NOT NULL, slot TEXT NOT NULL,
    trigger TEXT NOT NULL,
    PRIMARY KEY (run_id, call_idx, injection_id, slot));
CREATE TABLE IF NOT EXISTS tool_calls (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    call_idx INTEGER NOT NULL, tool_call_id TEXT NOT NULL, name TEXT NOT NULL,
    PRIMARY KEY (run_id, call_idx, tool_call_id));
CREATE INDEX IF NOT EXISTS runs_recent ON runs (created_at DESC, run_id DESC);
"""
_APPENDED: Final = """
CREATE TABLE IF NOT EXISTS proofs (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS progress (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS contents (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    address TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, address));
"""
"""Schema 3: proofs and progress; schema 6: each large string of a run, once (``_content``)."""


class RunStore(SQLListing):
    """Recordings in one SQLite file (WAL mode, safe for several processes)."""

    def __init__(self, path: str | Path = DEFAULT_RUN_STORE) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # one thread at a time (self._lock): the caller's, or the run writer's
            self._lock = threading.RLock()
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            enter_wal(self._db)  # a fresh file other processes open at once, too
            # a commit survives the process being killed; only a power cut may lose the last
            # few (never a corrupt file): the price of one fsync per progress entry is not paid
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._open_schema()
        except sqlite3.Error as exc:
            raise ConfigurationError(
                f"cannot open the run store {str(self.path)!r} ({exc}); check the path and "
                "that it is a SQLite file") from exc

    def _open_schema(self) -> None:
        """Create the schema, or upgrade an older file in one transaction; refuse a newer one."""
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version == RUN_STORE_SCHEMA:
            return
        if version > RUN_STORE_SCHEMA:
            raise ConfigurationError(
                f"the run store {str(self.path)!r} has schema version {version}, newer than "
                f"this agentfootprint reads ({RUN_STORE_SCHEMA}); upgrade agentfootprint, or "
                "point --store at another file")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            if version < RUN_STORE_SCHEMA:  # another process may have upgraded it meanwhile
                self._upgrade(version)
                self._db.execute(f"PRAGMA user_version = {RUN_STORE_SCHEMA}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _upgrade(self, version: int) -> None:
        """Schema 0/1 (bodies only) to 2: the run columns and query tables, rebuilt from the
        bodies; 2 to 3: the append-only tables (proofs, progress); 3 to 4: cached tokens, cost
        and latency in ``llm_calls`` (and the run's totals), the query tables rebuilt; 5 to 6:
        ``contents`` (bodies written before keep their strings inline, and read as before)."""
        if version < 4:
            self._add_query_tables()
        self._statements(_APPENDED)
        if "chain_head" not in {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}:
            self._db.execute("ALTER TABLE runs ADD COLUMN chain_head TEXT")  # schema 5

    def _statements(self, script: str) -> None:
        for statement in script.split(";"):  # not executescript: it would commit
            if statement.strip():
                self._db.execute(statement)

    def _add_query_tables(self) -> None:
        self._db.execute(_RUNS)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
        for name, kind in _RUN_COLUMNS:
            if name not in have:
                self._db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
        self._statements(_QUERY_TABLES)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(llm_calls)")}
        for name, kind in _CALL_COLUMNS:
            if name not in have:
                self._db.execute(f"ALTER TABLE llm_calls ADD COLUMN {name} {kind}")
        for run_id, body in self._db.execute("SELECT run_id, body FROM runs").fetchall():
            self._write_rows(query_rows(self._parse(run_id, body)))

    def save(self, result: RunSource, *, meta: dict[str, Any] | None = None) -> Recording:
        """Store the recording of ``result`` (a RunResult, FlowRun or Recording); return it.

        A run id names one run: saving again is accepted when the new recording extends the
        stored one (the same run, further on); another run under the same id is refused.
        """
        recording = recording_of(result, meta)
        run_id = check_run_id(recording.run_id)
        rows = query_rows(recording)
        body = recording.to_json()
        head = head_for_save(recording, body)
        stored = kept(body, recording)
        with self._failing("save run " + repr(run_id)), self._transaction():
            found = self._db.execute("SELECT status, body FROM runs WHERE run_id = ?",
                                     (run_id,)).fetchone()
            if found is not None and not extends(self._full(run_id, found[1]), recording):
                raise refuse_taken(run_id, found[0], repr(str(self.path)))
            self._db.execute(  # an upsert, not REPLACE: a delete would cascade to the proofs
                "INSERT INTO runs (run_id, name, kind, status, created_at, preview, body, "
                "chain_head) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "name = excluded.name, kind = excluded.kind, status = excluded.status, "
                "preview = excluded.preview, body = excluded.body, "
                "chain_head = excluded.chain_head",
                (run_id, recording.name, recording.kind, recording.status,
                 recording.created_at, preview_of(recording), stored.text, head))
            self._keep(run_id, stored)
            self._write_rows(rows)
        return recording

    def begin(self, recording: Recording, *, reopen: str | None = None) -> None:
        """Put a starting run in the store (its status ``running``), before it does anything.

        A run id already in the store is refused (another run holds it), unless ``reopen``
        resumes that same run and names the status its row must have: ``"paused"`` (resumed
        from its checkpoint) or ``"running"`` (resumed after a crash). The row is taken as it
        is (its status moves on with its first progress entry); any other status is refused
        (a checkpoint resumed already, a run that ended).
        """
        run_id = check_run_id(recording.run_id)
        where = repr(str(self.path))
        with self._failing(f"record the start of run {run_id!r}"), self._transaction():
            found = self._db.execute("SELECT status FROM runs WHERE run_id = ?",
                                     (run_id,)).fetchone()
            if found is not None and reopen is None:
                raise refuse_taken(run_id, found[0], where)
            if found is not None and (reopen not in OPEN_STATUSES or found[0] != reopen):
                raise refuse_reopen(run_id, found[0], str(reopen), where)
            if found is not None:
                return  # its status moves on with its first progress entry (or its save)
            stored = kept(recording.to_json(), recording)
            self._db.execute(
                "INSERT INTO runs (run_id, name, kind, status, created_at, preview, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, recording.name, recording.kind, recording.status,
                 recording.created_at, "", stored.text))
            self._keep(run_id, stored)

    def append_progress(self, run_id: str, entry: Mapping[str, Any]) -> None:
        """Append one progress entry to a run under way (append-only; it marks it running)."""
        stored = kept(entry_json(run_id, entry), entry)
        with self._failing(f"record the progress of run {run_id!r}"), self._transaction():
            self._known(run_id)
            self._db.execute(
                "INSERT INTO progress (run_id, seq, body) SELECT ?, coalesce(max(seq), 0) + 1, "
                "? FROM progress WHERE run_id = ?", (run_id, stored.text, run_id))
            self._keep(run_id, stored)
            self._db.execute("UPDATE runs SET status = 'running' WHERE run_id = ? AND "
                             "status <> 'running'", (run_id,))

    def progress(self, run_id: str) -> list[dict[str, Any]]:
        """The progress entries of ``run_id``, oldest first."""
        with self._failing(f"read the progress of run {run_id!r}"):
            self._known(run_id)
            rows = self._db.execute("SELECT body FROM progress WHERE run_id = ? ORDER BY seq",
                                    (run_id,)).fetchall()
        where = repr(str(self.path))
        return [parse_entry(run_id, self._full(run_id, row[0]), where) for row in rows]

    def _keep(self, run_id: str, stored: Kept) -> None:
        """Keep the strings a body references, each once per run (``_content.py``)."""
        self._db.executemany("INSERT OR IGNORE INTO contents (run_id, address, body) VALUES "
                             "(?, ?, ?)", [(run_id, *item) for item in stored.contents.items()])

    def _contents(self, run_id: str, addresses: list[str]) -> dict[str, str]:
        """The ``contents`` rows of ``run_id`` at ``addresses`` (500 to a statement)."""
        found: dict[str, str] = {}
        with self._failing(f"read the contents of run {run_id!r}"):
            for at in range(0, len(addresses), 500):
                part = addresses[at:at + 500]
                found.update(self._db.execute(
                    "SELECT address, body FROM contents WHERE run_id = ? AND address IN "  # noqa: S608
                    f"({', '.join('?' * len(part))})", (run_id, *part)).fetchall())
        return found

    def _full(self, run_id: str, body: str) -> str:
        """A stored body with the strings it references put back."""
        return read_body(body, lambda wanted: self._contents(run_id, wanted),
                         what=f"a body of run {run_id!r} in {str(self.path)!r}")

    def _write_rows(self, rows: QueryRows) -> None:
        run = rows.run
        run_id = run["run_id"]
        for table in ("llm_calls", "injections", "tool_calls"):
            self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))  # noqa: S608
        self._db.execute(
            "UPDATE runs SET format = ?, llm_calls = ?, input_tokens = ?, output_tokens = ?, "
            "tool_calls = ?, cache_read_tokens = ?, cache_write_tokens = ?, cost_usd = ? "
            "WHERE run_id = ?",
            (run["format"], run["llm_calls"], run["input_tokens"], run["output_tokens"],
             run["tool_calls"], run["cache_read_tokens"], run["cache_write_tokens"],
             run["cost_usd"], run_id))
        self._db.executemany(
            "INSERT INTO llm_calls (run_id, call_idx, runtime_stage_id, iteration, model, "
            "provider, input_tokens, output_tokens, stop_reason, tool_calls, cache_read_tokens, "
            "cache_write_tokens, cost_usd, latency_ms) VALUES (:run_id, :call_idx, "
            ":runtime_stage_id, :iteration, :model, :provider, :input_tokens, :output_tokens, "
            ":stop_reason, :tool_calls, :cache_read_tokens, :cache_write_tokens, :cost_usd, "
            ":latency_ms)", rows.llm_calls)
        self._db.executemany(
            "INSERT OR IGNORE INTO injections VALUES (:run_id, :call_idx, :injection_id, :slot, "
            ":trigger)", rows.injections)
        self._db.executemany(
            "INSERT OR IGNORE INTO tool_calls VALUES (:run_id, :call_idx, :tool_call_id, :name)",
            rows.tool_calls)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """Driver errors become ``RunError`` naming the store and the operation; the
        connection is used by one thread at a time (the caller's or the run writer's)."""
        try:
            with self._lock:
                yield
        except sqlite3.Error as exc:
            raise RunError(f"the run store {str(self.path)!r} failed to {what} ({exc}); "
                           "nothing was replaced — check the file and retry") from exc

    def load(self, run_id: str) -> Recording:
        """The recording of ``run_id``; a clear error when it is missing or unreadable."""
        with self._failing(f"load run {run_id!r}"):
            row = self._db.execute("SELECT body, status FROM runs WHERE run_id = ?",
                                   (run_id,)).fetchone()
        if row is None:
            known = [r.run_id for r in self.list(limit=5)]
            hint = f" (recent: {', '.join(known)})" if known else " (the store is empty)"
            raise KeyError(f"no run {run_id!r} in {str(self.path)!r}{hint}; "
                           "see `agentfootprint runs list`")
        recording = self._parse(run_id, row[0])
        if row[1] != "running":
            return recording
        stored = recording.model_copy(update={"status": "running"})
        return with_progress(stored, self.progress(run_id))

    def chain_head(self, run_id: str) -> str | None:
        """The audit chain head kept when ``run_id`` was saved (None: none kept, or the run is
        running again, so its body is not what was hashed); check it with
        ``runs._chain.check_chain_head``."""
        with self._failing(f"read the chain head of run {run_id!r}"):
            row = self._db.execute("SELECT chain_head, status FROM runs WHERE run_id = ?",
                                   (run_id,)).fetchone()
        return None if row is None or row[1] == "running" else row[0]

    def _parse(self, run_id: str, body: str) -> Recording:
        return read_recording(run_id, body, repr(str(self.path)),
                              lambda wanted: self._contents(run_id, wanted))

    def add_proof(self, run_id: str, proof: Mapping[str, Any]) -> None:
        """Append ``proof`` (a JSON object: a verdict, a re-run's outcome) to ``run_id``'s row.

        Proofs are only ever added, never changed or removed, so every later reader sees them.
        """
        body = proof_json(check_run_id(run_id), proof)
        with self._failing(f"add a proof to run {run_id!r}"), self._transaction():
            self._known(run_id)
            self._db.execute(
                "INSERT INTO proofs (run_id, seq, body) SELECT ?, coalesce(max(seq), 0) + 1, ? "
                "FROM proofs WHERE run_id = ?", (run_id, body, run_id))

    def proofs(self, run_id: str) -> list[dict[str, Any]]:
        """The proofs added to ``run_id``, in the order they were added."""
        with self._failing(f"read the proofs of run {run_id!r}"):
            self._known(run_id)
            rows = self._db.execute("SELECT body FROM proofs WHERE run_id = ? ORDER BY seq",
                                    (run_id,)).fetchall()
        return [parse_proof(run_id, row[0], repr(str(self.path))) for row in rows]

    def _known(self, run_id: str) -> None:
        if self._db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            raise KeyError(f"no run {run_id!r} in {str(self.path)!r}; save the run before "
                           "adding to it (see `agentfootprint runs list`)")

    def list(self, *, limit: int = 20) -> list[RunSummary]:
        """The most recent runs first."""
        with self._failing("list runs"):
            rows = self._db.execute(
                "SELECT run_id, name, kind, status, created_at, preview FROM runs "
                "ORDER BY created_at DESC, run_id DESC LIMIT ?", (limit,)).fetchall()
        return [RunSummary(*row) for row in rows]

    def _select(self, doing: str, text: str, args: builtins.list[Any]) -> builtins.list[Any]:
        """One SELECT of ``list_runs`` and its kin (``_listing.SQLListing``)."""
        with self._failing(doing):
            return self._db.execute(text.format(runs="runs", proofs="proofs").replace(
                "%s", "?"), args).fetchall()

    def close(self) -> None:
        """Close the file once every write an agent asked of the store has landed."""
        close_writer(self)
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
