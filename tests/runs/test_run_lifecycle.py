"""A run's row in a run store: one id, one run, a row that only grows — the same on every store.

Run ids are checked at every write (a safe charset and length: no path separators, control
characters or newlines); a second run under a taken id is refused and the first kept; the same
run saved again (further on) is accepted, with its proofs kept. PostgreSQL cases need
``AGENTFOOTPRINT_PG_URL`` (skipped locally when unset, a failure under CI).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, Tracing
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.runs import PostgresRunStore, Recording, RunStore
from agentfootprint.runs._store import RunStorePort

BAD_IDS = ["../../escaped", "x\x1b[2J\nFAKE", "a/b", "", " lead", ".hidden", "two words",
           "new\nline", "a" * 129, "caf\udcff", "nul\x00"]
GOOD_IDS = ["r1", "3f2a9c0d", "run-2026.12.01:7", "A_b-C.d:e", "a" * 128]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStorePort]:
    if request.param == "sqlite":
        with RunStore(tmp_path / "runs.db") as found:
            yield found
        return
    url = request.getfixturevalue("pg_url")
    schema = request.getfixturevalue("pg_schema")
    with PostgresRunStore(url, schema=schema) as pg:
        yield pg


def _recording(run_id: str, records: int, status: str = "running") -> Recording:
    log = {"initial": {"": {}}, "records": [
        {"idx": i, "runtime_stage_id": f"s#{i}", "stage_id": "s", "stage": "S", "kind": "stage",
         "ns": "", "reads": [], "changes": [{"key": "n", "op": "set", "value": i}]}
        for i in range(records)]}
    return Recording(run_id=run_id, kind="flow", name="Flow", status=status,
                     created_at=time.time(), chart={"id": "s"}, log=log)


@pytest.mark.parametrize("bad", BAD_IDS)
def test_every_write_refuses_an_unsafe_run_id(store: RunStorePort, bad: str) -> None:
    writes: list[Callable[[], Any]] = [
        lambda: store.save(_recording(bad, 1, "done")),
        lambda: store.begin(_recording(bad, 0)),
        lambda: store.add_proof(bad, {"verdict": "x"}),
    ]
    for write in writes:
        with pytest.raises(ConfigurationError, match="is not a valid run id"):
            write()
    assert store.list() == []


def test_safe_run_ids_are_taken(store: RunStorePort) -> None:
    for run_id in GOOD_IDS:
        store.save(_recording(run_id, 1, "done"))
        assert store.load(run_id).run_id == run_id


async def test_an_agent_refuses_an_unsafe_run_id_before_it_runs() -> None:
    provider = mock(reply="hi")
    with pytest.raises(ConfigurationError, match="is not a valid run id"):
        await Agent(provider=provider, model="m").run("hi", run_id="../../escaped")
    assert provider.requests == []


def test_a_second_run_under_a_taken_id_is_refused_and_the_first_kept(
        store: RunStorePort) -> None:
    store.save(_recording("r1", 3, "done"))
    store.add_proof("r1", {"verdict": "CAUSAL"})
    other = _recording("r1", 3, "done")
    other.log["records"][1]["changes"][0]["value"] = "different"
    with pytest.raises(ConfigurationError, match="'r1' is already taken"):
        store.save(other)
    with pytest.raises(ConfigurationError, match="already taken"):
        store.begin(_recording("r1", 0))
    with pytest.raises(ConfigurationError, match="already taken"):
        store.begin(_recording("r1", 0))
    with pytest.raises(ConfigurationError, match="'done', so it cannot be resumed"):
        store.begin(_recording("r1", 0), reopen="running")  # a finished run is not reopened
    assert store.load("r1").log["records"][1]["changes"][0]["value"] == 1
    store.save(_recording("r1", 5, "done"))  # the same run, further on: its row grows
    assert len(store.load("r1").log["records"]) == 5
    assert store.proofs("r1") == [{"verdict": "CAUSAL"}]  # kept through the re-save


async def test_two_agents_cannot_share_a_run_id(store: RunStorePort) -> None:
    await Agent(provider=mock(reply="FIRST"), model="m",
                tracing=Tracing(run_store=store)).run("a", run_id="r1")
    second = mock(reply="SECOND")
    with pytest.raises(ConfigurationError, match="already taken"):
        await Agent(provider=second, model="m", tracing=Tracing(run_store=store)).run(
            "b", run_id="r1")
    assert second.requests == []  # refused before the run did anything
    assert store.load("r1").output == "FIRST" and len(store.list()) == 1


def test_a_running_row_is_listed_and_loads_with_its_progress(store: RunStorePort) -> None:
    store.begin(_recording("live", 0))
    assert [(r.run_id, r.status) for r in store.list()] == [("live", "running")]
    grown = _recording("live", 3)
    store.append_progress("live", {"phase": "started", "records": grown.log["records"][:2]})
    store.append_progress("live", {"phase": "done", "records": grown.log["records"][1:3]})
    assert [e["phase"] for e in store.progress("live")] == ["started", "done"]
    loaded = store.load("live")
    assert loaded.status == "running"
    assert [r["idx"] for r in loaded.log["records"]] == [0, 1, 2]  # each position once
    assert loaded.commit_log().state_at(2) == {"n": 2}
    with pytest.raises(ConfigurationError, match="resumed already and is under way"):
        store.begin(_recording("live", 0), reopen="paused")  # it is not waiting for a person
    store.begin(_recording("live", 0), reopen="running")  # the same run, resumed
    store.save(_recording("live", 4, "done"))
    assert store.list()[0].status == "done"
    with pytest.raises(KeyError, match="no run 'ghost'"):
        store.append_progress("ghost", {"phase": "started"})
    with pytest.raises(KeyError, match="no run 'ghost'"):
        store.progress("ghost")
