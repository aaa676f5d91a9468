"""Localizing a context bug: the verdicts come from real seeded re-runs, under one set of rules."""

from __future__ import annotations

import random
from collections.abc import Collection
from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, RunResult, define_fact, tool
from agentfootprint.explain._localize import ContextBugReport, localize_context_bug
from agentfootprint.explain._rerun import (
    Probe,
    bisect_culprits,
    rerun_without_sources,
    verdict_for,
)
from agentfootprint.explain._suspects import suspects_of
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
                 seed: int = 0) -> MockProvider:
    """A fake model: looks the order up first, then approves iff planted sentences are there.

    ``needs``: the sentences that make it approve (all of them, or any with ``any_of``);
    ``approve_seeds``/``deny_seeds``: seeds on which it approves/denies regardless (noise).
    """

    def respond(request: LLMRequest) -> Any:
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

    return mock(respond=respond)


class Scenario:
    """Builds the refunds agent, minus whatever a probe removes; records every rebuild."""

    def __init__(self, *, vip: str = VIP, waiver: bool = False, **model: Any) -> None:
        self.vip = vip
        self.waiver = waiver
        self.model = model
        self.calls: list[tuple[frozenset[str], int]] = []
        self.providers: list[MockProvider] = []

    def agent(self, without: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
        facts = [define_fact(id="vip-override", data=self.vip), define_fact(id="style", data=STYLE)]
        if self.waiver:
            facts.insert(1, define_fact(id="window-waiver", data=WAIVER))
        provider = refund_model(seed=seed, **self.model)
        self.providers.append(provider)
        return Agent(provider=provider, model="m", system=BASE,
                     tools=[t for t in [lookup_order] if t.name not in without],
                     context=[f for f in facts if f.id not in without])

    def heard(self) -> set[str]:
        """The first user message of every request the re-built agents' models received."""
        return {next(m["content"] for m in r.messages if m["role"] == "user")
                for p in self.providers[1:] for r in p.requests}

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
    """The recorded run approves the refund and its suspects are the five sources it sent."""
    result, _ = await original()
    assert result.content == "Refund APPROVED"
    assert [(s.kind, s.id) for s in suspects_of(result)] == [
        ("base", "base"), ("injection", "vip-override"), ("injection", "style"),
        ("user", "user"), ("tool", "lookup_order")]


async def test_the_planted_fact_is_causal_and_the_innocents_are_not_confirmed() -> None:
    """The planted fact flips 3/3 on a 0/3 baseline; the benign fact and the tool stay 0/3."""
    result, scenario = await original()
    report = await localize(scenario, result)
    assert report.baseline is not None
    assert (report.baseline.flips, report.baseline.runs) == (0, 3)
    vip = report.find("vip-override")
    assert (vip.verdict, vip.flips, vip.runs, vip.tier) == ("CAUSAL", 3, 3, "causal")
    assert vip.answers == ("Refund DENIED: outside policy",) * 3
    for sid in ("style", "lookup_order"):
        item = report.find(sid)
        assert (item.verdict, item.flips, item.runs, item.tier) == ("NOT CONFIRMED", 0, 3,
                                                                    "proxy")
    assert report.verdict_of("base") is None and report.verdict_of("user") is None
    assert [s.suspect.id for s in report.causal] == ["vip-override"]
    assert all(s.score_tier == "proxy" for s in report.suspects)


async def test_every_verdict_comes_from_fresh_seeded_rebuilds() -> None:
    """A baseline and one probe per removable suspect, each rebuilt fresh with seeds 0, 1, 2."""
    result, scenario = await original()
    report = await localize(scenario, result)
    probes = [frozenset(), frozenset({"vip-override"}), frozenset({"style"}),
              frozenset({"lookup_order"})]
    assert scenario.calls == [(p, seed) for p in probes for seed in range(3)]
    assert report.runs_used == 12


async def test_a_harmless_rebuild_changes_the_verdict() -> None:
    """Rebuilding with the planted sentence made harmless leaves no CAUSAL verdict at all."""
    result, _ = await original()
    harmless = Scenario(vip=HARMLESS)
    report = await localize(harmless, result)
    assert report.baseline is not None and report.baseline.flips == 3
    assert report.causal == []
    assert {s.verdict for s in report.suspects if s.suspect.removable} == {"INCONCLUSIVE"}
    assert "baseline unstable" in report.find("vip-override").why


async def test_an_unstable_baseline_makes_every_verdict_inconclusive() -> None:
    """A model that misbehaves on one seed whatever is removed convicts nobody."""
    result, scenario = await original(deny_seeds={1})
    report = await localize(scenario, result)
    assert report.baseline is not None and report.baseline.fraction == "1/3"
    assert not report.baseline_stable
    removable = [s for s in report.suspects if s.suspect.removable]
    assert [s.verdict for s in removable] == ["INCONCLUSIVE"] * 3
    assert report.find("vip-override").flips == 3  # flipped every time, still not CAUSAL
    assert any("baseline-unstable" in note for note in report.notes)


async def test_an_unstable_random_baseline_convicts_nobody() -> None:
    """A model that flips at random per seed gives INCONCLUSIVE for every suspect."""
    noisy = {seed for seed in range(3) if random.Random(seed).random() < 0.5}
    assert noisy and len(noisy) < 3  # seeds 0..2 give a mix, so the test means something
    result, scenario = await original(deny_seeds=noisy)
    report = await localize(scenario, result)
    assert report.causal == []
    assert {s.verdict for s in report.suspects if s.suspect.removable} == {"INCONCLUSIVE"}


async def test_a_single_rerun_is_refused_before_any_model_call() -> None:
    """reruns=1 (or 0) is a ConfigurationError and rebuild is never called."""
    result, scenario = await original()
    for reruns in (1, 0):
        with pytest.raises(ConfigurationError, match="at least 2"):
            await localize(scenario, result, reruns=reruns)
    assert scenario.calls == []


async def test_a_strict_majority_is_causal_and_a_minority_is_inconclusive() -> None:
    """2/3 flips convict the planted fact; 1/3 flips leave it INCONCLUSIVE (below majority)."""
    result, two = await original(approve_seeds={2})
    report = await localize(two, result)
    vip = report.find("vip-override")
    assert (vip.verdict, vip.fraction) == ("CAUSAL", "2/3")
    _, one = await original(approve_seeds={1, 2})
    report = await localize(one, result)
    vip = report.find("vip-override")
    assert (vip.verdict, vip.fraction) == ("INCONCLUSIVE", "1/3")
    assert "below a strict majority" in vip.why


async def test_an_even_split_is_not_a_majority() -> None:
    """With 4 re-runs, 2 flips is not a strict majority, so not CAUSAL."""
    result, scenario = await original(approve_seeds={2, 3})
    report = await localize(scenario, result, reruns=4)
    assert report.find("vip-override").fraction == "2/4"
    assert report.verdict_of("vip-override") == "INCONCLUSIVE"


def test_verdict_for_applies_the_same_rules() -> None:
    """verdict_for: CAUSAL needs a strict majority on a zero-flip baseline."""
    stable, shaky = Probe(frozenset(), 0, 3, ()), Probe(frozenset(), 1, 3, ())
    assert verdict_for(Probe(frozenset({"x"}), 2, 3, ()), stable, "x")[0] == "CAUSAL"
    assert verdict_for(Probe(frozenset({"x"}), 3, 3, ()), shaky, "x")[0] == "INCONCLUSIVE"
    assert verdict_for(Probe(frozenset({"x"}), 1, 3, ()), stable, "x")[0] == "INCONCLUSIVE"
    assert verdict_for(Probe(frozenset({"x"}), 0, 3, ()), stable, "x")[0] == "NOT CONFIRMED"
    with pytest.raises(ConfigurationError):
        verdict_for(Probe(frozenset({"x"}), 1, 1, ()), Probe(frozenset(), 0, 1, ()), "x")


async def test_the_report_prints_tiers_ranking_and_verdict_lines() -> None:
    """str(report) names the tiers and prints one aligned verdict line per suspect."""
    result, scenario = await original()
    text = str(await localize(scenario, result))
    lines = text.splitlines()
    assert "scores are a correlational proxy; only re-runs say CAUSAL" in lines[1]
    assert ("CAUSAL        fact 'vip-override'   flipped 3/3 seeded re-runs (baseline 0/3)"
            in lines)
    assert "not confirmed fact 'style'          0/3" in lines
    assert "not confirmed tool 'lookup_order'   0/3" in lines  # USAGE §4, to the character
    assert "no verdict    base 'base'           cannot be removed by a rebuild" in lines
    assert any(line.startswith("   1. ") and "fact 'vip-override'" in line
               and f"“{VIP}”" in line for line in lines)


async def test_the_ranking_orders_the_reruns_and_max_suspects_caps_them() -> None:
    """max_suspects=1 re-runs only the top-ranked removable suspect and says who was skipped."""
    result, scenario = await original()
    report = await localize(scenario, result, max_suspects=1)
    assert report.suspects[0].suspect.id == "vip-override"
    assert report.verdict_of("vip-override") == "CAUSAL"
    assert report.verdict_of("style") is None and report.verdict_of("lookup_order") is None
    assert {w for w, _ in scenario.calls} == {frozenset(), frozenset({"vip-override"})}
    assert any("max_suspects=1" in n and "lookup_order, style" in n for n in report.notes)
    assert "not re-run (beyond max_suspects)" in str(report)


async def test_progress_reports_every_rerun() -> None:
    """progress gets (done, total, label) after each re-run, ending at total."""
    result, scenario = await original()
    seen: list[tuple[int, int, str]] = []
    await localize(scenario, result, progress=lambda d, t, label: seen.append((d, t, label)))
    assert [d for d, _, _ in seen] == list(range(1, 13))
    assert {t for _, t, _ in seen} == {12}
    assert seen[0][2].startswith("baseline") and "vip-override" in seen[3][2]


async def test_rebuild_may_be_async_unseeded_or_return_the_answer() -> None:
    """An async rebuild without seed=, or one returning a RunResult or text, works the same."""
    result, scenario = await original()

    async def unseeded(without: frozenset[str]) -> Agent:
        return scenario.agent(without)

    async def answers(without: frozenset[str], *, seed: int) -> str:
        return (await scenario.agent(without, seed).run(MESSAGE)).content

    async def results(without: frozenset[str]) -> RunResult:
        return await scenario.agent(without).run(MESSAGE)

    for rebuild in (unseeded, answers, results):
        report = await localize_context_bug(result, rebuild=rebuild, is_wrong=is_wrong)
        assert report.verdict_of("vip-override") == "CAUSAL"
        assert report.verdict_of("style") == "NOT CONFIRMED"


async def test_the_message_defaults_to_the_original_and_can_be_overridden() -> None:
    """Re-runs answer the recorded user message unless message= says otherwise."""
    result, scenario = await original()
    report = await localize(scenario, result)
    assert report.message == MESSAGE and scenario.heard() == {MESSAGE}
    _, other = await original()
    report = await localize(other, result, message="Can I return the jacket?")
    assert report.message == "Can I return the jacket?"
    assert other.heard() == {"Can I return the jacket?"}


async def test_an_answer_that_is_not_wrong_is_refused() -> None:
    """Explaining a run whose answer is_wrong calls right is a ConfigurationError."""
    result, scenario = await original(vip=HARMLESS)
    assert result.content.startswith("Refund DENIED")
    with pytest.raises(ConfigurationError, match="no wrong answer"):
        await localize(scenario, result)


async def test_a_rebuild_that_ignores_without_is_refused_not_acquitted() -> None:
    """A rebuild that keeps the source it was asked to drop would clear the culprit (0/3 →
    NOT CONFIRMED); the re-run's own prompt shows it, so the call fails naming it."""
    result, scenario = await original()
    with pytest.raises(ConfigurationError, match=r"still gave the model \['vip-override'\]"):
        await localize_context_bug(result, rebuild=lambda without, seed=0: scenario.agent(),
                                   is_wrong=is_wrong)


async def test_a_bad_rebuild_return_value_fails_loud() -> None:
    """A rebuild returning something that is neither an agent nor an answer is refused."""
    result, _ = await original()
    with pytest.raises(ConfigurationError, match="rebuild"):
        await localize_context_bug(result, rebuild=lambda without: 42, is_wrong=is_wrong)


async def test_semantic_strategy_changes_only_the_ranking() -> None:
    """A named strategy other than the default is used for scores; verdicts stay the same."""
    from agentfootprint.explain._influence import content_word_embedder, semantic_alignment

    result, scenario = await original()
    report = await localize(scenario, result, strategy=semantic_alignment(content_word_embedder))
    assert report.strategy == "semantic_alignment"
    assert report.verdict_of("vip-override") == "CAUSAL"
    with pytest.raises(ConfigurationError, match="lexical_overlap"):
        await localize(scenario, result, strategy="nope")


# -- rerun_without_sources -----------------------------------------------------------------------


async def test_rerun_without_sources_probes_several_removals_at_once() -> None:
    """Removing the planted fact and the style together is CAUSAL; the style alone is not."""
    result, scenario = await original()
    both = await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                       sources=["vip-override", "style"])
    assert (both.verdict, both.flips, both.runs) == ("CAUSAL", 3, 3)
    assert both.removed == frozenset({"vip-override", "style"})
    assert both.baseline.fraction == "0/3"
    assert both.answers == ("Refund DENIED: outside policy",) * 3
    assert "CAUSAL" in str(both) and "baseline 0/3" in str(both)
    style = await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                        sources="style")
    assert (style.verdict, style.tier) == ("NOT CONFIRMED", "proxy")


