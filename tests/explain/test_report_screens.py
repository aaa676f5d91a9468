"""The HTML report on every screen: headless Chromium at 390 px (a phone) and 1440 px (a desk).

At both widths the page is no wider than the window (``scrollWidth <= innerWidth``; the chart
and the tables scroll inside their own boxes), logs no console error, and its first sentence
names what is proven: the proven cause for a run whose proof is kept in the run store, "Not
proven yet" and the exact ``agentfootprint prove`` command for one without. Each call shows its
tool calls (arguments and results, escaped, redacted values still masked) and its model,
tokens, latency and cost; a composition's chart draws each member agent as one closed box.

The browser tests are marked ``e2e`` like ``tests/e2e/test_report_browser.py`` (Debian's
``chromium`` through Playwright, no browser download): missing either skips locally and fails
under CI. The page-content tests below them need no browser.
"""

from __future__ import annotations

import importlib.util
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentfootprint import Agent, LLMCall, Tracing, define_fact, tool
from agentfootprint._demo import QUESTION, WRONG, make_refund_agent
from agentfootprint.cli import main
from agentfootprint.compose import Sequence
from agentfootprint.explain import localize_context_bug, render_html_report, write_html_report
from agentfootprint.explain._kept import prove_command
from agentfootprint.flow._redact import REDACTED, RedactionPolicy
from agentfootprint.flow._run import run_sync
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore

CHROMIUM = Path(os.environ.get("AGENTFOOTPRINT_CHROMIUM", "/usr/bin/chromium"))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTHS = (390, 1440)
LONG_ID = "ORD-" + "7" * 180  # one unbreakable token, wider than a phone
SECRET = "sk-live4242SECRET"
T = TypeVar("T")


def off_the_browser_loop(work: Callable[[], T]) -> T:
    """Run ``work`` in its own thread: Playwright's sync API keeps an event loop running here."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


# -- the runs ------------------------------------------------------------------------------------


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"Order {order_id}: 2 items, 40 USD, delivered <b>yesterday</b>."


def _tool_agent(*, redaction: RedactionPolicy | None = None) -> Agent:
    def respond(request: Any) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"name": "lookup_order",
                                    "args": {"order_id": f"{LONG_ID} {SECRET}"}}]}
        return "Your order was delivered yesterday."

    return Agent(provider=mock(respond=respond), model="mock-small", name="orders",
                 tools=[lookup_order], system="You answer questions about orders.",
                 context=[define_fact(id="shipping-policy",
                                      data="Orders ship within two days.")],
                 tracing=Tracing(redaction=redaction) if redaction else None)


@dataclass(frozen=True)
class Pages:
    proven: Path
    proven_run: str
    unproven: Path
    unproven_run: str
    composition: Path


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Pages:
    """Three reports as people get them: two through ``agentfootprint report RUN_ID`` on a run
    store (the demo with its localization proof kept, a tool-using run with none) and a
    composition's through ``write_html_report``."""
    root = tmp_path_factory.mktemp("screens")
    store_path = root / "runs.db"

    async def runs() -> tuple[str, str, Recording]:
        demo = await make_refund_agent().run(QUESTION)
        proof = await localize_context_bug(demo, is_wrong=WRONG)
        plain = await _tool_agent().run("Where is my order?")
        first = LLMCall(provider=mock(reply="URGENT"), model="mock", name="classify")
        second = _tool_agent()
        team = await Sequence(("classify", first), ("respond", second)).run("help")
        with RunStore(store_path) as store:
            store.save(demo)
            store.add_proof(demo.run_id, proof.to_proof())
            store.save(plain)
        return demo.run_id, plain.run_id, Recording.of(team)

    def build() -> Pages:
        proven_run, unproven_run, team = run_sync(runs())
        out = {}
        for name, run_id in (("proven", proven_run), ("unproven", unproven_run)):
            target = root / f"{name}.html"
            assert main(["--store", str(store_path), "report", run_id, "-o", str(target)]) == 0
            out[name] = target
        composition = write_html_report(team, root / "composition.html")
        return Pages(out["proven"], proven_run, out["unproven"], unproven_run, composition)

    return off_the_browser_loop(build)


# -- the browser ---------------------------------------------------------------------------------


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI never skips the browser tests; .ci/run installs them)",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium, launched by Playwright with the machine's offline flags."""
    if importlib.util.find_spec("playwright") is None:
        _unavailable('the playwright package is missing: pip install -e ".[dev]"')
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM}: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                              args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


