"""Localize a context bug: slice → rank (a proxy) → isolated re-runs (the only CAUSAL).

``localize_context_bug(result, is_wrong=...)`` explains a wrong answer in three honest steps:

1. **Slice** — ``suspects_of(result)``: every context source that provably reached the final
   LLM call, with the exact text the model saw (a structural fact, read from the log).
2. **Rank** — an influence strategy scores how much each text aligns with the answer
   (``influence.py``). A correlational proxy: it orders the search, it convicts nobody.
3. **Prove** — isolated re-runs (``isolation.py``) without sources, judged against one shared
   baseline by the flip-rate rule of ``verdict.py`` and searched by group testing
   (``search.py``): every suspect is covered, causes that need several sources are found, and the
   false-positive rate ``alpha`` is stated in the report.

The report is kept: ``report.to_proof()`` is what the run store saves beside the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigurationError
from ..flow._display import clip_line
from ..runs._recording import AgentRun
from ._criterion import describe_criterion
from ._display import explanation_html, explanation_repr
from ._fanout import RerunExecutor, check_fanout
from ._influence import (
    InfluenceStrategy,
    RankingConfidence,
    get_strategy,
    rank_suspects,
    ranking_confidence,
)
from ._rerun import (
    BudgetExceeded,
    IsWrong,
    Probe,
    Progress,
    Rebuild,
    Rerunner,
    Verdict,
    answer_of,
    check_alpha,
    keep_proof,
    message_of,
    removable_by_id,
)
from ._search import MONOTONICITY, Cause, SearchResult, find_causes
from ._suspects import Suspect, suspects_of
from ._verdict import DEFAULT_ALPHA

__all__ = ["ContextBugReport", "LocalizedSuspect", "localize_context_bug"]

PROXY_HEADER = "scores are a correlational proxy; only re-runs say CAUSAL"
DEFAULT_BUDGET = 160
"""Agent re-runs one explanation may spend by default (a deterministic model needs a
handful; a sampling one about eight per probe, sixteen for the baseline)."""


@dataclass(frozen=True, slots=True)
class LocalizedSuspect:
    """One suspect: its proxy score (tier "proxy") and, when covered by re-runs, its verdict."""

    suspect: Suspect
    rank: int
    """1-based position in the proxy ranking."""
    score: float
    sentence: str
    """The suspect's sentence that aligns best with the answer."""
    verdict: Verdict | None = None
    """``None``: no re-run reached it (cannot be removed, or the budget ran out)."""
    flips: int | None = None
    runs: int | None = None
    why: str = ""
    answers: tuple[str, ...] = ()
    """The re-runs' answers, flipped ones first: ``answers[0]`` is what the agent said without
    it when the verdict is CAUSAL."""
    p_value: float | None = None
    cause: Literal["single", "either"] | None = None
    """For a CAUSAL suspect: alone, or one of a set any member of which suffices."""
    removed_with: tuple[str, ...] = ()
    """The set its verdict's re-runs removed (itself alone, its cause's set, or a held group)."""

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

    @property
    def answer_without(self) -> str | None:
        """What the agent answered without this source (CAUSAL verdicts)."""
        return self.answers[0] if self.verdict == "CAUSAL" and self.answers else None