async def test_rerun_without_sources_checks_the_baseline_and_the_ids() -> None:
    """An unstable baseline makes the probe INCONCLUSIVE; unknown or fixed ids are refused."""
    result, scenario = await original(deny_seeds={1})
    probe = await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                        sources=["vip-override"])
    assert probe.verdict == "INCONCLUSIVE" and probe.flips == 3
    with pytest.raises(ConfigurationError, match="removable: vip-override, style, lookup_order"):
        await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                    sources=["vip"])
    with pytest.raises(ConfigurationError, match="cannot be removed"):
        await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                    sources=["base"])
    with pytest.raises(ConfigurationError, match="at least 2"):
        await rerun_without_sources(result, rebuild=scenario.rebuild, is_wrong=is_wrong,
                                    sources=["style"], reruns=1)


# -- bisect_culprits ---------------------------------------------------------------------------


async def bisect(scenario: Scenario, result: RunResult, **options: Any) -> Any:
    return await bisect_culprits(result, rebuild=scenario.rebuild, is_wrong=is_wrong, **options)


async def test_bisection_finds_the_planted_fact_alone() -> None:
    """Delta debugging narrows the three removable sources to the planted fact."""
    result, scenario = await original()
    found = await bisect(scenario, result)
    assert found.verdict == "CAUSAL"
    assert found.culprits == [frozenset({"vip-override"})]
    assert found.probes[0].removed == frozenset() and found.probes[0].flips == 0
    assert found.probes[1].removed == frozenset({"vip-override", "style", "lookup_order"})
    assert found.runs_used == 3 * len(found.probes)
    assert "culprit set: fact 'vip-override'" in str(found)


