"""``list_runs``, ``count_runs`` and ``run_values`` on the run stores: the same answers on
SQLite, on PostgreSQL (e2e) and on a store that only scans (``ScannedListing``) — filters by
status, agent, time and cost, newest first, pages by limit/offset, each summary with its cost
and kept proofs; bad filters refused in one sentence."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, Budget
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import Price, mock
from agentfootprint.runs import Recording, RunStore, RunStorePort, RunSummary
from agentfootprint.runs._listing import ScannedListing


class ScanOnly(ScannedListing):
    """A store with no query tables: the listing scans ``list()``."""

    def __init__(self) -> None:
        self.runs: dict[str, Recording] = {}
        self.kept: dict[str, list[dict[str, Any]]] = {}

    def save(self, result: Any, *, meta: dict[str, Any] | None = None) -> Recording:
        self.runs[result.run_id] = result
        self.kept.setdefault(result.run_id, [])
        return result  # type: ignore[no-any-return]

    def load(self, run_id: str) -> Recording:
        return self.runs[run_id]

    def add_proof(self, run_id: str, proof: Any) -> None:
        self.kept[run_id].append(dict(proof))

    def proofs(self, run_id: str) -> list[dict[str, Any]]:
        return list(self.kept[run_id])

    def list(self, *, limit: int = 20) -> list[RunSummary]:
        newest = sorted(self.runs.values(), key=lambda r: (r.created_at, r.run_id),
                        reverse=True)[:limit]
        return [RunSummary(r.run_id, r.name, r.kind, r.status, r.created_at,
                           str(r.output or "")[:120]) for r in newest]


def _run(run_id: str, name: str, tokens: int, day: str, status: str = "done",
         priced: bool = True) -> Recording:
    prices = {"house": Price(input=1000, output=0)} if priced else {}
    agent = Agent(provider=mock(script=[{"content": f"answer of {run_id}",
                                         "usage": {"input": tokens, "output": 0}}]),
                  model="house", name=name, budget=Budget(prices=prices) if priced else None)
    return Recording.of(agent.run_sync("hello")).model_copy(update={
        "run_id": run_id, "status": status,
        "created_at": datetime.fromisoformat(f"{day}T12:00:00").timestamp()})


def _when(day: str) -> float:
    return datetime.fromisoformat(f"{day}T00:00:00").timestamp()


def _fill(store: Any) -> None:
    store.save(_run("jan", "Pricey", 100, "2026-01-10"))
    store.save(_run("feb", "Pricey", 500, "2026-02-10", status="error"))
    store.save(_run("mar", "Cheap", 10, "2026-03-10"))
    store.save(_run("apr", "Free", 10, "2026-04-10", priced=False))
    store.add_proof("feb", {"verdict": "CAUSAL"})
    store.add_proof("feb", {"verdict": "not confirmed"})


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.e2e), "scan"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        with RunStore(tmp_path / "runs.db") as found:
            _fill(found)
            yield found
    elif request.param == "postgres":
        from agentfootprint.runs import PostgresRunStore

        url = request.getfixturevalue("pg_url")
        with PostgresRunStore(url, schema=request.getfixturevalue("pg_schema")) as pg:
            _fill(pg)
            yield pg
    else:
        scan = ScanOnly()
        _fill(scan)
        yield scan


def _ids(runs: list[RunSummary]) -> list[str]:
    return [r.run_id for r in runs]


def test_filters_select_the_same_runs_newest_first(store: RunStorePort) -> None:
    """Each filter alone and together; a run without a price never matches a cost bound."""
    assert _ids(store.list_runs()) == ["apr", "mar", "feb", "jan"]
    assert _ids(store.list_runs(status="error")) == ["feb"]
    assert _ids(store.list_runs(agent="Pricey")) == ["feb", "jan"]
    assert _ids(store.list_runs(since=_when("2026-02-10"))) == ["apr", "mar", "feb"]
    assert _ids(store.list_runs(until=_when("2026-02-10"))) == ["jan"]
    assert _ids(store.list_runs(min_cost=0.05)) == ["feb", "jan"]
    assert _ids(store.list_runs(max_cost=0.2)) == ["mar", "jan"]
    assert _ids(store.list_runs(agent="Pricey", max_cost=0.2, since=_when("2026-01-01"))
                ) == ["jan"]
    assert store.list_runs(agent="Nobody") == []
    assert store.count_runs() == 4 and store.count_runs(agent="Pricey") == 2
    assert store.count_runs(min_cost=0.0) == 3


def test_pages_and_what_each_summary_carries(store: RunStorePort) -> None:
    """limit/offset page the newest-first order; each summary has its cost and proof count."""
    assert _ids(store.list_runs(limit=2)) == ["apr", "mar"]
    assert _ids(store.list_runs(limit=2, offset=2)) == ["feb", "jan"]
    assert store.list_runs(offset=10) == []
    by_id = {r.run_id: r for r in store.list_runs()}
    assert by_id["feb"].proofs == 2 and by_id["jan"].proofs == 0
    assert by_id["feb"].cost_usd == pytest.approx(0.5)
    assert by_id["mar"].cost_usd == pytest.approx(0.01)
    assert by_id["apr"].cost_usd is None
    assert by_id["feb"].status == "error" and by_id["feb"].name == "Pricey"
    assert by_id["mar"].preview == "answer of mar"
    assert store.run_values("status") == ["done", "error"]
    assert store.run_values("agent") == ["Cheap", "Free", "Pricey"]


@pytest.mark.parametrize(("call", "said"), [
    (lambda s: s.list_runs(colour="red"), "no filter 'colour'"),
    (lambda s: s.list_runs(status=3), "status=3 must be a str"),
    (lambda s: s.list_runs(min_cost=float("nan")), "must be a finite number"),
    (lambda s: s.list_runs(since="yesterday"), "must be a finite number"),
    (lambda s: s.list_runs(limit=0), "limit=0 must be an int"),
    (lambda s: s.list_runs(offset=-1), "offset=-1 must be an int"),
    (lambda s: s.count_runs(agent=True), "must be a str"),
    (lambda s: s.run_values("name; DROP TABLE runs"), "lists 'status' or 'agent'"),
])
def test_bad_filters_are_refused_before_the_store_is_asked(store: RunStorePort, call: Any,
                                                           said: str) -> None:
    with pytest.raises(ConfigurationError, match=said.replace("(", r"\(")):
        call(store)
    assert store.count_runs() == 4  # the store still answers
