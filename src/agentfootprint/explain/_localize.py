"""Localize a context bug: slice → rank (a proxy) → counterfactual re-runs (the only CAUSAL).

``localize_context_bug(result, rebuild=..., is_wrong=...)`` explains a wrong answer in three
honest steps:

1. **Slice** — ``suspects_of(result)``: every context source that provably reached the final
   LLM call, with the exact text the model saw (a structural fact, read from the log).
2. **Rank** — an influence strategy scores how much each text aligns with the answer
   (``influence.py``). A correlational proxy: it orders the re-runs, it convicts nobody.
3. **Re-run** — first a *baseline*: ``reruns`` runs of the same agent with nothing removed
   (``rebuild(frozenset())``). Then, for each removable suspect (the top ``max_suspects``),
   ``reruns`` runs of the agent rebuilt without it (``rebuild(frozenset({id}))``). A run
   "flips" when ``is_wrong(answer)`` is false.

This module owns ``localize_context_bug`` and its ``ContextBugReport``. The re-runs, the verdict
rules and the ``rebuild(without)`` contract are those of ``rerun.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigurationError
from ..runs._recording import AgentRun
from ._influence import (
    InfluenceStrategy,
    RankingConfidence,
    get_strategy,
    rank_suspects,
    ranking_confidence,
)
from ._rerun import (
    IsWrong,
    Probe,
    Progress,
    Rebuild,
    Rerunner,
    Verdict,
    answer_of,
    check_reruns,
    message_of,
    removable_by_id,
    require_wrong,
    verdict_for,
)
from ._suspects import Suspect, suspects_of

__all__ = ["ContextBugReport", "LocalizedSuspect", "localize_context_bug"]

PROXY_HEADER = "scores are a correlational proxy; only re-runs say CAUSAL"


# -- localize ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalizedSuspect:
    """One suspect: its proxy score (tier "proxy") and, when re-run, its verdict."""

    suspect: Suspect
    rank: int
    """1-based position in the proxy ranking."""
    score: float
    sentence: str
    """The suspect's sentence that aligns best with the answer."""
    verdict: Verdict | None = None
    """``None``: not re-run (cannot be removed, or beyond ``max_suspects``)."""
    flips: int | None = None
    runs: int | None = None
    why: str = ""
    answers: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.suspect.label

    @property
    def score_tier(self) -> Literal["proxy"]:
        return "proxy"

    @property
    def tier(self) -> Literal["causal", "proxy"]:
        """``causal`` only for a CAUSAL verdict; everything else stays a proxy."""
        return "causal" if self.verdict == "CAUSAL" else "proxy"

    @property
    def fraction(self) -> str | None:
        return f"{self.flips}/{self.runs}" if self.runs is not None else None


@dataclass(slots=True)
class ContextBugReport:
    """What ``localize_context_bug`` found: a proxy ranking and the re-run verdicts."""

    answer: str
    message: str
    strategy: str
    suspects: list[LocalizedSuspect]
    """Every suspect, in proxy-rank order."""
    baseline: Probe | None
    """``None`` when there was nothing removable to test (no model calls were spent)."""
    reruns: int
    confidence: RankingConfidence
    runs_used: int = 0
    notes: list[str] = field(default_factory=list)
    """Honest-absence notes: untested suspects, an unstable baseline."""

    @property
    def baseline_stable(self) -> bool:
        return self.baseline is not None and self.baseline.flips == 0

    @property
    def causal(self) -> list[LocalizedSuspect]:
        return [s for s in self.suspects if s.verdict == "CAUSAL"]

    def find(self, id: str) -> LocalizedSuspect:
        """The suspect with this id (the best-ranked one, if several share it)."""
        for item in self.suspects:
            if item.suspect.id == id:
                return item
        known = ", ".join(dict.fromkeys(s.suspect.id for s in self.suspects))
        raise KeyError(f"no suspect {id!r}; known: {known}")

    def verdict_of(self, id: str) -> Verdict | None:
        """The verdict of the suspect with this id (``None``: not re-run)."""
        return self.find(id).verdict

    def __str__(self) -> str:
        return format_report(self)


def format_report(report: ContextBugReport) -> str:
    """The human report: header with the tiers, proxy ranking, re-run verdicts, notes."""
    lines = [f"CONTEXT BUG LOCALIZATION — answer: {_clip(report.answer, 80)!r}",
             f"{PROXY_HEADER} (proxy: {report.strategy}; {report.reruns} seeded re-runs "
             "per probe)"]
    lines.append("")
    lines.append("RANKING (correlational proxy — aligned with the answer, not a cause):")
    for item in report.suspects:
        sentence = f"  “{_clip(item.sentence, 70)}”" if item.sentence else ""
        lines.append(f"  {item.rank:2d}. {item.score:.3f}  {item.label}{sentence}")
    lines.append(f"  {report.confidence.reason}")
    lines.append("")
    if report.baseline is None:
        lines.append("RE-RUNS: none — no removable suspect reached the final call.")
    else:
        stable = "stable" if report.baseline_stable else "UNSTABLE: every verdict is INCONCLUSIVE"
        lines.append(f"RE-RUNS (baseline, nothing removed: {report.baseline.fraction} flipped — "
                     f"{stable}):")
        width = max(len(item.label) for item in report.suspects) + 3
        for item in report.suspects:
            lines.append(_verdict_line(item, report.baseline, width))
    for note in report.notes:
        lines.append(f"⚠ {note}")
    lines.append("")
    lines.append("claims: the ranking is a similarity proxy; only a CAUSAL line is a cause, "
                 "shown by a strict majority of seeded re-runs flipping on a stable baseline.")
    return "\n".join(lines)


