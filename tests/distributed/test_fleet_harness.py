"""The fleet's effect recorder (``fleet_agents.py``) never loses an effect, and a run whose
effect failed never looks like one that applied it.

The Celery fleet tests count each run's side effect in ``effects.db``. Its first moments are a
race: every pool process opens the fresh file for its first run at once, and SQLite answers a
WAL switch asked while another process holds the write lock with ``database is locked`` at once
(no busy timeout). The tool raised, the model was given the error, and the mock model answered
``done: <message>`` anyway: a run reported done, with the right answer, and no effect row (the
"none lost" failure of ``test_a_batch_of_100_runs_gives_the_in_process_results``). These run
in-process, the other process being a connection holding that lock.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_agents import applied, make_agent

from _sqlite_lock import another_opener


async def test_the_effect_is_applied_while_another_process_creates_the_effects_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AF_FLEET_DIR", str(tmp_path))
    with another_opener(tmp_path / "effects.db", 0.2):
        result = await make_agent().run("task 3", run_id="batch-3")
    assert result.content == "done: task 3"
    assert [label for _, label in applied(tmp_path)] == ["task 3"]  # before: none, and done


async def test_a_run_whose_effect_failed_says_so_instead_of_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AF_FLEET_DIR", str(tmp_path / "missing"))  # effects.db cannot open
    result = await make_agent().run("task 4", run_id="batch-4")
    assert result.content.startswith("effect failed: Error: OperationalError"), result.content