class Screen:
    """One report opened at one window width, with every console error and page error."""

    def __init__(self, browser: Any, path: Path, width: int) -> None:
        self.width = width
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        self.page.goto(path.resolve().as_uri(), wait_until="load")
        assert self.page.evaluate("document.documentElement.dataset.ready") == "true"

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    def assert_fits(self) -> None:
        """No page-level horizontal overflow, honestly: nothing hides it at the root."""
        scroll, inner = self.page.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]")
        assert inner == self.width
        assert scroll <= inner, f"the page is {scroll} px wide in a {inner} px window"
        for element in ("html", "body"):
            assert self.page.evaluate(
                f"getComputedStyle(document.querySelector('{element}')).overflowX") == "visible"
        # the boxes that hold wide things stay inside the window and scroll themselves
        rights = self.page.evaluate(
            "Array.from(document.querySelectorAll('.chart-wrap, .table-wrap, section'))"
            ".filter(e => e.getClientRects().length)"
            ".map(e => e.getBoundingClientRect().right)")
        assert rights and max(rights) <= inner

    def shoot(self, where: Path) -> Path:
        shot = where / f"{self.width}.png"
        self.page.screenshot(path=str(shot), full_page=True)
        assert _distinct_bytes(shot.read_bytes()) > 64, "the screenshot is blank"
        return shot

    def first_sentence(self) -> str:
        """The page's first paragraph, which must be the lead, within the first screenful."""
        first = self.page.locator("p").first
        assert first.get_attribute("id") == "lead"
        box = first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 900
        assert box["x"] + box["width"] <= self.width
        return str(first.inner_text())

    def close(self) -> None:
        assert self.errors == []
        self.context.close()


@pytest.mark.e2e
@pytest.mark.parametrize("width", WIDTHS)
def test_a_proven_run_names_its_cause_first_on_every_screen(
        browser: Any, pages: Pages, width: int, tmp_path: Path) -> None:
    """The demo, reported from the store with its proof kept: the first sentence is PROVEN and
    names the fact; the chart scrolls in its own box on a phone; the chain is verified."""
    screen = Screen(browser, pages.proven, width)
    page = screen.page
    try:
        screen.assert_fits()
        lead = screen.first_sentence()
        assert lead.startswith("PROVEN: fact 'customer-profile' caused the answer.")
        assert "Without it the agent answered" in lead and "DENIED" in lead
        assert "not proven" not in page.locator("body").inner_text().lower()
        # the board puts the proof before the proxy's ranking speaks
        order = page.evaluate(
            "['#proven', '#baseline', '.tiers', 'ol.suspects'].map("
            "s => document.querySelector('#board ' + s).getBoundingClientRect().top)")
        assert order == sorted(order)
        wrap = page.locator("#chart .chart-wrap").first
        overflow = wrap.evaluate("e => [e.scrollWidth, e.clientWidth]")
        if width == 390:
            assert overflow[0] > overflow[1], "the chart should scroll inside its box"
        assert page.locator('#audit[data-chain="verified"]').count() == 1
        assert page.locator("#integrity tr.disposition").count() == 4
        shot = screen.shoot(tmp_path)
        assert shot.stat().st_size > 20_000
    finally:
        screen.close()


@pytest.mark.e2e
@pytest.mark.parametrize("width", WIDTHS)
def test_an_unproven_run_says_so_and_gives_the_prove_command(
        browser: Any, pages: Pages, width: int, tmp_path: Path) -> None:
    """No proof kept: "Not proven yet" and the exact command come first; the tool call's
    arguments (one unbreakable 180-character id) and its result wrap inside the window."""
    screen = Screen(browser, pages.unproven, width)
    page = screen.page
    try:
        lead = screen.first_sentence()
        assert lead.startswith("Not proven yet.")
        assert prove_command(pages.unproven_run) in lead
        assert page.locator("#lead code").inner_text() == prove_command(pages.unproven_run)
        page.locator("#timeline button.step.llm").first.click()
        run = page.locator('#call-0 li.tool-run[data-tool="lookup_order"]')
        assert run.is_visible()
        assert LONG_ID in run.locator("pre.args").inner_text()
        assert "<b>yesterday</b>" in run.locator("pre.result").inner_text()  # escaped, as text
        assert page.locator("#call-0 b").filter(has_text="yesterday").count() == 0
        usage = page.locator("#call-0 .call-usage")
        assert usage.is_visible() and "mock-small" in usage.inner_text()
        screen.assert_fits()
        screen.shoot(tmp_path)
    finally:
        screen.close()


@pytest.mark.e2e
@pytest.mark.parametrize("width", WIDTHS)
def test_a_composition_chart_shows_the_pipeline_with_members_closed(
        browser: Any, pages: Pages, width: int, tmp_path: Path) -> None:
    """Each member agent is one box; its internal stages are hidden until it is opened."""
    screen = Screen(browser, pages.composition, width)
    page = screen.page
    try:
        screen.assert_fits()
        members = page.locator("#chart-svg g.node.member")
        assert [members.nth(i).get_attribute("data-member") for i in range(members.count())] \
            == ["classify", "respond"]
        assert page.locator('#chart-svg [data-stage-id="respond/call_llm"]').count() == 0
        inner = page.locator('details.member-chart[data-member="respond"] '
                             '[data-stage-id="respond/call_llm"]')
        assert inner.count() == 1 and not inner.is_visible()
        assert page.locator("details.member-chart[open]").count() == 0
        members.nth(1).click()
        assert inner.is_visible()
        assert inner.get_attribute("class") is not None and "ran" in str(
            inner.get_attribute("class"))
        screen.assert_fits()
        screen.shoot(tmp_path)
    finally:
        screen.close()


