"""The run store in PostgreSQL: recordings shared by every machine that can reach the server.

The same interface as the SQLite :class:`~agentfootprint.runs.RunStore` — save a run's
recording, list recent runs, load one anywhere else — so a fleet of workers can record runs that
one analyst's process explains. One row per run; the recording is kept as JSON text (not
``jsonb``: a recording may hold ``NaN`` or ``Infinity``, which ``jsonb`` refuses, and text reads
back byte for byte). Beside it, the query tables ``{table}_llm_calls`` (with each call's cached
tokens, cost and latency), ``{table}_injections``
and ``{table}_tool_calls``; ``{table}_meta`` holds the schema version, upgraded in place under
the shared DDL lock (a table of schema 1 gets its query tables rebuilt from the bodies) and
refused when newer. A row that cannot be read raises an error naming the run and the store; it
is never replaced by an empty recording.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._postgres import DDL_LOCK, INSTALL_HINT, check_identifier, server_label
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
from ._writer import close_writer

if TYPE_CHECKING:
    from psycopg import Connection, sql

__all__ = ["PostgresRunStore"]

_DDL = (
    "CREATE TABLE IF NOT EXISTS {runs} (run_id text PRIMARY KEY, name text NOT NULL, "
    "kind text NOT NULL, status text NOT NULL, created_at double precision NOT NULL, "
    "preview text NOT NULL, body text NOT NULL)",
    'CREATE INDEX IF NOT EXISTS {recent} ON {runs} (created_at DESC, run_id COLLATE "C" DESC)',
    "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS format text, "
    "ADD COLUMN IF NOT EXISTS llm_calls integer, ADD COLUMN IF NOT EXISTS input_tokens integer, "
    "ADD COLUMN IF NOT EXISTS output_tokens integer, ADD COLUMN IF NOT EXISTS tool_calls integer",
    "CREATE TABLE IF NOT EXISTS {calls} (run_id text NOT NULL REFERENCES {runs} ON DELETE "
    "CASCADE, call_idx integer NOT NULL, runtime_stage_id text NOT NULL, iteration integer, "
    "model text, provider text, input_tokens integer NOT NULL, output_tokens integer NOT NULL, "
    "stop_reason text, tool_calls integer NOT NULL, PRIMARY KEY (run_id, call_idx))",
    "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS cache_read_tokens integer, "
    "ADD COLUMN IF NOT EXISTS cache_write_tokens integer, "
    "ADD COLUMN IF NOT EXISTS cost_usd double precision",
    "ALTER TABLE {calls} ADD COLUMN IF NOT EXISTS cache_read_tokens integer NOT NULL DEFAULT 0, "
    "ADD COLUMN IF NOT EXISTS cache_write_tokens integer NOT NULL DEFAULT 0, "
    "ADD COLUMN IF NOT EXISTS cost_usd double precision, "
    "ADD COLUMN IF NOT EXISTS latency_ms double precision",
    "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS chain_head text",  # schema 5
    "CREATE TABLE IF NOT EXISTS {injections} (run_id text NOT NULL REFERENCES {runs} ON DELETE "
    "CASCADE, call_idx integer NOT NULL, injection_id text NOT NULL, slot text NOT NULL, "
    "trigger text NOT NULL, PRIMARY KEY (run_id, call_idx, injection_id, slot))",
    "CREATE TABLE IF NOT EXISTS {tools} (run_id text NOT NULL REFERENCES {runs} ON DELETE "
    "CASCADE, call_idx integer NOT NULL, tool_call_id text NOT NULL, name text NOT NULL, "
    "PRIMARY KEY (run_id, call_idx, tool_call_id))",
    "CREATE TABLE IF NOT EXISTS {proofs} (run_id text NOT NULL REFERENCES {runs} ON DELETE "
    "CASCADE, seq integer NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS {progress} (run_id text NOT NULL REFERENCES {runs} ON DELETE "
    "CASCADE, seq integer NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS {contents} (run_id text NOT NULL REFERENCES {runs} ON DELETE "
    "CASCADE, address text NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, address))",
)

_MAX_TABLE = 63 - len("_injections")


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            f"PostgresRunStore needs psycopg 3 ({exc.name!r} is missing); install it with: "
            f"{INSTALL_HINT}"
        ) from exc
    return psycopg


class PostgresRunStore(SQLListing):
    """Recordings in one PostgreSQL table (``{schema}.{table}``), safe for many processes.

    Give ``url`` (the store opens and owns one connection; :meth:`close` or ``with`` closes
    it) or ``conn`` (a psycopg ``Connection`` you own and close). With ``create_schema=True``
    (the default) the schema and table are created when missing.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        conn: Connection[Any] | None = None,
        schema: str = "public",
        table: str = "af_runs",
        create_schema: bool = True,
        connect_timeout: int = 10,
    ) -> None:
        if (url is None) == (conn is None) or url == "":
            raise ConfigurationError(
                "PostgresRunStore needs exactly one of url= or conn=; "
                "e.g. PostgresRunStore('postgresql://…')."
            )
        self._psycopg = _import_psycopg()
        self._schema = check_identifier("PostgresRunStore", "schema", schema, 63)
        self._table_name = check_identifier("PostgresRunStore", "table", table, _MAX_TABLE)
        sql = self._psycopg.sql
        self._table = sql.Identifier(schema, table)
        where = server_label(self._psycopg, conn.info.dsn if conn is not None else url or "")
        self._name = f"PostgresRunStore({where!r}, schema={schema!r}, table={table!r})"
        self._owns_conn = conn is None
        if conn is not None:
            self._db: Connection[Any] = conn
        else:
            try:
                self._db = self._psycopg.connect(
                    url, autocommit=True, connect_timeout=max(2, connect_timeout)
                )
            except self._psycopg.Error as exc:
                raise ConfigurationError(
                    f"cannot open the run store {self.name} ({exc}); check the URL and that "
                    "PostgreSQL is running and reachable"
                ) from exc
        if create_schema:
            try:
                self._create(sql)
            except self._psycopg.Error as exc:
                self.close()
                raise ConfigurationError(
                    f"cannot create the run store table in {self.name} ({exc}); use a role "
                    "that may create it, or create it once and pass create_schema=False"
                ) from exc

    @property
    def name(self) -> str:
        """How errors and hints name this store (never with a password)."""
        return self._name

    def _named(self, suffix: str) -> Any:
        return self._psycopg.sql.Identifier(self._schema, f"{self._table_name}_{suffix}")

    def _create(self, sql: Any) -> None:
        """Create or upgrade the tables in one transaction under the shared DDL lock."""
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (DDL_LOCK,))
            cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self._schema)))
            meta = self._named("meta")
            cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, "
                                "value text NOT NULL)").format(meta))
            cur.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema'").format(meta))
            found = cur.fetchone()
            version = int(found[0]) if found else 1
            if found is not None and version > RUN_STORE_SCHEMA:
                raise ConfigurationError(
                    f"the run store {self.name} has schema version {version}, newer than this "
                    f"agentfootprint reads ({RUN_STORE_SCHEMA}); upgrade agentfootprint")
            if found is not None and version == RUN_STORE_SCHEMA:
                return
            for statement in _DDL:
                cur.execute(sql.SQL(statement).format(
                    runs=self._table, recent=sql.Identifier(f"{self._table_name}_recent"),
                    calls=self._named("llm_calls"), injections=self._named("injections"),
                    tools=self._named("tool_calls"), proofs=self._named("proofs"),
                    progress=self._named("progress"), contents=self._named("contents")))
            if version < 4:  # rebuild the query tables from the bodies (new columns filled)
                cur.execute(sql.SQL("SELECT run_id, body FROM {}").format(self._table))
                for run_id, body in cur.fetchall():
                    self._write_rows(cur, query_rows(self._parse(run_id, body)))
            cur.execute(sql.SQL("INSERT INTO {} VALUES ('schema', %s) ON CONFLICT (key) DO "
                                "UPDATE SET value = EXCLUDED.value").format(meta),
                        (str(RUN_STORE_SCHEMA),))

    def _write_rows(self, cur: Any, rows: QueryRows) -> None:
        sql = self._psycopg.sql
        run = rows.run
        for suffix in ("llm_calls", "injections", "tool_calls"):
            cur.execute(sql.SQL("DELETE FROM {} WHERE run_id = %s").format(self._named(suffix)),
                        (run["run_id"],))
        cur.execute(sql.SQL("UPDATE {} SET format = %s, llm_calls = %s, input_tokens = %s, "
                            "output_tokens = %s, tool_calls = %s, cache_read_tokens = %s, "
                            "cache_write_tokens = %s, cost_usd = %s WHERE run_id = %s"
                            ).format(self._table),
                    (run["format"], run["llm_calls"], run["input_tokens"], run["output_tokens"],
                     run["tool_calls"], run["cache_read_tokens"], run["cache_write_tokens"],
                     run["cost_usd"], run["run_id"]))
        if rows.llm_calls:
            cur.executemany(sql.SQL(
                "INSERT INTO {} (run_id, call_idx, runtime_stage_id, iteration, model, provider, "
                "input_tokens, output_tokens, stop_reason, tool_calls, cache_read_tokens, "
                "cache_write_tokens, cost_usd, latency_ms) VALUES (%(run_id)s, %(call_idx)s, "
                "%(runtime_stage_id)s, %(iteration)s, %(model)s, %(provider)s, "
                "%(input_tokens)s, %(output_tokens)s, %(stop_reason)s, %(tool_calls)s, "
                "%(cache_read_tokens)s, %(cache_write_tokens)s, %(cost_usd)s, %(latency_ms)s)"
            ).format(self._named("llm_calls")), rows.llm_calls)
        if rows.injections:
            cur.executemany(sql.SQL(
                "INSERT INTO {} VALUES (%(run_id)s, %(call_idx)s, %(injection_id)s, %(slot)s, "
                "%(trigger)s) ON CONFLICT DO NOTHING").format(self._named("injections")),
                rows.injections)
        if rows.tool_calls:
            cur.executemany(sql.SQL(
                "INSERT INTO {} VALUES (%(run_id)s, %(call_idx)s, %(tool_call_id)s, %(name)s) "
                "ON CONFLICT DO NOTHING").format(self._named("tool_calls")), rows.tool_calls)

    def _execute(self, doing: str, statement: sql.Composed, params: tuple[Any, ...]) -> Any:
        """Run one statement; driver errors become ``RunError`` naming the store."""
        tuple_row = self._psycopg.rows.tuple_row
        try:
            with self._db.transaction(), self._db.cursor(row_factory=tuple_row) as cur:
                cur.execute(statement, params)
                return cur.fetchall() if cur.description is not None else None
        except self._psycopg.Error as exc:
            raise RunError(f"the run store {self.name} failed to {doing} ({exc})") from exc

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
        sql = self._psycopg.sql
        try:
            with self._db.transaction(), self._db.cursor() as cur:
                cur.execute(sql.SQL("SELECT status, body FROM {} WHERE run_id = %s FOR UPDATE"
                                    ).format(self._table), (run_id,))
                found = cur.fetchone()
                if found is not None and not extends(self._full(run_id, found[1]), recording):
                    raise refuse_taken(run_id, found[0], self.name)
                cur.execute(sql.SQL(
                    "INSERT INTO {} (run_id, name, kind, status, created_at, preview, body, "
                    "chain_head) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) "
                    "DO UPDATE SET name = EXCLUDED.name, kind = EXCLUDED.kind, "
                    "status = EXCLUDED.status, preview = EXCLUDED.preview, "
                    "body = EXCLUDED.body, chain_head = EXCLUDED.chain_head"
                    ).format(self._table),
                    (run_id, recording.name, recording.kind, recording.status,
                     recording.created_at, preview_of(recording), stored.text, head))
                self._keep(cur, run_id, stored)
                self._write_rows(cur, rows)
        except self._psycopg.Error as exc:
            raise RunError(f"the run store {self.name} failed to save run "
                           f"{recording.run_id!r} ({exc})") from exc
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
        sql = self._psycopg.sql
        stored = kept(recording.to_json(), recording)
        try:
            with self._db.transaction(), self._db.cursor() as cur:
                cur.execute(sql.SQL(
                    "INSERT INTO {} (run_id, name, kind, status, created_at, preview, body) "
                    "VALUES (%s, %s, %s, %s, %s, '', %s) ON CONFLICT (run_id) DO NOTHING "
                    "RETURNING 1").format(self._table),
                    (run_id, recording.name, recording.kind, recording.status,
                     recording.created_at, stored.text))
                if cur.fetchone() is not None:
                    self._keep(cur, run_id, stored)
                    return
                cur.execute(sql.SQL("SELECT status FROM {} WHERE run_id = %s FOR UPDATE"
                                    ).format(self._table), (run_id,))
                found = cur.fetchone()
                status = found[0] if found else "unknown"
                if reopen is None:
                    raise refuse_taken(run_id, status, self.name)
                if reopen not in OPEN_STATUSES or status != reopen:
                    raise refuse_reopen(run_id, status, str(reopen), self.name)
        except self._psycopg.Error as exc:
            raise RunError(f"the run store {self.name} failed to record the start of run "
                           f"{run_id!r} ({exc})") from exc

    def append_progress(self, run_id: str, entry: Mapping[str, Any]) -> None:
        """Append one progress entry to a run under way (append-only; it marks it running)."""
        self._append("progress", "record the progress of", run_id,
                     kept(entry_json(run_id, entry), entry), running=True)

    def progress(self, run_id: str) -> list[dict[str, Any]]:
        """The progress entries of ``run_id``, oldest first."""
        return [parse_entry(run_id, self._full(run_id, body), self.name)
                for body in self._bodies("progress", "read the progress of", run_id)]

    def _keep(self, cur: Any, run_id: str, stored: Kept) -> None:
        """Keep the strings a body references, each once per run (``_content.py``)."""
        if stored.contents:
            cur.executemany(self._psycopg.sql.SQL(
                "INSERT INTO {} (run_id, address, body) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING").format(self._named("contents")),
                [(run_id, *item) for item in stored.contents.items()])

    def _contents(self, run_id: str, addresses: list[str]) -> dict[str, str]:
        """The ``contents`` rows of ``run_id`` at ``addresses``."""
        rows = self._execute(f"read the contents of run {run_id!r}", self._psycopg.sql.SQL(
            "SELECT address, body FROM {} WHERE run_id = %s AND address = ANY(%s)"
        ).format(self._named("contents")), (run_id, addresses))
        return dict(rows)

    def _full(self, run_id: str, body: str) -> str:
        """A stored body with the strings it references put back."""
        return read_body(body, lambda wanted: self._contents(run_id, wanted),
                         what=f"a body of run {run_id!r} in {self.name}")

    def _append(self, suffix: str, doing: str, run_id: str, body: str | Kept, *,
                running: bool = False) -> None:
        """Append ``body`` to the ``suffix`` table of a run the store holds."""
        stored = body if isinstance(body, Kept) else Kept(body)
        sql = self._psycopg.sql
        try:
            with self._db.transaction(), self._db.cursor() as cur:
                cur.execute(sql.SQL("SELECT 1 FROM {} WHERE run_id = %s FOR UPDATE"
                                    ).format(self._table), (run_id,))
                if cur.fetchone() is None:
                    raise self._unknown(run_id)
                cur.execute(sql.SQL(
                    "INSERT INTO {rows} (run_id, seq, body) SELECT %s, "
                    "coalesce(max(seq), 0) + 1, %s FROM {rows} WHERE run_id = %s"
                ).format(rows=self._named(suffix)), (run_id, stored.text, run_id))
                self._keep(cur, run_id, stored)
                if running:
                    cur.execute(sql.SQL("UPDATE {} SET status = 'running' WHERE run_id = %s "
                                        "AND status <> 'running'").format(self._table),
                                (run_id,))
        except self._psycopg.Error as exc:
            raise RunError(f"the run store {self.name} failed to {doing} run {run_id!r} "
                           f"({exc})") from exc

    def _bodies(self, suffix: str, doing: str, run_id: str) -> list[str]:
        sql = self._psycopg.sql
        known = self._execute(f"{doing} run {run_id!r}", sql.SQL(
            "SELECT 1 FROM {} WHERE run_id = %s").format(self._table), (run_id,))
        if not known:
            raise self._unknown(run_id)
        rows = self._execute(f"{doing} run {run_id!r}", sql.SQL(
            "SELECT body FROM {} WHERE run_id = %s ORDER BY seq").format(self._named(suffix)),
            (run_id,))
        return [row[0] for row in rows]

    def load(self, run_id: str) -> Recording:
        """The recording of ``run_id``; a clear error when it is missing or unreadable."""
        rows = self._execute(
            f"load run {run_id!r}",
            self._psycopg.sql.SQL("SELECT body, status FROM {} WHERE run_id = %s"
                                  ).format(self._table),
            (run_id,),
        )
        if not rows:
            known = [r.run_id for r in self.list(limit=5)]
            hint = f" (recent: {', '.join(known)})" if known else " (the store is empty)"
            raise KeyError(
                f"no run {run_id!r} in {self.name}{hint}; see `agentfootprint runs list`"
            )
        recording = self._parse(run_id, rows[0][0])
        if rows[0][1] != "running":
            return recording
        stored = recording.model_copy(update={"status": "running"})
        return with_progress(stored, self.progress(run_id))

    def chain_head(self, run_id: str) -> str | None:
        """The audit chain head kept when ``run_id`` was saved (None: none kept, or the run is
        running again, so its body is not what was hashed); check it with
        ``runs._chain.check_chain_head``."""
        rows = self._execute(
            f"read the chain head of run {run_id!r}",
            self._psycopg.sql.SQL("SELECT chain_head, status FROM {} WHERE run_id = %s"
                                  ).format(self._table), (run_id,))
        return None if not rows or rows[0][1] == "running" else rows[0][0]

    def _parse(self, run_id: str, body: str) -> Recording:
        return read_recording(run_id, body, self.name,
                              lambda wanted: self._contents(run_id, wanted))

    def add_proof(self, run_id: str, proof: Mapping[str, Any]) -> None:
        """Append ``proof`` (a JSON object: a verdict, a re-run's outcome) to ``run_id``'s row.

        Proofs are only ever added, never changed or removed, so every later reader sees them.
        """
        self._append("proofs", "add a proof to", run_id,
                     proof_json(check_run_id(run_id), proof))

    def proofs(self, run_id: str) -> list[dict[str, Any]]:
        """The proofs added to ``run_id``, in the order they were added."""
        return [parse_proof(run_id, body, self.name)
                for body in self._bodies("proofs", "read the proofs of", run_id)]

    def _unknown(self, run_id: str) -> KeyError:
        return KeyError(f"no run {run_id!r} in {self.name}; save the run before adding to it "
                        "(see `agentfootprint runs list`)")

    def list(self, *, limit: int = 20) -> list[RunSummary]:
        """The most recent runs first (ties: run id descending, byte order)."""
        rows = self._execute(
            "list runs",
            self._psycopg.sql.SQL(
                "SELECT run_id, name, kind, status, created_at, preview FROM {} "
                'ORDER BY created_at DESC, run_id COLLATE "C" DESC LIMIT %s'
            ).format(self._table),
            (limit,),
        )
        return [RunSummary(*row) for row in rows]

    _order_id = 'r.run_id COLLATE "C"'

    def _select(self, doing: str, text: str, args: builtins.list[Any]) -> builtins.list[Any]:
        """One SELECT of ``list_runs`` and its kin (``_listing.SQLListing``)."""
        statement = self._psycopg.sql.SQL(text).format(runs=self._table,
                                                       proofs=self._named("proofs"))
        return list(self._execute(doing, statement, tuple(args)))

    def close(self) -> None:
        """Close the connection this store opened (never one you passed in), once every write
        an agent asked of the store has landed."""
        close_writer(self)
        if self._owns_conn:
            self._db.close()

    def __enter__(self) -> PostgresRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
