"""The session store port on SQLite: Hypothesis sequences against a model, and durability."""

from __future__ import annotations

import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from session_suite import OPERATIONS, StoreModel

from agentfootprint.errors import ConfigurationError
from agentfootprint.flow._run import run_sync
from agentfootprint.serve import SessionStore, sqlite_sessions
from agentfootprint.serve import _sessions_sqlite as _sqlite

FOLDER = Path(tempfile.mkdtemp(prefix="af-sessions-"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=OPERATIONS)
def test_sqlite_store_matches_the_model(operations: list[tuple[Any, ...]]) -> None:
    """Any sequence of create/claim/renew/release/delete/purge answers as the model does."""
    store = sqlite_sessions(FOLDER / f"{uuid.uuid4().hex}.db")
    try:
        StoreModel(store).run(operations)
    finally:
        run_sync(store.aclose())


def test_the_store_is_a_session_store_and_says_its_durability(tmp_path: Path) -> None:
    store = sqlite_sessions(tmp_path / "s.db", synchronous="FULL")
    assert isinstance(store, SessionStore)
    assert all(word in (_sqlite.__doc__ or "") for word in ("WAL", "NORMAL", "FULL"))
    with pytest.raises(ConfigurationError, match="synchronous="):
        sqlite_sessions(tmp_path / "t.db", synchronous="OFF")  # type: ignore[arg-type]


async def test_the_file_is_in_wal_mode_with_the_chosen_synchronous(tmp_path: Path) -> None:
    store = sqlite_sessions(tmp_path / "s.db", synchronous="FULL")
    assert await store.get("nothing") is None
    assert store._conn is not None
    assert store._conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store._conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    await store.aclose()
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")} \
            >= {"af_sessions", "af_session_entries"}
