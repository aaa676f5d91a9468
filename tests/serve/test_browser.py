"""The run browser in-process (Starlette's TestClient): the runs list filters and pages, a run's
page frames its report, bad input gets a 4xx page with one sentence, and a prove job runs the
isolated re-runs to a CAUSAL verdict kept in the run store with its criterion."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from agentfootprint import Agent, Budget, Tracing
from agentfootprint._demo import FACTORY, QUESTION, make_refund_agent
from agentfootprint.cli import main
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import Price, mock
from agentfootprint.runs import Recording, RedactionPolicy, RunStore
from agentfootprint.serve import browser_app
from agentfootprint.serve.browser._app import check_bind

BASE = "http://127.0.0.1:8765"
JSON = {"accept": "application/json"}
SECRET = "SECRET-4417-ZEBRA"


def _at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _priced(name: str, input_tokens: int) -> Recording:
    """An agent's run whose one call costs input_tokens * $1,000 per million tokens."""
    agent = Agent(provider=mock(script=[{"content": f"{name} says hi", "usage": {
        "input": input_tokens, "output": 0}}]), model="house", name=name,
        budget=Budget(prices={"house": Price(input=1000, output=0)}))
    return Recording.of(agent.run_sync("hello"))


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's planted-fact run (factory recorded) and three priced runs of another agent."""
    path = tmp_path_factory.mktemp("browser") / "runs.db"
    demo = make_refund_agent().run_sync(QUESTION)
    runs = [
        _priced("Pricey", 100).model_copy(update={  # $0.10
            "run_id": "pricey-jan", "created_at": _at("2026-01-10T12:00:00")}),
        _priced("Pricey", 500).model_copy(update={  # $0.50, failed
            "run_id": "pricey-feb", "status": "error", "created_at": _at("2026-02-10T12:00:00")}),
        _priced("Cheap", 10).model_copy(update={  # $0.01
            "run_id": "cheap-mar", "created_at": _at("2026-03-10T12:00:00")}),
    ]
    with RunStore(path) as store:
        store.save(demo, meta={"factory": FACTORY})
        for run in runs:
            store.save(run)
    return path


@pytest.fixture
def client(store_path: Path) -> Iterator[TestClient]:
    with TestClient(browser_app(store_path, page_size=10), base_url=BASE) as test_client:
        yield test_client


def _demo_id(path: Path) -> str:
    with RunStore(path) as store:
        return next(r.run_id for r in store.list(limit=50) if r.name == "RefundsAgent")


def _listed(client: TestClient, query: str = "") -> list[str]:
    response = client.get(f"/{query}")
    assert response.status_code == 200, response.text
    return re.findall(r'<tr data-run-id="([^"]+)"', response.text)


def _problem(response: Any) -> str:
    found = re.search(r'<p class="problem" id="problem">([^<]*)</p>', response.text)
    assert found, response.text
    assert "Traceback" not in response.text
    return found.group(1)


def _token(page: str) -> str:
    found = re.search(r'name="token" value="([^"]+)"', page)
    assert found, "the run page has no prove form"
    return found.group(1)