async def test_bisection_returns_two_independent_culprits_as_two_sets() -> None:
    """When the answer needs both planted facts, each is a culprit set of its own."""
    result, scenario = await original(waiver=True, needs=("approve any refund", "Ignore the"))
    assert result.content == "Refund APPROVED"
    found = await bisect(scenario, result)
    assert found.verdict == "CAUSAL"
    assert sorted(found.culprits, key=sorted) == [frozenset({"vip-override"}),
                                                  frozenset({"window-waiver"})]


async def test_bisection_returns_redundant_causes_as_one_joint_set() -> None:
    """When either planted fact alone suffices, only removing both flips: one joint set."""
    result, scenario = await original(waiver=True, needs=("approve any refund", "Ignore the"),
                                      any_of=True)
    found = await bisect(scenario, result)
    assert found.culprits == [frozenset({"vip-override", "window-waiver"})]
    report = await localize(scenario, result)
    assert report.causal == []  # no single removal flips it: localize alone cannot see it


async def test_bisection_gates_on_baseline_and_reproduction_and_budget() -> None:
    """Unstable baseline → INCONCLUSIVE; nothing flips → NOT REPRODUCIBLE; no budget → no claim."""
    result, shaky = await original(deny_seeds={2})
    found = await bisect(shaky, result)
    assert (found.verdict, found.culprits, len(found.probes)) == ("INCONCLUSIVE", [], 1)
    result, stubborn = await original(approve_seeds={0, 1, 2})
    found = await bisect(stubborn, result)
    assert (found.verdict, found.culprits) == ("NOT REPRODUCIBLE", [])
    result, scenario = await original()
    found = await bisect(scenario, result, max_probes=2)
    assert (found.verdict, found.culprits) == ("INCONCLUSIVE", [])
    assert "max_probes=2" in found.reason and len(found.probes) == 2
    with pytest.raises(ConfigurationError, match="at least 2"):
        await bisect(scenario, result, reruns=1)


async def test_bisection_accepts_an_explicit_candidate_list() -> None:
    """suspects= limits and orders the candidates; ids outside the slice are refused."""
    result, scenario = await original()
    found = await bisect(scenario, result, suspects=["style", "vip-override"])
    assert found.culprits == [frozenset({"vip-override"})]
    assert all("lookup_order" not in p.removed for p in found.probes)
    with pytest.raises(ConfigurationError, match="no removable suspect 'nope'"):
        await bisect(scenario, result, suspects=["nope"])