@dataclass(slots=True)
class ContextBugReport:
    """What ``localize_context_bug`` found: the proven causes, the proxy ranking, the costs."""

    answer: str
    message: str
    strategy: str
    suspects: list[LocalizedSuspect]
    """Every suspect, in proxy-rank order."""
    baseline: Probe | None
    """``None`` when there was nothing removable to test (no model calls were spent)."""
    confidence: RankingConfidence
    runs_used: int = 0
    """Agent re-runs spent (the baseline included)."""
    notes: list[str] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)
    alpha: float = DEFAULT_ALPHA
    deterministic: bool = False
    uncovered: list[str] = field(default_factory=list)
    model_calls: int = 0
    budget: int | None = None
    criterion: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def baseline_stable(self) -> bool:
        return self.baseline is not None and self.baseline.runs > 0 and (
            self.baseline.flips * 2 <= self.baseline.runs)

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
        """The verdict of the suspect with this id (``None``: no re-run reached it)."""
        return self.find(id).verdict

    def runs_for(self, id: str) -> int:
        """Re-runs behind this suspect's verdict (0: none reached it)."""
        return self.find(id).runs or 0

    def to_proof(self) -> dict[str, Any]:
        """The report as plain JSON, kept beside the run in the run store."""
        base = self.baseline
        return {
            "kind": "localize", "version": 1, "answer": self.answer, "message": self.message,
            "criterion": self.criterion, "alpha": self.alpha,
            "model": "deterministic" if self.deterministic else "sampling",
            "baseline": None if base is None else {
                "runs": base.runs, "flips": base.flips, "answers": list(base.answers[:3])},
            "causes": [{
                "kind": c.kind, "members": list(c.members),
                "labels": [self.labels.get(m, m) for m in c.members], "verdict": c.verdict,
                "runs": c.probe.runs, "flips": c.probe.flips, "p_value": c.probe.p_value,
                "why": c.why, "answer_without": c.probe.answer_without if c.verdict == "CAUSAL"
                else None} for c in self.causes],
            "suspects": [{
                "id": s.suspect.id, "label": s.label, "rank": s.rank, "score": s.score,
                "verdict": s.verdict, "runs": s.runs, "flips": s.flips, "p_value": s.p_value,
                "why": s.why, "answer_without": s.answer_without,
                "removed_with": list(s.removed_with)} for s in self.suspects],
            "uncovered": list(self.uncovered), "reruns": self.runs_used,
            "model_calls": self.model_calls, "budget": self.budget, "notes": list(self.notes)}

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    def __str__(self) -> str:
        return format_report(self)


def format_report(report: ContextBugReport) -> str:
    """The human report: the proven causes first, then the ranking, the verdicts, the notes."""
    lines = [f"CONTEXT BUG LOCALIZATION — answer: {clip_line(report.answer, 80)!r}"]
    model = ("deterministic model: one re-run per probe" if report.deterministic
             else f"sampling model: CAUSAL at α = {report.alpha:g}")
    lines.append(f"{PROXY_HEADER} ({model}; {report.runs_used} re-runs, "
                 f"{report.model_calls} model calls)")
    lines.append("")
    proven = [c for c in report.causes if c.verdict == "CAUSAL"]
    if proven:
        for cause in proven:
            names = [report.labels.get(m, m) for m in cause.members]
            if cause.kind == "either":
                lines.append(f"PROVEN: either of {{{', '.join(names)}}} suffices — removing the "
                             "set changes the answer, removing any one alone does not.")
            else:
                lines.append(f"PROVEN: {names[0]} caused the answer.")
            lines.append(f"  {cause.why}")
            without = cause.probe.answer_without
            if without is not None:
                lines.append(f"  without it the agent answered: {clip_line(without, 100)!r}")
    elif report.baseline is not None and report.uncovered:
        waiting = ", ".join(report.labels.get(u, u) for u in report.uncovered)
        lines.append(f"NOT PROVEN YET: the budget ran out before {len(report.uncovered)} "
                     f"suspect(s) were re-run ({waiting}); they are not innocent.")
    elif report.baseline is not None:
        lines.append("NOTHING PROVEN: no removal of the suspects changed the answer as judged.")
    lines.append("")
    lines.append("RANKING (correlational proxy — aligned with the answer, not a cause):")
    for item in report.suspects:
        sentence = f"  “{clip_line(item.sentence, 70)}”" if item.sentence else ""
        lines.append(f"  {item.rank:2d}. {item.score:.3f}  {item.label}{sentence}")
    lines.append(f"  {_ranking_note(report, proven)}")
    lines.append("")
    if report.baseline is None:
        lines.append("RE-RUNS: none — no removable suspect reached the final call.")
    else:
        lines.append(f"RE-RUNS (baseline, nothing removed: {report.baseline.fraction} flipped):")
        width = max(len(item.label) for item in report.suspects) + 3
        for item in report.suspects:
            lines.append(_verdict_line(item, width))
    for note in report.notes:
        lines.append(f"⚠ {note}")
    lines.append("")
    lines.append(f"claims: the ranking is a similarity proxy; only a CAUSAL line is a cause. "
                 f"{MONOTONICITY[0].upper()}{MONOTONICITY[1:]}.")
    return "\n".join(lines)


