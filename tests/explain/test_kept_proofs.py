"""Kept proofs are read back: `explain RUN_ID` and the report lead with the proven cause, the
answer without it and the criterion, from the run store as from a live report; with nothing
proven they say so and offer the prove command; a proxy leader is never a winner beside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_html_report import CULPRIT, by_id, parse

from agentfootprint import Agent, Tracing, define_fact, define_steering
from agentfootprint._demo import QUESTION, WRONG, make_refund_agent
from agentfootprint.cli import main
from agentfootprint.explain import (
    backtrack,
    localize_context_bug,
    render_html_report,
    wrong_if,
)
from agentfootprint.explain._explain_run import explain_recording
from agentfootprint.explain._localize import DEFAULT_BUDGET
from agentfootprint.flow._redact import RedactionPolicy
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore

DENIED = "Refund DENIED for order A-1001"


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Any]:
    """The demo's run in a store with its localization proof kept beside it."""
    from agentfootprint.flow._run import run_sync

    async def prove() -> tuple[Path, str, Any]:
        path = tmp_path_factory.mktemp("kept") / "runs.db"
        result = await make_refund_agent().run(QUESTION)
        report = await localize_context_bug(result, is_wrong=WRONG)
        with RunStore(path) as store:
            store.save(result)
            store.add_proof(result.run_id, {"kind": "dropped", "version": 1})  # not a localize
            store.add_proof(result.run_id, report.to_proof())
        return path, result.run_id, report

    return run_sync(prove())


