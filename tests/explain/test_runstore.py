"""The SQLite run store's errors: a driver failure names the store and the operation."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfootprint.errors import RunError
from agentfootprint.explain import RunStore


def test_driver_errors_name_the_store_and_the_operation(tmp_path: Path) -> None:
    """A failing file raises RunError naming the store and what was attempted."""
    store = RunStore(tmp_path / "runs.db")
    store._db.execute("DROP TABLE runs")
    with pytest.raises(RunError, match=r"failed to list runs"):
        store.list()
    with pytest.raises(RunError, match=r"failed to load run 'r1'"):
        store.load("r1")
    store.close()