def _ranking_note(report: ContextBugReport, proven: list[Cause]) -> str:
    """The ranking's confidence — unless a proof names another cause than its leader."""
    members = {m for cause in proven for m in cause.members}
    leader = report.suspects[0] if report.suspects else None
    if not proven or leader is None or leader.suspect.id in members:
        return report.confidence.reason
    names = ", ".join(report.labels.get(m, m) for m in dict.fromkeys(
        m for cause in proven for m in cause.members))
    return (f"The proxy's leader, {leader.label}, is not the cause: the re-runs proved "
            f"{names}.")


def _verdict_line(item: LocalizedSuspect, width: int) -> str:
    label = item.label.ljust(width)
    if item.verdict is None:
        reason = ("cannot be removed by a rebuild" if not item.suspect.removable
                  else "no verdict (budget ran out before it was covered)")
        return f"{'no verdict':<14}{label}{reason}".rstrip()
    head = {"CAUSAL": "CAUSAL", "NOT CONFIRMED": "not confirmed",
            "INCONCLUSIVE": "INCONCLUSIVE"}[item.verdict]
    detail = item.why.split(": ", 1)[-1] if item.why else str(item.fraction)
    return f"{head:<14}{label}{detail}"


async def localize_context_bug(
    result: AgentRun,
    *,
    is_wrong: IsWrong,
    rebuild: Rebuild | None = None,
    message: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    budget: int | None = DEFAULT_BUDGET,
    strategy: str | InfluenceStrategy = "lexical_overlap",
    progress: Progress | None = None,
    deps: object = None,
    executor: RerunExecutor | None = None,
    factory: str | Callable[[], Any] | None = None,
) -> ContextBugReport:
    """Explain ``result``'s wrong answer: slice, rank (a proxy), then prove by isolated re-runs.

    Without ``rebuild`` the agent (or composition) that produced ``result`` is re-run as
    ``source.without(ids)``; ``rebuild(without[, seed=i])`` may build it instead. Every re-run
    is isolated (see ``isolation.py``). ``is_wrong(answer)`` — or ``is_wrong(result)`` for a
    criterion with ``judges_result`` — says whether an answer is still the wrong one. ``alpha``
    is the false-positive rate of a CAUSAL verdict on a sampling model; ``budget`` caps the
    agent re-runs (``None``: no cap). ``deps`` are what the run was given as
    ``run(..., deps=...)``: a recording never keeps them, so a tool that reads them and runs
    live in a re-run needs them again (without, that re-run is INCONCLUSIVE, naming the tool).
    ``executor`` (``agentfootprint.distributed``) spreads the re-runs over its workers, each
    rebuilding the agent from ``factory`` (``"module:attr"``; default: the one recorded with a
    stored run); the verdicts are the in-process ones (``explain/_fanout.py``).
    """
    alpha = check_alpha(alpha)
    factory = check_fanout(executor, factory, rebuild=rebuild, deps=deps, is_wrong=is_wrong,
                           result=result)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < 2):
        raise ConfigurationError(
            f"budget={budget!r} must be an int >= 2 re-runs (a baseline and one probe), or None")
    chosen = get_strategy(strategy)
    answer = answer_of(result)
    text = message_of(result, message)
    suspects = suspects_of(result)
    ranked = rank_suspects(answer, suspects, chosen)
    confidence = ranking_confidence(ranked)
    known = removable_by_id(suspects)
    order = list(dict.fromkeys(r.suspect.id for r in ranked if r.suspect.removable))
    runner = Rerunner(rebuild=rebuild, is_wrong=is_wrong, message=text, reruns=1,
                      progress=progress, total=2 * len(order) + 2, result=result, alpha=alpha,
                      budget=budget, deps=deps, executor=executor, factory=factory)
    if not await runner.wrong(answer, result):
        raise ConfigurationError(
            f"is_wrong is false for the recorded answer {answer!r}: there is no wrong answer to "
            "explain (check is_wrong, or pass the run whose answer was wrong)")
    notes: list[str] = []
    baseline: Probe | None = None
    search = SearchResult()
    if order:
        try:
            baseline = await runner.baseline()
        except BudgetExceeded as exc:
            notes.append(f"[budget] {exc}, during the baseline." if str(exc) else
                         f"[budget] budget={budget} ran out during the baseline.")
        if baseline is not None and baseline.runs == 0:
            notes.append("[baseline-incomplete] no re-run of the unchanged agent could complete "
                         "in isolation — " + "; ".join(baseline.reasons))
        elif baseline is not None and baseline.flips * 2 > baseline.runs:
            notes.append(f"[baseline-unstable] the unchanged agent stopped giving the wrong "
                         f"answer in {baseline.fraction} re-runs; the answer is not reproducible, "
                         "so nothing can be proven.")
        elif baseline is not None:
            search = await find_causes(runner, order, {i: known[i].label for i in order})
    else:
        notes.append("[nothing-removable] no suspect that reached the final call can be "
                     "removed by a rebuild; only the proxy ranking is shown.")
    notes = runner.notes + notes + search.notes
    if search.uncovered and baseline is not None:
        notes.append(f"[not-covered] {len(search.uncovered)} suspect(s) got no verdict (the "
                     f"budget ran out, or re-runs gave no clear answer): "
                     f"{', '.join(search.uncovered)} — not innocent.")
    single_causal = [c for c in search.causes if c.kind == "single" and c.verdict == "CAUSAL"]
    if len(single_causal) > 1:
        names = ", ".join(known[c.members[0]].label for c in single_causal)
        notes.append(f"[together] removing any one of {names} changes the answer: the wrong "
                     "answer needed all of them — they act only together.")

    by_member = {m: c for c in search.causes for m in c.members}
    items = []
    for rank, item in enumerate(ranked, start=1):
        sid = item.suspect.id
        cause = by_member.get(sid) if item.suspect.removable else None
        covered = search.covered.get(sid) if item.suspect.removable else None
        if cause is not None:
            probe = cause.probe
            items.append(LocalizedSuspect(item.suspect, rank, item.score, item.sentence,
                                          cause.verdict, probe.flips, probe.runs, cause.why,
                                          probe.answers, probe.p_value, cause.kind,
                                          cause.members))
        elif covered is not None and runner.cache.get(covered) is not None:
            probe = runner.cache[covered]
            others = len(covered) - 1
            why = (f"NOT CONFIRMED: removed {'alone' if not others else f'with {others} other(s)'}"
                   f", the answer held ({probe.fraction} flipped; baseline "
                   f"{baseline.fraction if baseline else '?'}).")
            items.append(LocalizedSuspect(item.suspect, rank, item.score, item.sentence,
                                          "NOT CONFIRMED", probe.flips, probe.runs, why,
                                          probe.answers, probe.p_value, None, tuple(covered)))
        else:
            items.append(LocalizedSuspect(item.suspect, rank, item.score, item.sentence))
    report = ContextBugReport(
        answer=answer, message=text, strategy=chosen.name, suspects=items, baseline=baseline,
        confidence=confidence, runs_used=runner.done, notes=notes, causes=search.causes,
        alpha=alpha, deterministic=bool(runner.deterministic), uncovered=search.uncovered,
        model_calls=runner.model_calls, budget=budget,
        criterion=describe_criterion(is_wrong), labels={i: known[i].label for i in order})
    keep_proof(result, report.to_proof())
    return report