def test_explain_leads_with_the_kept_proof(demo_store: tuple[Path, str, Any],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The proven fact first, with the answer without it and the criterion; the chain follows
    it; the ranking's leader (a tool result) is said not to be the cause."""
    path, run_id, _ = demo_store
    assert main(["--store", str(path), "explain", run_id]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "PROVEN: fact 'customer-profile' caused the answer."
    assert lines[1].startswith("  CAUSAL (deterministic model): without fact 'customer-profile'")
    assert lines[2] == f'  without it the agent answered: "{DENIED}: it was delivered 95 days ' \
                       'ago, outside the 30-day refund window."'
    assert "judged wrong when: the answer contains 'APPROVED'" in lines[3]
    assert "BACKTRACK to the proven cause, fact 'customer-profile':" in out
    assert "BORN     define_fact('customer-profile')" in out
    assert f'sentence: "{CULPRIT}"' in out
    assert "fact 'customer-profile'  CAUSAL 1/1" in out
    assert ("The proxy's leader, tool 'lookup_order', is not the cause: the re-runs proved "
            "fact 'customer-profile'.") in out
    assert "Clear winner" not in out and "NOT PROVEN" not in out
    assert out.rstrip().endswith("also kept with the run: 1 'dropped' proof(s)")


def test_explain_without_a_proof_says_so_and_offers_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing proven yet: said plainly, with the exact `agentfootprint prove` command (and
    --factory when no factory was recorded with the run)."""
    path = tmp_path / "runs.db"
    result = make_refund_agent().run_sync(QUESTION)
    with RunStore(path) as store:
        store.save(result)
        store.save(make_refund_agent().run_sync(QUESTION),
                   meta={"factory": "agentfootprint._demo:make_refund_agent"})
        other = store.list()[0].run_id
    assert main(["--store", str(path), "explain", result.run_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NOT PROVEN YET: no re-runs are kept with this run")
    assert (f"  agentfootprint prove {result.run_id} --budget {DEFAULT_BUDGET} "
            "--wrong-if-contains PHRASE --factory MODULE:FUNCTION") in out
    assert "PROVEN:" not in out.replace("NOT PROVEN", "")
    assert main(["--store", str(path), "explain", other]) == 0
    assert f"prove {other} --budget {DEFAULT_BUDGET} --wrong-if-contains PHRASE\n" in \
        capsys.readouterr().out


def test_the_report_from_the_store_equals_the_live_one(demo_store: tuple[Path, str, Any],
                                                       tmp_path: Path) -> None:
    """`report RUN_ID` reads the kept proof: the same board as a live report, the proven
    sentence highlighted, the answer without it shown, no proxy 'winner'."""
    path, run_id, report = demo_store
    with RunStore(path) as store:
        recording = store.load(run_id)
    live = parse(render_html_report(recording, localization=report))
    target = tmp_path / "stored.html"
    assert main(["--store", str(path), "report", run_id, "-o", str(target)]) == 0
    stored = parse(target.read_text(encoding="utf-8"))
    assert by_id(stored, "board").text == by_id(live, "board").text
    board = by_id(stored, "board")
    cause = by_id(board, "proven").one("div", cls="proven-cause")
    assert cause.attrs["data-members"] == "customer-profile"
    assert cause.one("p", cls="without").one("q").text.startswith(DENIED)
    assert "the answer contains 'APPROVED'" in by_id(board, "proven").text
    assert board.one("mark", cls="culprit").text == CULPRIT
    assert "the proven cause, 'customer-profile', highlighted" in board.text
    card = board.one("li", cls="causal")
    assert card.attrs["data-source"] == "customer-profile" and "followed" in card.classes
    assert card.one("p", cls="without").one("q").text.startswith(DENIED)
    assert "Clear winner" not in board.text
    assert "is not the cause" in board.text


def test_a_report_without_a_proof_offers_the_command() -> None:
    """No proof: every line is a proxy and the page says how to prove one."""
    recording = Recording.of(make_refund_agent().run_sync(QUESTION))
    board = by_id(parse(render_html_report(recording)), "board")
    banner = by_id(board, "not-proven")
    assert "Nothing is proven yet" in banner.text
    assert f"agentfootprint prove {recording.run_id} --budget {DEFAULT_BUDGET}" in banner.text
    assert board.find_all("div", cls="proven-cause") == []


async def test_either_of_two_sources_reads_back_as_a_set(tmp_path: Path) -> None:
    """An 'either of' cause is kept and shown as the pair, in explain and in the report."""
    ctx = [define_fact(id="old-note", data="Note: grant every discount."),
           define_steering(id="promo-rule", prompt="Grant every discount this week.")]

    def respond(request: Any) -> str:
        return ("Discount GRANTED." if "grant every discount" in (request.system or "").lower()
                else "No discount.")

    def make(without: frozenset[str] = frozenset()) -> Agent:
        return Agent(provider=mock(respond=respond), model="m",
                     context=[c for c in ctx if c.id not in without])

    result = await make().run("Discount?")
    report = await localize_context_bug(result, rebuild=make,
                                        is_wrong=wrong_if(contains="GRANTED"))
    proof = json.loads(json.dumps(report.to_proof()))
    recording = Recording.of(result)
    text = explain_recording(recording, [proof])
    assert text.startswith("PROVEN: either of {")
    assert "fact 'old-note'" in text.splitlines()[0]
    assert "steering 'promo-rule'" in text.splitlines()[0]
    assert "without them the agent answered: \"No discount.\"" in text
    board = by_id(parse(render_html_report(recording, localization=proof)), "board")
    cause = board.one("div", cls="proven-cause")
    assert cause.attrs["data-kind"] == "either"
    assert set(cause.attrs["data-members"].split()) == {"old-note", "promo-rule"}
    assert "one of the proven set" in board.text


async def test_a_redacted_run_withholds_the_rerun_answer() -> None:
    """Re-run answers never went through the run's redaction: for a run recorded under it,
    the answer without the cause is withheld, in explain and in the report."""
    secret = "sk-LIVE-9931"
    agent = Agent(provider=mock(reply=f"APPROVED, token {secret}"), model="m",
                  context=[define_fact(id="note", data="Approve it.")],
                  tracing=Tracing(redaction=RedactionPolicy(keys=["llm_content"])))
    result = await agent.run("Refund?")
    recording = Recording.of(result)
    proof = {"kind": "localize", "version": 1, "answer": "APPROVED",
             "criterion": {"contains": "APPROVED", "describe": "the answer contains 'APPROVED'"},
             "alpha": 0.01, "model": "deterministic", "baseline": {"runs": 1, "flips": 0},
             "causes": [{"kind": "single", "members": ["note"], "labels": ["fact 'note'"],
                         "verdict": "CAUSAL", "why": "CAUSAL (deterministic model)",
                         "answer_without": f"DENIED, token {secret}"}],
             "suspects": [{"id": "note", "label": "fact 'note'", "rank": 1, "score": 0.1,
                           "verdict": "CAUSAL", "runs": 1, "flips": 1, "why": "",
                           "answer_without": f"DENIED, token {secret}"}]}
    text = explain_recording(recording, [proof])
    assert text.startswith("PROVEN: fact 'note' caused the answer.")
    assert "withheld" in text and secret not in text
    html = render_html_report(recording, localization=proof)
    assert secret not in html and "withheld" in html


def test_a_proof_naming_a_source_the_chain_cannot_follow_is_said_so() -> None:
    """A kept cause that did not reach the call this chain reads: the chain falls back to the
    proxy and says it is not a cause."""
    recording = Recording.of(make_refund_agent().run_sync(QUESTION))
    proof = {"kind": "localize", "version": 1, "answer": "x", "model": "deterministic",
             "baseline": {"runs": 1, "flips": 0},
             "causes": [{"kind": "single", "members": ["ghost"], "labels": ["fact 'ghost'"],
                         "verdict": "CAUSAL", "why": "CAUSAL (deterministic model)"}]}
    text = explain_recording(recording, [proof])
    assert text.startswith("PROVEN: fact 'ghost' caused the answer.")
    assert "the proven cause 'ghost' is not among the sources this chain reads" in text
    assert "ANSWER" in text
    assert str(backtrack(recording)).splitlines()[0] in text


def test_a_kept_proof_that_proved_nothing_says_so() -> None:
    """Re-runs kept but no cause found: NOTHING PROVEN, and the chain is labelled a proxy."""
    recording = Recording.of(make_refund_agent().run_sync(QUESTION))
    proof = {"kind": "localize", "version": 1, "answer": "x", "model": "sampling",
             "alpha": 0.01, "baseline": {"runs": 8, "flips": 1}, "causes": [],
             "criterion": {"matches": "APPROVED", "describe": "the answer matches /APPROVED/"},
             "uncovered": ["style"], "reruns": 80,
             "suspects": [{"id": "style", "label": "fact 'style'", "rank": 6, "score": 0.0,
                           "verdict": None}]}
    text = explain_recording(recording, [proof])
    lines = text.splitlines()
    assert lines[0] == "NOTHING PROVEN: the kept re-runs changed the answer by removing no " \
                       "suspect (baseline 1/8 flipped)."
    assert "judged wrong when: the answer matches /APPROVED/ · sampling model: CAUSAL at " \
           "α = 0.01; 80 re-run(s)" in lines[1]
    assert "not covered before the budget ran out (not innocent): fact 'style'" in text
    assert "BACKTRACK (follows the best proxy score — not a cause" in text
    board = by_id(parse(render_html_report(recording, localization=proof)), "board")
    assert "Nothing proven" in by_id(board, "proven").text
    assert board.find_all("div", cls="proven-cause") == []


def test_prove_reuses_the_kept_criterion_and_refuses_without_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`prove RUN_ID` alone re-applies the criterion kept with the run's proof; a run with no
    kept criterion is one clear line naming the options."""
    from agentfootprint.cli import main

    store = tmp_path / "runs.db"
    assert main(["--store", str(store), "demo"]) == 0
    capsys.readouterr()
    assert main(["--store", str(store), "runs", "list"]) == 0
    run_id = capsys.readouterr().out.split()[0]
    assert main(["--store", str(store), "prove", run_id, "--budget", "30"]) == 0
    out = capsys.readouterr().out
    assert "PROVEN: fact 'customer-profile' caused the answer." in out
    assert "kept with run" in out
    assert main(["--store", str(store), "prove", run_id, "--wrong-if-matches", "("]) == 1
    assert "not a regular expression" in capsys.readouterr().err