# -- the page's content, without a browser --------------------------------------------------------


def test_each_call_shows_its_tool_runs_and_usage(pages: Pages) -> None:
    """Arguments and result of every tool call, and a usage line per call matching #usage."""
    html = pages.unproven.read_text(encoding="utf-8")
    assert html.count('class="tool-run"') == 1
    assert html.count('class="call-usage"') == html.count('<tr class="call"') == 2
    assert "&lt;b&gt;yesterday&lt;/b&gt;" in html and "<b>yesterday</b>" not in html
    assert 'data-chain="verified"' in html


def test_redacted_tool_arguments_stay_masked() -> None:
    """A secret in a tool's arguments and result, masked at the source, never reaches the page."""
    agent = _tool_agent(redaction=RedactionPolicy(text_patterns=[r"sk-live\w+"]))
    result = off_the_browser_loop(lambda: agent.run_sync("Where is my order?"))
    html = render_html_report(Recording.of(result))
    assert SECRET not in html
    start = html.index('<ol class="tool-runs">')
    runs = html[start:html.index("</ol>", start)]
    assert REDACTED in runs and LONG_ID in runs


def test_a_report_without_a_kept_head_says_no_chain(pages: Pages) -> None:
    """write_html_report without the store's head: the run has no chain to check, said so."""
    html = pages.composition.read_text(encoding="utf-8")
    assert 'data-chain="no-chain"' in html and "No chain:" in html
    assert 'id="integrity"' in html


def test_a_run_that_no_longer_matches_its_head_says_so(tmp_path: Path) -> None:
    """The audit section reads verified / does not match / no chain from the kept head."""

    def two_runs() -> tuple[Recording, Recording, str | None]:
        with RunStore(tmp_path / "runs.db") as store:
            kept = store.save(_tool_agent().run_sync("Where is my order?"))
            other = Recording.of(_tool_agent().run_sync("Where is my parcel?"))
            return kept, other, store.chain_head(kept.run_id)

    kept, other, head = off_the_browser_loop(two_runs)
    assert head is not None
    assert 'data-chain="verified"' in render_html_report(kept, chain_head=head)
    broken = render_html_report(other, chain_head=head)
    assert 'data-chain="broken"' in broken and "Does not match its chain head" in broken


@pytest.mark.parametrize(("proof", "starts"), [
    ({"uncovered": ["shipping-policy"], "reruns": 2, "baseline": {"flips": 0, "runs": 1}},
     "Not proven yet. The re-runs ran out of budget before covering shipping-policy"),
    ({"reruns": 3, "baseline": {"flips": 0, "runs": 1}},
     "Nothing proven: no removal of a suspect changed the answer as judged."),
])
def test_a_kept_proof_without_a_cause_leads_with_what_it_did_not_prove(
        proof: dict[str, Any], starts: str) -> None:
    """A kept localization that convicted no one says so first — never a proxy as a winner."""
    recording = Recording.of(off_the_browser_loop(
        lambda: _tool_agent().run_sync("Where is my order?")))
    html = render_html_report(recording, localization={"kind": "localize", "causes": [],
                                                       **proof})
    lead = html[html.index('<p id="lead"'):]
    lead = re.sub(r"<[^>]+>", "", lead[:lead.index("</p>")])
    assert lead.startswith(starts)
    assert "PROVEN:" not in lead


def test_a_failed_run_leads_with_its_error() -> None:
    """A run that failed names its error first: there is no answer to prove."""
    from agentfootprint import ProviderError

    agent = Agent(provider=mock(script=[ProviderError("rate limited", status=429,
                                                      provider="mock")]), model="m")
    with pytest.raises(ProviderError) as raised:
        off_the_browser_loop(lambda: agent.run_sync("hi"))
    html = render_html_report(Recording.of(raised.value.run))
    assert html.index('<p id="lead" class="lead failed"><b>RUN FAILED</b>') < html.index("<dl>")
    assert "rate limited" in html[html.index('id="lead"'):html.index("<dl>")]


def _distinct_bytes(png: bytes) -> int:
    """How many distinct byte values the decoded image data has (a blank page has few)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    data, at = b"", 8
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind == b"IDAT":
            data += png[at + 8:at + 8 + length]
        at += 12 + length
    return len(set(zlib.decompress(data)))
