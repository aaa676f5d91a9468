"""The run browser in a real headless Chromium, served by uvicorn on a free 127.0.0.1 port.

Open the runs list, open the demo's run, type what was wrong, press prove: the CAUSAL verdict
appears while the page polls the job; a reload shows it kept (the panel and the framed report).
The pages load clean under their policy — no console error, no request beyond the server.
Uses the report tests' Chromium fixture (Debian's chromium through playwright).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_report_browser import browser, off_the_browser_loop  # noqa: F401 - the fixture

from agentfootprint._demo import FACTORY, QUESTION, make_refund_agent
from agentfootprint.runs import RunStore

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """The browser over a store holding the demo's run (its factory recorded), on uvicorn."""
    uvicorn = pytest.importorskip("uvicorn")
    from agentfootprint.serve import browser_app

    path = tmp_path_factory.mktemp("ui") / "runs.db"
    result = off_the_browser_loop(lambda: make_refund_agent().run_sync(QUESTION))
    with RunStore(path) as store:
        store.save(result, meta={"factory": FACTORY})
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(browser_app(path), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="ui-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the run browser did not start within 15 s")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", result.run_id, path
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive(), "the run browser's server did not stop"


def test_prove_in_the_browser_and_see_the_verdict_kept(
        browser: Any, served: tuple[str, str, Path]) -> None:  # noqa: F811
    base, run_id, path = served
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    context.on("request", lambda r: None if r.url.startswith(base + "/") else
               foreign.append(r.url))
    try:
        page.goto(base + "/", wait_until="load")
        row = page.locator(f'tr[data-run-id="{run_id}"]')
        assert row.locator(".status").inner_text() == "done"
        row.locator("a.run").click()
        page.wait_for_url(f"{base}/runs/{run_id}")
        assert page.locator("#kept-lines").inner_text() == "Nothing proven yet."
        report = page.frame_locator("#report")
        report.locator("#chart-svg").wait_for(state="visible", timeout=10_000)

        page.fill("#phrase", "APPROVED")
        page.click("#prove-button")
        page.locator('#prove[data-state="done"]').wait_for(timeout=30_000)
        assert page.locator("#prove").get_attribute("data-verdict") == "CAUSAL"
        assert page.locator("#prove-status").inner_text().startswith("CAUSAL")
        assert page.locator("#prove-result").inner_text().startswith(
            "PROVEN: fact 'customer-profile' caused the answer.")
        assert page.locator("#prove-button").is_enabled()

        page.reload(wait_until="load")
        assert page.locator("#kept").get_attribute("data-kept") == "yes"
        kept = page.locator("#kept-lines").inner_text()
        assert kept.startswith("PROVEN: fact 'customer-profile' caused the answer.")
        assert "CAUSAL (deterministic model)" in kept
        assert "judged wrong when: the answer contains 'APPROVED'" in kept
        stamp = report.locator('li.suspect.causal[data-source="customer-profile"] .stamp')
        stamp.wait_for(state="visible", timeout=10_000)
        assert stamp.inner_text().upper() == "CAUSAL 1/1"
        assert page.locator("#saved option").nth(1).inner_text() == \
            "the answer contains 'APPROVED'"
        assert errors == []
        assert foreign == []
    finally:
        context.close()
    with RunStore(path) as store:
        assert store.proofs(run_id)[-1]["criterion"]["contains"] == "APPROVED"
