"""The SQLite run store's errors: a driver failure names the store and the operation."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfootprint import Tracing
from agentfootprint.errors import RunError
from agentfootprint.runs import RunStore


def test_driver_errors_name_the_store_and_the_operation(tmp_path: Path) -> None:
    """A failing file raises RunError naming the store and what was attempted."""
    store = RunStore(tmp_path / "runs.db")
    store._db.execute("DROP TABLE runs")
    with pytest.raises(RunError, match=r"failed to list runs"):
        store.list()
    with pytest.raises(RunError, match=r"failed to load run 'r1'"):
        store.load("r1")
    store.close()


def test_an_agent_with_a_run_store_records_every_run_even_a_failed_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Agent(run_store=...) saves each run as it ends, so `agentfootprint runs list` and
    `explain` see the app's own runs; a run that fails is saved too, as the evidence."""
    from agentfootprint import Agent, ConfigurationError, ProviderError
    from agentfootprint.cli import main
    from agentfootprint.providers import mock

    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        down = ProviderError("down", provider="mock")
        agent = Agent(provider=mock(script=["Refund approved.", down]), name="Refunds",
                      tracing=Tracing(run_store=store))
        done = agent.run_sync("Refund A-1?")
        with pytest.raises(ProviderError, match="down"):
            agent.run_sync("And A-2?")
        rows = {r.run_id: r for r in store.list()}
        assert rows[done.run_id].status == "done" and rows[done.run_id].name == "Refunds"
        assert len(rows) == 2
        assert [r.status for r in rows.values() if r.run_id != done.run_id] == ["failed"]
        with pytest.raises(ConfigurationError, match="cannot save runs"):
            Agent(provider=mock(reply="x"), tracing=Tracing(run_store="runs.db"))
    assert main(["--store", str(path), "explain", done.run_id]) == 0
    explained = capsys.readouterr().out
    assert explained.startswith("NOT PROVEN YET") and 'ANSWER   "Refund approved."' in explained
    failed = next(run_id for run_id in rows if run_id != done.run_id)
    assert main(["--store", str(path), "explain", failed]) == 0
    assert "ProviderError: down" in capsys.readouterr().out
