"""The run store: recordings kept in a SQLite file (``.agentfootprint/runs.db`` by default).

Save a run's recording, list recent runs, load one in another process. A row that cannot be
read raises an error naming the run and the file; it is never replaced by an empty recording.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigurationError, RunError
from .recording import Recording

__all__ = ["DEFAULT_RUN_STORE", "RunStore", "RunSummary"]

DEFAULT_RUN_STORE = Path(".agentfootprint") / "runs.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    preview TEXT NOT NULL,
    body TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A line of ``agentfootprint runs list``."""

    run_id: str
    name: str
    kind: str
    status: str
    created_at: float
    preview: str


class RunStore:
    """Recordings in one SQLite file (WAL mode, safe for several processes)."""

    def __init__(self, path: str | Path = DEFAULT_RUN_STORE) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.Error as exc:
            raise ConfigurationError(
                f"cannot open the run store {str(self.path)!r} ({exc}); check the path and "
                "that it is a SQLite file") from exc

    def save(self, result: Any, *, meta: dict[str, Any] | None = None) -> Recording:
        """Store the recording of ``result`` (a RunResult, FlowRun or Recording); return it."""
        recording = result if isinstance(result, Recording) else Recording.of(result, meta=meta)
        preview = str(recording.output if recording.output is not None else "")[:120]
        with self._failing("save run " + repr(recording.run_id)), self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (recording.run_id, recording.name, recording.kind, recording.status,
                 recording.created_at, preview, recording.to_json()))
        return recording

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """Driver errors become ``RunError`` naming the store and the operation."""
        try:
            yield
        except sqlite3.Error as exc:
            raise RunError(f"the run store {str(self.path)!r} failed to {what} ({exc}); "
                           "nothing was replaced — check the file and retry") from exc

    def load(self, run_id: str) -> Recording:
        """The recording of ``run_id``; a clear error when it is missing or unreadable."""
        with self._failing(f"load run {run_id!r}"):
            row = self._db.execute("SELECT body FROM runs WHERE run_id = ?",
                                   (run_id,)).fetchone()
        if row is None:
            known = [r.run_id for r in self.list(limit=5)]
            hint = f" (recent: {', '.join(known)})" if known else " (the store is empty)"
            raise KeyError(f"no run {run_id!r} in {str(self.path)!r}{hint}; "
                           "see `agentfootprint runs list`")
        try:
            return Recording.from_json(row[0])
        except (ValidationError, json.JSONDecodeError) as exc:
            raise RunError(f"run {run_id!r} in {str(self.path)!r} is unreadable ({exc}); "
                           "it was written by another version or altered") from exc

    def list(self, *, limit: int = 20) -> list[RunSummary]:
        """The most recent runs first."""
        with self._failing("list runs"):
            rows = self._db.execute(
                "SELECT run_id, name, kind, status, created_at, preview FROM runs "
                "ORDER BY created_at DESC, run_id DESC LIMIT ?", (limit,)).fetchall()
        return [RunSummary(*row) for row in rows]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