def _verdict_line(item: LocalizedSuspect, baseline: Probe, width: int) -> str:
    label = item.label.ljust(width)
    if item.verdict is None:
        reason = ("cannot be removed by a rebuild" if not item.suspect.removable
                  else "not re-run (beyond max_suspects)")
        return f"{'no verdict':<14}{label}{reason}".rstrip()
    if item.verdict == "CAUSAL":
        detail = f"flipped {item.fraction} seeded re-runs (baseline {baseline.fraction})"
    elif item.verdict == "NOT CONFIRMED":
        detail = f"{item.fraction}"
    elif baseline.flips > 0:
        detail = f"flipped {item.fraction} — baseline unstable ({baseline.fraction})"
    else:
        detail = f"flipped {item.fraction} — below a strict majority"
    head = {"CAUSAL": "CAUSAL", "NOT CONFIRMED": "not confirmed",
            "INCONCLUSIVE": "INCONCLUSIVE"}[item.verdict]
    return f"{head:<14}{label}{detail}"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def localize_context_bug(
    result: AgentRun,
    *,
    rebuild: Rebuild,
    is_wrong: IsWrong,
    message: str | None = None,
    reruns: int = 3,
    strategy: str | InfluenceStrategy = "lexical_overlap",
    max_suspects: int = 5,
    progress: Progress | None = None,
) -> ContextBugReport:
    """Explain ``result``'s wrong answer: slice, rank (proxy), then re-run to convict."""
    reruns = check_reruns(reruns)
    if isinstance(max_suspects, bool) or not isinstance(max_suspects, int) or max_suspects < 0:
        raise ConfigurationError(f"max_suspects={max_suspects!r} must be an int >= 0")
    chosen = get_strategy(strategy)
    answer = answer_of(result)
    text = message_of(result, message)
    suspects = suspects_of(result)
    ranked = rank_suspects(answer, suspects, chosen)
    confidence = ranking_confidence(ranked)

    plan: list[str] = []
    for item in ranked:
        sid = item.suspect.id
        if item.suspect.removable and sid not in plan and len(plan) < max_suspects:
            plan.append(sid)
    runner = Rerunner(rebuild=rebuild, is_wrong=is_wrong, message=text, reruns=reruns,
                      progress=progress, total=reruns * (1 + len(plan)) if plan else 0)
    await require_wrong(runner, answer)

    notes: list[str] = []
    baseline: Probe | None = None
    verdicts: dict[str, tuple[Probe, Verdict, str]] = {}
    if plan:
        baseline = await runner.probe(frozenset(), "baseline (nothing removed)")
        if baseline.flips > 0:
            notes.append(
                f"[baseline-unstable] the unchanged agent stopped giving the wrong answer in "
                f"{baseline.fraction} seeded re-runs — all removal verdicts are INCONCLUSIVE.")
        known = removable_by_id(suspects)
        for sid in plan:
            label = known[sid].label
            probe = await runner.probe(frozenset({sid}), f"without {label}")
            verdicts[sid] = (probe, *verdict_for(probe, baseline, label))
    else:
        notes.append("[nothing-removable] no suspect that reached the final call can be "
                     "removed by a rebuild; only the proxy ranking is shown.")
    skipped = sorted({r.suspect.id for r in ranked
                      if r.suspect.removable and r.suspect.id not in verdicts})
    if skipped:
        notes.append(f"[not-rerun] {len(skipped)} removable suspect(s) beyond "
                     f"max_suspects={max_suspects} were not re-run: {', '.join(skipped)} — "
                     "no verdict, not innocent.")

    items = []
    for rank, item in enumerate(ranked, start=1):
        found = verdicts.get(item.suspect.id) if item.suspect.removable else None
        if found is None:
            items.append(LocalizedSuspect(item.suspect, rank, item.score, item.sentence))
        else:
            probe, verdict, why = found
            items.append(LocalizedSuspect(item.suspect, rank, item.score, item.sentence,
                                          verdict, probe.flips, probe.runs, why, probe.answers))
    return ContextBugReport(answer=answer, message=text, strategy=chosen.name, suspects=items,
                            baseline=baseline, reruns=reruns, confidence=confidence,
                            runs_used=runner.done, notes=notes)