def _finish(client: TestClient, job: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = client.get(f"/jobs/{job}").json()
        if state["state"] in ("done", "failed"):
            return state
        time.sleep(0.05)
    raise AssertionError("the prove job did not finish in 30 s")


def test_the_list_filters_by_status_agent_time_and_cost(client: TestClient,
                                                        store_path: Path) -> None:
    """Every filter narrows the list; a cost bound never matches an unpriced run."""
    demo = _demo_id(store_path)
    assert _listed(client) == [demo, "cheap-mar", "pricey-feb", "pricey-jan"]
    assert _listed(client, "?status=error") == ["pricey-feb"]
    assert _listed(client, "?agent=Pricey") == ["pricey-feb", "pricey-jan"]
    assert _listed(client, "?since=2026-02-01&until=2026-03-01") == ["pricey-feb"]
    assert _listed(client, "?until=2026-01-10") == ["pricey-jan"]  # the day is included
    assert _listed(client, "?min_cost=0.2") == ["pricey-feb"]
    assert _listed(client, "?max_cost=0.2") == ["cheap-mar", "pricey-jan"]
    assert _listed(client, "?agent=Pricey&status=done&max_cost=1") == ["pricey-jan"]
    page = client.get("/?agent=Nobody").text
    assert 'id="no-runs"' in page
    form = client.get("/?status=error").text
    assert '<option value="error" selected>' in form
    assert '<option value="Pricey">' in form and '<option value="RefundsAgent">' in form
    assert "$0.5000" in form


def test_the_list_pages_newest_first(store_path: Path) -> None:
    """Two a page: links to the older and newer page keep the filters; past the end clamps."""
    with TestClient(browser_app(store_path, page_size=2), base_url=BASE) as test_client:
        first = test_client.get("/?max_cost=5")
        assert re.findall(r'<tr data-run-id="([^"]+)"', first.text) == ["cheap-mar",
                                                                       "pricey-feb"]
        assert 'href="/?max_cost=5&amp;page=2">older' in first.text
        assert "page 1 of 2 · 3 run(s)" in first.text
        assert _listed(test_client, "?max_cost=5&page=2") == ["pricey-jan"]
        assert _listed(test_client, "?max_cost=5&page=9") == ["pricey-jan"]


@pytest.mark.parametrize(("query", "says"), [
    ("?since=yesterday", "the since filter 'yesterday' is not a date"),
    ("?min_cost=lots", "the min_cost filter 'lots' is not an amount of US dollars"),
    ("?max_cost=-1", "the max_cost filter '-1' is not an amount"),
    ("?min_cost=nan", "is not an amount"),
    ("?page=0", "page '0' is not a page number"),
    ("?page=2.5", "is not a page number"),
    ("?since=2026-03-01&until=2026-02-01", "the since filter is not before until"),
    ("?min_cost=2&max_cost=1", "min_cost is above max_cost"),
    ("?agent=%1b%5b31m", "holds control characters"),
    ("?agent=" + "x" * 300, "too long"),
])
def test_a_bad_filter_is_a_400_with_one_sentence(client: TestClient, query: str,
                                                 says: str) -> None:
    response = client.get(f"/{query}")
    assert response.status_code == 400
    assert says in _problem(response).replace("&#x27;", "'")


def test_unknown_things_are_404_pages_never_tracebacks(client: TestClient) -> None:
    for path in ("/runs/no-such-run", "/runs/..%2F..%2Fetc", "/runs/no-such-run/report",
                 "/nowhere", "/runs/x/y/z"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert _problem(response)
    job = client.get("/jobs/nope")
    assert job.status_code == 404 and "no such prove job" in job.json()["error"]
    assert client.post("/", data={}).status_code == 405


def test_a_run_page_frames_the_report_under_its_own_policy(client: TestClient,
                                                          store_path: Path) -> None:
    """The report is the one `agentfootprint report` writes, framed sandboxed; the pages allow
    only their own origin's script and style."""
    demo = _demo_id(store_path)
    page = client.get(f"/runs/{demo}")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert f'sandbox="allow-scripts" src="/runs/{demo}/report"' in page.text
    assert "Refund APPROVED for order A-1001" in page.text
    assert "Nothing proven yet." in page.text
    report = client.get(f"/runs/{demo}/report")
    assert report.status_code == 200
    assert report.headers["content-security-policy"] == "frame-ancestors 'self'"
    assert 'id="chart-svg"' in report.text and "connect-src 'none'" in report.text
    assert client.get("/static/browser.js").headers["content-type"].startswith(
        "text/javascript")


def test_prove_runs_in_the_background_and_keeps_a_causal_verdict(tmp_path: Path) -> None:
    """Phrase -> job -> progress -> CAUSAL, kept in the store with the criterion; the reload
    shows it, the report shows it, and the criterion is offered again as a saved one."""
    path = tmp_path / "runs.db"
    result = make_refund_agent().run_sync(QUESTION)
    with RunStore(path) as store:
        store.save(result, meta={"factory": FACTORY})
    run_id = result.run_id
    with TestClient(browser_app(path), base_url=BASE) as client:
        page = client.get(f"/runs/{run_id}").text
        started = client.post(f"/runs/{run_id}/prove", headers=JSON,
                              data={"token": _token(page), "phrase": "approved"})
        assert started.status_code == 202, started.text
        job = started.json()
        assert job["state"] in ("queued", "running", "done")
        assert job["criterion"] == "the answer contains 'approved'"
        again = client.post(f"/runs/{run_id}/prove", headers=JSON,
                            data={"token": _token(page), "phrase": "approved"}).json()
        done = _finish(client, job["job"])
        runs_proven = 1
        if again["job"] != job["job"]:  # the first had finished: a second proof is kept
            assert _finish(client, again["job"])["verdict"] == "CAUSAL"
            runs_proven = 2
        assert done["state"] == "done", done
        assert done["verdict"] == "CAUSAL"
        assert done["done"] >= 2 and done["label"]
        assert done["lines"][0] == "PROVEN: fact 'customer-profile' caused the answer."
        with RunStore(path) as store:
            kept = store.proofs(run_id)
        assert [p["kind"] for p in kept] == ["localize"] * runs_proven
        assert {p["criterion"]["contains"] for p in kept} == {"approved"}

        reloaded = client.get(f"/runs/{run_id}").text
        assert 'data-kept="yes"' in reloaded
        assert "PROVEN: fact &#x27;customer-profile&#x27; caused the answer." in reloaded
        assert '<option value="c0">the answer contains &#x27;approved&#x27;</option>' in reloaded
        assert "CAUSAL 1/1" in client.get(f"/runs/{run_id}/report").text
        listed = client.get("/").text
        assert "kept proof</span>" in listed

        by_saved = client.post(f"/runs/{run_id}/prove", headers=JSON,
                               data={"token": _token(reloaded), "saved": "c0"})
        assert by_saved.status_code == 202
        assert _finish(client, by_saved.json()["job"])["verdict"] == "CAUSAL"


def test_the_form_without_script_redirects_to_the_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    result = make_refund_agent().run_sync(QUESTION)
    with RunStore(path) as store:
        store.save(result, meta={"factory": FACTORY})
    with TestClient(browser_app(path), base_url=BASE) as client:
        page = client.get(f"/runs/{result.run_id}").text
        sent = client.post(f"/runs/{result.run_id}/prove", follow_redirects=False,
                           data={"token": _token(page), "phrase": "APPROVED"})
        assert sent.status_code == 303
        assert sent.headers["location"] == f"/runs/{result.run_id}"
        job = re.search(r'data-job="([^"]+)"', client.get(sent.headers["location"]).text)
        if job:  # still under way: the page resumes polling it
            assert _finish(client, job.group(1))["verdict"] == "CAUSAL"


TOKEN = "<the page's token>"


@pytest.mark.parametrize(("form", "headers", "status", "says"), [
    ({"phrase": "APPROVED"}, {}, 403, "lacks this page's token"),
    ({"phrase": "APPROVED", "token": "forged"}, {}, 403, "lacks this page's token"),
    ({"phrase": "APPROVED", "token": TOKEN}, {"origin": "https://evil.example"}, 403,
     "came from another site"),
    ({"phrase": "APPROVED", "token": TOKEN}, {"sec-fetch-site": "cross-site"}, 403,
     "came from another site"),
    ({"token": TOKEN}, {}, 400, "say what was wrong in one way"),
    ({"phrase": "APPROVED", "saved": "c0", "token": TOKEN}, {}, 400,
     "say what was wrong in one way"),
    ({"saved": "c9", "token": TOKEN}, {}, 400, "there is no saved criterion 'c9'"),
    ({"phrase": "DENIED", "token": TOKEN}, {}, 400, "the run's answer does not contain 'DENIED'"),
    ({"phrase": "APP\x1bROVED", "token": TOKEN}, {}, 400, "no control characters"),
    ({"phrase": "A" * 201, "token": TOKEN}, {}, 400, "at most 200 plain characters"),
])
def test_a_bad_prove_request_is_refused_with_one_sentence(
        client: TestClient, store_path: Path, form: dict[str, str], headers: dict[str, str],
        status: int, says: str) -> None:
    demo = _demo_id(store_path)
    token = _token(client.get(f"/runs/{demo}").text)
    body = {key: token if value is TOKEN else value for key, value in form.items()}
    answer = client.post(f"/runs/{demo}/prove", data=body, headers={**JSON, **headers})
    assert answer.status_code == status
    assert says in answer.json()["error"]
    with RunStore(store_path) as store:
        assert store.proofs(demo) == []  # nothing was started


def test_prove_needs_a_factory_and_an_agent_run(tmp_path: Path) -> None:
    """No factory recorded and none given: the page says how to give one and a POST is a 409;
    --agent supplies it; a 404 for a run that is not there."""
    path = tmp_path / "runs.db"
    result = make_refund_agent().run_sync(QUESTION)
    with RunStore(path) as store:
        store.save(result)
    with TestClient(browser_app(path), base_url=BASE) as client:
        page = client.get(f"/runs/{result.run_id}").text
        assert 'id="prove-form"' not in page and "--agent module:function" in page
        assert 'name="token"' not in page
    with TestClient(browser_app(path, agent=FACTORY), base_url=BASE) as client:
        page = client.get(f"/runs/{result.run_id}").text
        token = _token(page)
        missing = client.post("/runs/gone/prove", headers=JSON,
                              data={"token": token, "phrase": "x"})
        assert missing.status_code == 404
    with TestClient(browser_app(path), base_url=BASE) as client:
        refused = client.post(f"/runs/{result.run_id}/prove", headers=JSON,
                              data={"token": token, "phrase": "APPROVED"})
        assert refused.status_code == 403  # another app's token
        assert 'name="token"' not in client.get(f"/runs/{result.run_id}").text


def boom(answer: str) -> bool:
    """A saved predicate that fails (the job reports it)."""
    raise RuntimeError("the predicate broke")


def test_a_failing_criterion_fails_the_job_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    result = make_refund_agent().run_sync(QUESTION)
    with RunStore(path) as store:
        store.save(result, meta={"factory": FACTORY})
    with TestClient(browser_app(path, predicates=[f"{__name__}:boom"]), base_url=BASE) as client:
        page = client.get(f"/runs/{result.run_id}").text
        assert f"{__name__}:boom(…) is true" in page
        job = client.post(f"/runs/{result.run_id}/prove", headers=JSON,
                          data={"token": _token(page), "saved": "c0"}).json()
        failed = _finish(client, job["job"])
    assert failed["state"] == "failed"
    assert "RuntimeError: the predicate broke" in failed["error"]


def test_local_by_default_and_auth_when_not(store_path: Path) -> None:
    """No auth: a non-loopback bind is refused and a foreign Host header gets a 400; with auth,
    None is a 401 and a principal gets in."""
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("localhost", None)
    with pytest.raises(ConfigurationError, match=r"binds '0\.0\.0\.0' only with an authentication"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", lambda request: "alice")
    with TestClient(browser_app(store_path), base_url="http://evil.example") as client:
        refused = client.get("/")
        assert refused.status_code == 400 and "serves this machine only" in _problem(refused)
    with TestClient(browser_app(store_path), base_url="http://[::1]:9000") as client:
        assert client.get("/").status_code == 200

    async def auth(request: Any) -> str | None:
        return "alice" if request.headers.get("x-user") == "alice" else None

    with TestClient(browser_app(store_path, auth=auth), base_url="http://runs.example") as c:
        assert c.get("/").status_code == 401
        assert c.get("/", headers={"x-user": "alice"}).status_code == 200

    def broken(request: Any) -> str:
        raise LookupError("the user table is gone")

    with TestClient(browser_app(store_path, auth=broken), base_url=BASE) as c:
        failed = c.get("/")
        assert failed.status_code == 500
        assert _problem(failed) == ("the authentication hook failed; the server&#x27;s log has "
                                    "the details")


def test_the_cli_refuses_a_public_bind_and_a_missing_store(
        store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store_path), "ui", "--host", "0.0.0.0"]) == 1
    assert "only with an authentication callable" in capsys.readouterr().err
    assert main(["ui", "--store", str(tmp_path / "none.db")]) == 1
    assert "no run store at" in capsys.readouterr().err


def test_mounted_under_a_prefix_links_stay_inside(store_path: Path) -> None:
    host = Starlette(routes=[Mount("/ui", app=browser_app(store_path))])
    with TestClient(host, base_url=BASE) as client:
        page = client.get("/ui/")
        assert page.status_code == 200
        assert 'href="/ui/static/browser.css"' in page.text
        assert 'href="/ui/runs/pricey-jan"' in page.text
        run = client.get("/ui/runs/pricey-jan")
        assert run.status_code == 200 and 'src="/ui/runs/pricey-jan/report"' in run.text
        assert client.get("/ui/static/browser.js").status_code == 200


def test_a_flowchart_run_shows_its_report_without_a_prove_form(tmp_path: Path) -> None:
    from agentfootprint.flow import flow_chart

    def load(scope: Any) -> None:
        scope["x"] = 1

    run = flow_chart("Load", load).build().run_sync()
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        store.save(run)
    with TestClient(browser_app(path, agent=FACTORY), base_url=BASE) as client:
        page = client.get(f"/runs/{run.run_id}")
        assert page.status_code == 200
        assert "Only an agent&#x27;s run can be proven" in page.text
        assert 'id="prove-form"' not in page.text
        assert client.get(f"/runs/{run.run_id}/report").status_code == 200


def test_a_redacted_run_lists_and_shows_masked(tmp_path: Path) -> None:
    """The list's answer column and the run page show what the store keeps: masked."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        agent = Agent(provider=mock(respond=lambda request: f"Your code is {SECRET}."),
                      model="mock", name="Keeper",
                      tracing=Tracing(redaction=RedactionPolicy(kinds={"model_text",
                                                                       "user_text"}),
                                      run_store=store))
        result = agent.run_sync(f"Remember {SECRET}")
    with TestClient(browser_app(path), base_url=BASE) as client:
        for where in ("/", f"/runs/{result.run_id}", f"/runs/{result.run_id}/report"):
            shown = client.get(where)
            assert shown.status_code == 200
            assert SECRET not in shown.text, where


def test_a_damaged_or_altered_run_is_one_sentence(tmp_path: Path) -> None:
    """A row that no longer parses is named and left alone; a body edited after it was saved
    (its audit chain head no longer matches) is not shown as the run that happened."""
    import json
    import sqlite3

    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        broken = store.save(_priced("Pricey", 1).model_copy(update={"run_id": "b-1"}))
        edited = store.save(_priced("Pricey", 1).model_copy(update={"run_id": "e-1"}))
        has_head = store.chain_head(edited.run_id) is not None
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET body = '{not json' WHERE run_id = ?", (broken.run_id,))
        body = json.loads(db.execute("SELECT body FROM runs WHERE run_id = ?",
                                     (edited.run_id,)).fetchone()[0])
        body["output"] = "a different answer"
        db.execute("UPDATE runs SET body = ? WHERE run_id = ?",
                   (json.dumps(body), edited.run_id))
    db.close()
    with TestClient(browser_app(path), base_url=BASE) as client:
        assert _listed(client) == ["e-1", "b-1"]
        for where in ("/runs/b-1", "/runs/b-1/report"):
            damaged = client.get(where)
            assert damaged.status_code == 500
            assert "is unreadable" in _problem(damaged)
        import importlib.util

        assert has_head or importlib.util.find_spec("rfc8785") is None
        if has_head:
            altered = client.get("/runs/e-1/report")
            assert altered.status_code == 409
            assert "does not show an altered run" in _problem(altered)
