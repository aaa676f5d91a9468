"""Fixtures for the RAG tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.memory import InMemoryStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Each behaviour on the in-memory store and on a real SQLite file."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    with SQLiteStore(tmp_path / "corpus.db") as sqlite:
        yield sqlite
