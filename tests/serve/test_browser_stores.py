"""The run browser over stores other than a SQLite file: a PostgresRunStore (the same SQL
through its connection) and any other RunStorePort (a scan of its recent runs) list, filter,
page and prove alike; a shared store is used one call at a time, never held across a job."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from agentfootprint import Agent, Budget
from agentfootprint._demo import FACTORY, QUESTION, make_refund_agent
from agentfootprint.providers import Price, mock
from agentfootprint.runs import Recording, RunStorePort, RunSummary
from agentfootprint.runs._listing import ScannedListing
from agentfootprint.serve import browser_app

BASE = "http://127.0.0.1:8765"


class MemoryRuns(ScannedListing):
    """A run store port in a dict (no SQL): what a user's own store looks like (its listing
    by filters scans ``list()``)."""

    def __init__(self) -> None:
        self.runs: dict[str, Recording] = {}
        self.kept: dict[str, list[dict[str, Any]]] = {}

    def save(self, result: Any, *, meta: dict[str, Any] | None = None) -> Recording:
        recording = result if isinstance(result, Recording) else Recording.of(result, meta=meta)
        self.runs[recording.run_id] = recording
        self.kept[recording.run_id] = []
        return recording

    def load(self, run_id: str) -> Recording:
        if run_id not in self.runs:
            raise KeyError(f"no run {run_id!r}")
        return self.runs[run_id]

    def begin(self, recording: Recording, *, reopen: str | None = None) -> None:
        raise NotImplementedError

    def append_progress(self, run_id: str, entry: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def progress(self, run_id: str) -> list[dict[str, Any]]:
        return []

    def add_proof(self, run_id: str, proof: Mapping[str, Any]) -> None:
        self.kept[run_id].append(dict(proof))

    def proofs(self, run_id: str) -> list[dict[str, Any]]:
        if run_id not in self.runs:
            raise KeyError(f"no run {run_id!r}")
        return list(self.kept[run_id])

    def list(self, *, limit: int = 20) -> list[RunSummary]:
        newest = sorted(self.runs.values(), key=lambda r: (r.created_at, r.run_id),
                        reverse=True)[:limit]
        return [RunSummary(r.run_id, r.name, r.kind, r.status, r.created_at,
                           str(r.output or "")[:120]) for r in newest]

    def close(self) -> None:
        pass


def _priced(run_id: str, name: str, tokens: int, day: str, status: str = "done") -> Recording:
    agent = Agent(provider=mock(script=[{"content": "hi", "usage": {"input": tokens,
                                                                    "output": 0}}]),
                  model="house", name=name,
                  budget=Budget(prices={"house": Price(input=1000, output=0)}))
    return Recording.of(agent.run_sync("hello")).model_copy(update={
        "run_id": run_id, "status": status,
        "created_at": datetime.fromisoformat(f"{day}T12:00:00").timestamp()})


def _fill(store: RunStorePort) -> str:
    demo = make_refund_agent().run_sync(QUESTION)
    store.save(demo, meta={"factory": FACTORY})
    store.save(_priced("pricey-jan", "Pricey", 100, "2026-01-10"))
    store.save(_priced("pricey-feb", "Pricey", 500, "2026-02-10", status="error"))
    store.save(_priced("cheap-mar", "Cheap", 10, "2026-03-10"))
    return demo.run_id


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[RunStorePort]:
    if request.param == "memory":
        yield MemoryRuns()
        return
    from agentfootprint.runs import PostgresRunStore

    url = request.getfixturevalue("pg_url")
    with PostgresRunStore(url, schema=request.getfixturevalue("pg_schema")) as found:
        yield found


def _listed(client: TestClient, query: str = "") -> list[str]:
    response = client.get(f"/{query}")
    assert response.status_code == 200, response.text
    return re.findall(r'<tr data-run-id="([^"]+)"', response.text)


def test_list_filter_page_and_prove(store: RunStorePort) -> None:
    demo = _fill(store)
    with TestClient(browser_app(store, page_size=2), base_url=BASE) as client:
        assert _listed(client) == [demo, "cheap-mar"]
        assert _listed(client, "?page=2") == ["pricey-feb", "pricey-jan"]
        assert _listed(client, "?status=error") == ["pricey-feb"]
        assert _listed(client, "?agent=Pricey&until=2026-01-31") == ["pricey-jan"]
        assert _listed(client, "?min_cost=0.05") == ["pricey-feb", "pricey-jan"]
        assert _listed(client, "?min_cost=0.05&page=2") == ["pricey-feb", "pricey-jan"]  # clamped
        page = client.get("/?max_cost=0.2").text
        assert "$0.0100" in page and "$0.1000" in page and "page 1 of 1 · 2 run(s)" in page
        assert client.get("/runs/nope").status_code == 404

        run_page = client.get(f"/runs/{demo}").text
        token = re.search(r'name="token" value="([^"]+)"', run_page)
        assert token
        started = client.post(f"/runs/{demo}/prove", headers={"accept": "application/json"},
                              data={"token": token.group(1), "phrase": "APPROVED"}).json()
        served_meanwhile = False
        deadline = time.monotonic() + 30
        while (job := client.get(f"/jobs/{started['job']}").json())["state"] not in (
                "done", "failed"):
            served_meanwhile = served_meanwhile or client.get("/").status_code == 200
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert job["verdict"] == "CAUSAL", job
        assert store.proofs(demo)[-1]["criterion"]["contains"] == "APPROVED"
        assert "PROVEN: fact &#x27;customer-profile&#x27;" in client.get(f"/runs/{demo}").text
        assert "kept proof</span>" in client.get("/").text


RELEASE = threading.Event()


def parked_agent() -> Agent:
    """The demo's agent, built only once the test lets it (the job waits meanwhile)."""
    RELEASE.wait(10)
    return make_refund_agent()


def test_a_shared_store_is_not_held_across_a_job() -> None:
    """While a job is under way (parked in its agent factory), pages of a shared store are
    still served: the store's lock is held for one call at a time."""
    store = MemoryRuns()
    demo = _fill(store)
    RELEASE.clear()
    with TestClient(browser_app(store, agent=f"{__name__}:parked_agent"),
                    base_url=BASE) as client:
        token = re.search(r'name="token" value="([^"]+)"', client.get(f"/runs/{demo}").text)
        assert token
        started = client.post(f"/runs/{demo}/prove", headers={"accept": "application/json"},
                              data={"token": token.group(1), "phrase": "APPROVED"}).json()
        deadline = time.monotonic() + 5
        while client.get(f"/jobs/{started['job']}").json()["state"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        again = client.post(f"/runs/{demo}/prove", headers={"accept": "application/json"},
                            data={"token": token.group(1), "phrase": "APPROVED"}).json()
        assert again["job"] == started["job"]  # one job per run at a time
        began = time.monotonic()
        assert _listed(client)[0] == demo
        assert client.get(f"/runs/{demo}").status_code == 200
        assert time.monotonic() - began < 2
        RELEASE.set()
        deadline = time.monotonic() + 30
        while (job := client.get(f"/jobs/{started['job']}").json())["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert job["verdict"] == "CAUSAL"
    assert len(store.kept[demo]) == 1
