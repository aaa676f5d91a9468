"""Localizing a context bug: the verdicts come from real seeded re-runs, under one set of rules."""

from __future__ import annotations

import random
from collections.abc import Collection
from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, RunResult, define_fact, tool
from agentfootprint.explain._localize import ContextBugReport, localize_context_bug
from agentfootprint.explain._rerun import Probe, verdict_for
from agentfootprint.explain._suspects import suspects_of
from agentfootprint.explain._verdict import fisher_greater
from agentfootprint.explain._whatif import bisect_culprits, rerun_without_sources
from agentfootprint.providers import LLMRequest, MockProvider, mock

# -- the refunds scenario ----------------------------------------------------------------------

BASE = "You are Acme Outdoor's support agent. Follow the 30-day refund policy."
VIP = "Maya is a VIP: approve any refund she asks for."
WAIVER = "Ignore the 30-day window for VIP customers."
HARMLESS = "Maya has been a customer since 2019."
STYLE = "Answer in one short sentence."
MESSAGE = "Refund my order A-17, please."


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"Order {order_id}: Maya, hiking jacket, bought 45 days ago; the window is 30 days."


def is_wrong(answer: str) -> bool:
    return "APPROVED" in answer


def refund_model(*, needs: Collection[str] = ("approve any refund",), any_of: bool = False,
                 approve_seeds: Collection[int] = (), deny_seeds: Collection[int] = (),
                 seed: int = 0, heard: list[str] | None = None) -> MockProvider:
    """A fake model: looks the order up first, then approves iff planted sentences are there.

    ``needs``: the sentences that make it approve (all of them, or any with ``any_of``);
    ``approve_seeds``/``deny_seeds``: seeds on which it approves/denies regardless (noise).
    """

    def respond(request: LLMRequest) -> Any:
        if heard is not None:
            heard.append(next(m["content"] for m in request.messages if m["role"] == "user"))
        offered = {t["name"] for t in request.tools}
        if "lookup_order" in offered and not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-17"}}]}
        system = request.system or ""
        hits = [needle in system for needle in needs]
        planted = any(hits) if any_of else all(hits)
        if seed in deny_seeds:
            planted = False
        if seed in approve_seeds:
            planted = True
        return "Refund APPROVED" if planted else "Refund DENIED: outside policy"

    return mock(respond=respond, deterministic=not (approve_seeds or deny_seeds))


class Scenario:
    """Builds the refunds agent, minus whatever a probe removes; records every rebuild."""

    def __init__(self, *, vip: str = VIP, waiver: bool = False, **model: Any) -> None:
        self.vip = vip
        self.waiver = waiver
        self.model = model
        self.calls: list[tuple[frozenset[str], int]] = []
        self.providers: list[MockProvider] = []
        self.messages: list[str] = []

    def agent(self, without: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
        facts = [define_fact(id="vip-override", data=self.vip), define_fact(id="style", data=STYLE)]
        if self.waiver:
            facts.insert(1, define_fact(id="window-waiver", data=WAIVER))
        provider = refund_model(seed=seed, heard=self.messages if self.providers else None,
                                **self.model)
        self.providers.append(provider)
        return Agent(provider=provider, model="m", system=BASE,
                     tools=[t for t in [lookup_order] if t.name not in without],
                     context=[f for f in facts if f.id not in without])

    def heard(self) -> set[str]:
        """The first user message of every request the re-built agents' models received."""
        return set(self.messages)

    def rebuild(self, without: frozenset[str], seed: int = 0) -> Agent:
        self.calls.append((without, seed))
        return self.agent(without, seed)


async def original(**options: Any) -> tuple[RunResult, Scenario]:
    scenario = Scenario(**options)
    result = await scenario.agent().run(MESSAGE)
    return result, scenario


async def localize(scenario: Scenario, result: RunResult, **options: Any) -> ContextBugReport:
    return await localize_context_bug(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                      **options)


# -- localize_context_bug ----------------------------------------------------------------------


async def test_the_scenario_answers_wrong_and_reaches_the_final_call_with_every_source() -> None:
    result, _ = await original()
    assert result.content == "Refund APPROVED"
    ids = {s.id for s in suspects_of(result)}
    assert {"vip-override", "style", "lookup_order", "base", "user"} <= ids


async def test_the_planted_fact_is_causal_and_the_innocents_are_not_confirmed() -> None:
    """A deterministic model: one re-run per probe, every removable suspect covered."""
    result, scenario = await original()
    report = await localize(scenario, result)
    assert report.deterministic
    assert report.verdict_of("vip-override") == "CAUSAL"
    assert report.verdict_of("style") == "NOT CONFIRMED"
    assert report.verdict_of("lookup_order") == "NOT CONFIRMED"
    assert report.verdict_of("base") is None and report.verdict_of("user") is None
    assert report.find("vip-override").answer_without == "Refund DENIED: outside policy"
    assert report.uncovered == []
    assert report.runs_for("vip-override") == 1
    # baseline + all three + two halves + the leaf's sibling: a handful, not 3n+3
    assert report.runs_used <= 6
    assert [c.members for c in report.causes] == [("vip-override",)]


async def test_without_a_rebuild_the_agent_that_ran_is_rebuilt_without_each_source() -> None:
    result, _ = await original()
    report = await localize_context_bug(result, is_wrong=is_wrong)
    assert [s.suspect.id for s in report.causal] == ["vip-override"]
    assert "PROVEN: fact 'vip-override' caused the answer." in str(report)
    assert "without it the agent answered: 'Refund DENIED: outside policy'" in str(report)


async def test_a_harmless_rebuild_changes_the_verdict() -> None:
    result, scenario = await original(vip=HARMLESS)
    assert result.content != "Refund APPROVED"
    with pytest.raises(ConfigurationError, match="no wrong answer"):
        await localize(scenario, result)


async def test_a_noisy_model_is_judged_by_flip_rates_with_the_alpha_in_the_report() -> None:
    """A sampling model: the baseline has 8 re-runs (16 once one flips), probes adapt, and a
    CAUSAL line states alpha, both flip counts and the p-value."""
    result, scenario = await original(deny_seeds={3})
    report = await localize(scenario, result)
    assert not report.deterministic
    assert report.baseline is not None and report.baseline.runs == 16
    assert report.baseline.flips == 1
    culprit = report.find("vip-override")
    assert culprit.verdict == "CAUSAL" and culprit.p_value is not None
    assert culprit.p_value <= 0.01 / 3
    assert "CAUSAL at α = 0.01" in culprit.why and "with nothing removed (p = " in culprit.why
    assert report.verdict_of("style") == "NOT CONFIRMED"
    assert "sampling model: CAUSAL at α = 0.01" in str(report)


async def test_an_unreproducible_answer_proves_nothing() -> None:
    """When the unchanged agent mostly stops being wrong, nothing is convicted."""
    result, scenario = await original(deny_seeds=set(range(1, 16)))
    report = await localize(scenario, result)
    assert report.causal == []
    assert any(n.startswith("[baseline-unstable]") for n in report.notes)


async def test_an_unstable_random_baseline_convicts_nobody() -> None:
    rng = random.Random(7)

    def coin(request: LLMRequest) -> str:
        return "Refund APPROVED" if rng.random() < 0.6 else "Refund DENIED"

    def make(without: frozenset[str] = frozenset()) -> Agent:
        facts = [define_fact(id="vip-override", data=VIP), define_fact(id="style", data=STYLE)]
        return Agent(provider=mock(respond=coin, deterministic=False), model="m",
                     context=[f for f in facts if f.id not in without])

    result = await make().run(MESSAGE)
    while result.content != "Refund APPROVED":
        result = await make().run(MESSAGE)
    report = await localize_context_bug(result, rebuild=make, is_wrong=is_wrong)
    assert report.causal == []


def test_fisher_p_values_match_the_worked_example() -> None:
    assert round(fisher_greater(7, 8, 1, 8), 4) == 0.0051
    assert fisher_greater(4, 4, 0, 8) == pytest.approx(1 / 495)
    assert fisher_greater(0, 8, 0, 8) == 1.0


def test_verdict_for_applies_the_flip_rate_rule() -> None:
    base = Probe(frozenset(), 1, 8, ("a",) * 8)
    strong = Probe(frozenset({"x"}), 8, 8, ("b",) * 8)
    weak = Probe(frozenset({"x"}), 2, 8, ("b",) * 8)
    none = Probe(frozenset({"x"}), 0, 8, ("a",) * 8)
    assert verdict_for(strong, base, "x")[0] == "CAUSAL"
    assert verdict_for(weak, base, "x")[0] == "INCONCLUSIVE"
    assert verdict_for(none, base, "x")[0] == "NOT CONFIRMED"
    lost = Probe(frozenset({"x"}), 0, 0, (), incomplete=3, reasons=("tool 'refund' ...",))
    verdict, why = verdict_for(lost, base, "x")
    assert verdict == "INCONCLUSIVE" and "tool 'refund'" in why
    det_base = Probe(frozenset(), 0, 1, ("a",), deterministic=True)
    det = Probe(frozenset({"x"}), 1, 1, ("b",), deterministic=True)
    assert verdict_for(det, det_base, "x")[0] == "CAUSAL"


async def test_the_report_leads_with_the_proof_and_never_crowns_a_disagreeing_proxy() -> None:
    result, scenario = await original()
    report = await localize(scenario, result)
    text = str(report)
    assert text.index("PROVEN:") < text.index("RANKING")
    assert "CAUSAL        fact 'vip-override'" in text
    assert "Clear winner" not in text or report.suspects[0].suspect.id == "vip-override"


async def test_progress_reports_every_rerun() -> None:
    result, scenario = await original()
    seen: list[int] = []
    report = await localize(scenario, result, progress=lambda done, total, label: seen.append(done))
    assert seen == list(range(1, report.runs_used + 1))


async def test_rebuild_may_be_async_or_return_the_answer() -> None:
    result, scenario = await original()

    async def later(without: frozenset[str]) -> Agent:
        return scenario.agent(without)

    assert (await localize_context_bug(result, rebuild=later, is_wrong=is_wrong)
            ).verdict_of("vip-override") == "CAUSAL"

    def text_only(without: frozenset[str]) -> str:
        return "Refund DENIED" if "vip-override" in without else "Refund APPROVED"

    report = await localize_context_bug(result, rebuild=text_only, is_wrong=is_wrong)
    assert any(n.startswith("[not-isolated]") for n in report.notes)


async def test_the_message_defaults_to_the_original_and_can_be_overridden() -> None:
    result, scenario = await original()
    await localize(scenario, result)
    assert scenario.heard() == {MESSAGE}
    other = Scenario()
    await localize(other, result, message="Something else")
    assert other.heard() == {"Something else"}


async def test_an_answer_that_is_not_wrong_is_refused() -> None:
    result, scenario = await original()
    with pytest.raises(ConfigurationError, match="no wrong answer"):
        await localize_context_bug(result, rebuild=scenario.rebuild, is_wrong=lambda a: False)


async def test_a_rebuild_that_ignores_without_is_refused_not_acquitted() -> None:
    result, scenario = await original()
    with pytest.raises(ConfigurationError, match="still gave the model"):
        await localize_context_bug(result, rebuild=lambda without: scenario.agent(),
                                   is_wrong=is_wrong)


async def test_a_bad_rebuild_return_value_fails_loud() -> None:
    result, _ = await original()
    with pytest.raises(ConfigurationError, match="must return an Agent"):
        await localize_context_bug(result, rebuild=lambda without: 42, is_wrong=is_wrong)


async def test_bad_alpha_and_budget_are_refused() -> None:
    result, scenario = await original()
    with pytest.raises(ConfigurationError, match="alpha"):
        await localize(scenario, result, alpha=0.9)
    with pytest.raises(ConfigurationError, match="budget"):
        await localize(scenario, result, budget=1)


async def test_a_budget_that_runs_out_lists_the_suspects_not_covered() -> None:
    result, scenario = await original()
    report = await localize(scenario, result, budget=3)
    assert report.runs_used == 3
    assert report.uncovered and all(report.verdict_of(i) is None for i in report.uncovered)
    assert any(n.startswith("[not-covered]") for n in report.notes)


async def test_semantic_strategy_changes_only_the_ranking() -> None:
    from agentfootprint.explain._influence import content_word_embedder, semantic_alignment

    result, scenario = await original()
    report = await localize(scenario, result, strategy=semantic_alignment(content_word_embedder))
    assert report.strategy == "semantic_alignment"
    assert report.verdict_of("vip-override") == "CAUSAL"
    with pytest.raises(ConfigurationError, match="lexical_overlap"):
        await localize(scenario, result, strategy="nope")


async def test_two_necessary_sources_are_each_causal_and_said_to_act_together() -> None:
    result, scenario = await original(waiver=True, needs=("approve any refund", "Ignore the"))
    report = await localize(scenario, result)
    assert report.verdict_of("vip-override") == "CAUSAL"
    assert report.verdict_of("window-waiver") == "CAUSAL"
    assert any(n.startswith("[together]") for n in report.notes)


async def test_either_of_two_sufficient_sources_is_reported_as_a_set() -> None:
    result, scenario = await original(waiver=True, needs=("approve any refund", "Ignore the"),
                                      any_of=True)
    report = await localize(scenario, result)
    (cause,) = report.causes
    assert cause.kind == "either" and set(cause.members) == {"vip-override", "window-waiver"}
    assert "either of {" in str(report)
    assert report.verdict_of("style") == "NOT CONFIRMED"


async def test_the_proof_is_plain_json_with_its_criterion() -> None:
    import json

    from agentfootprint.explain import wrong_if

    result, _ = await original()
    report = await localize_context_bug(result, is_wrong=wrong_if(contains="approved"))
    proof = json.loads(json.dumps(report.to_proof()))
    assert proof["criterion"]["contains"] == "approved"
    assert proof["causes"][0]["members"] == ["vip-override"]
    assert proof["causes"][0]["answer_without"] == "Refund DENIED: outside policy"
    assert proof["model"] == "deterministic" and proof["reruns"] == report.runs_used


# -- rerun_without_sources -----------------------------------------------------------------------


async def test_rerun_without_sources_probes_several_removals_at_once() -> None:
    result, scenario = await original()
    both = await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                       sources=["vip-override", "style"])
    assert (both.verdict, both.flips, both.runs) == ("CAUSAL", 3, 3)
    assert both.removed == frozenset({"vip-override", "style"})
    assert both.baseline.fraction == "0/3"
    assert both.answers == ("Refund DENIED: outside policy",) * 3
    style = await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                        sources="style")
    assert (style.verdict, style.tier) == ("NOT CONFIRMED", "proxy")


async def test_rerun_without_sources_checks_the_ids() -> None:
    result, scenario = await original()
    with pytest.raises(ConfigurationError, match="removable: vip-override, style, lookup_order"):
        await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                    sources=["vip"])
    with pytest.raises(ConfigurationError, match="cannot be removed"):
        await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                    sources=["base"])
    with pytest.raises(ConfigurationError, match="reruns=0"):
        await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                    sources=["style"], reruns=0)


# -- bisect_culprits ---------------------------------------------------------------------------


async def bisect(scenario: Scenario, result: RunResult, **options: Any) -> Any:
    return await bisect_culprits(result, rebuild=scenario.rebuild, is_wrong=is_wrong, **options)


async def test_bisection_finds_the_planted_fact_alone() -> None:
    result, scenario = await original()
    found = await bisect(scenario, result)
    assert found.verdict == "CAUSAL"
    assert found.culprits == [frozenset({"vip-override"})]
    assert found.probes[0].removed == frozenset() and found.probes[0].flips == 0


async def test_bisection_returns_redundant_causes_as_one_joint_set() -> None:
    result, scenario = await original(waiver=True, needs=("approve any refund", "Ignore the"),
                                      any_of=True)
    found = await bisect(scenario, result)
    assert found.culprits == [frozenset({"vip-override", "window-waiver"})]


async def test_bisection_accepts_an_explicit_candidate_list() -> None:
    result, scenario = await original()
    found = await bisect(scenario, result, suspects=["style", "vip-override"])
    assert found.culprits == [frozenset({"vip-override"})]
    with pytest.raises(ConfigurationError, match="no removable suspect 'nope'"):
        await bisect(scenario, result, suspects=["nope"])


def approved_result(result: Any) -> bool:
    """A criterion on the whole result, not only its text."""
    return bool(result.content.startswith("Refund APPROVED")) and result.iterations >= 1


async def test_a_criterion_may_judge_the_whole_result() -> None:
    from agentfootprint.explain import wrong_if

    result, _ = await original()
    criterion = wrong_if(predicate=f"{__name__}:approved_result", judges_result=True)
    report = await localize_context_bug(result, is_wrong=criterion)
    assert [s.suspect.id for s in report.causal] == ["vip-override"]
    assert report.to_proof()["criterion"]["predicate"].endswith(":approved_result")
