"""What-ifs: re-run without several sources at once, or delta-debug down to the culprits.

``rerun_without_sources`` tests one removal (after a baseline) and judges it by the flip-rate
rule; ``bisect_culprits`` delta-debugs the suspects into minimal culprit sets with fixed-size
probes (``localize_context_bug`` does the same search adaptively, covering every suspect).
Both run their re-runs isolated, like every explanation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigurationError
from ..runs._recording import AgentRun
from ._display import explanation_html, explanation_repr
from ._fanout import RerunExecutor, check_fanout
from ._influence import InfluenceStrategy, RankedSuspect, rank_suspects
from ._rerun import (
    BudgetExceeded,
    IsWrong,
    Probe,
    Progress,
    Rebuild,
    Rerunner,
    Verdict,
    answer_of,
    check_reruns,
    keep_proof,
    message_of,
    removable_by_id,
    require_wrong,
    verdict_for,
)
from ._suspects import Suspect, suspects_of

__all__ = ["BisectionResult", "RerunResult", "bisect_culprits", "rerun_without_sources"]

BisectVerdict = Literal["CAUSAL", "INCONCLUSIVE", "NOT REPRODUCIBLE"]


def _label_of(ids: Iterable[str], labels: Mapping[str, str]) -> str:
    """Labels in ``labels`` order (the candidates' rank order), unknown ids last."""
    rank = {sid: i for i, sid in enumerate(labels)}
    ordered = sorted(ids, key=lambda sid: (rank.get(sid, len(rank)), sid))
    names = [labels.get(i, repr(i)) for i in ordered]
    return " + ".join(names) if names else "nothing"



# -- one what-if probe -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RerunResult:
    """Re-runs with several sources removed at once, judged by the same verdict rules."""

    removed: frozenset[str]
    labels: tuple[str, ...]
    probe: Probe
    baseline: Probe
    verdict: Verdict
    why: str

    @property
    def answers(self) -> tuple[str, ...]:
        return self.probe.answers

    @property
    def flips(self) -> int:
        return self.probe.flips

    @property
    def runs(self) -> int:
        return self.probe.runs

    @property
    def tier(self) -> Literal["causal", "proxy"]:
        return "causal" if self.verdict == "CAUSAL" else "proxy"

    def to_proof(self) -> dict[str, Any]:
        """The what-if as plain JSON, kept beside the run like a localization's proof."""
        return {"kind": "rerun", "version": 1, "removed": sorted(self.removed),
                "labels": list(self.labels), "verdict": self.verdict, "why": self.why,
                "runs": self.probe.runs, "flips": self.probe.flips,
                "baseline": {"runs": self.baseline.runs, "flips": self.baseline.flips},
                "answer_without": self.probe.answer_without if self.verdict == "CAUSAL"
                else None}

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    def __str__(self) -> str:
        head = f"{self.verdict:<14}without {', '.join(self.labels)}: flipped {self.probe.fraction}"
        return f"{head} seeded re-runs (baseline {self.baseline.fraction})\n{self.why}"


def resolve_sources(sources: Iterable[str | Suspect | RankedSuspect], suspects: list[Suspect],
             what: str) -> list[Suspect]:
    removable = removable_by_id(suspects)
    every = {s.id: s for s in suspects}
    out: list[Suspect] = []
    for source in sources:
        if isinstance(source, RankedSuspect):
            source = source.suspect
        sid = source.id if isinstance(source, Suspect) else source
        if not isinstance(sid, str):
            raise ConfigurationError(
                f"{what}: {source!r} is not a suspect id, Suspect or RankedSuspect")
        if sid not in removable:
            ids = ", ".join(removable) or "none"
            if sid in every:
                raise ConfigurationError(
                    f"{what}: {every[sid].label} cannot be removed by a rebuild (the base prompt "
                    f"and the user's message have no ablation); removable: {ids}")
            raise ConfigurationError(
                f"{what}: no removable suspect {sid!r} reached the final call; removable: {ids}")
        if all(s.id != sid for s in out):
            out.append(removable[sid])
    return out


async def rerun_without_sources(
    result: AgentRun,
    *,
    rebuild: Rebuild,
    is_wrong: IsWrong,
    sources: Iterable[str | Suspect | RankedSuspect],
    message: str | None = None,
    reruns: int = 3,
    progress: Progress | None = None,
    deps: object = None,
) -> RerunResult:
    """Re-run without all ``sources`` at once (after a baseline) and judge it like any probe
    (``deps``: the run's ``run(..., deps=...)``, given again; see ``localize_context_bug``)."""
    reruns = check_reruns(reruns)
    if isinstance(sources, str):
        sources = [sources]
    chosen = resolve_sources(sources, suspects_of(result), "rerun_without_sources")
    if not chosen:
        raise ConfigurationError("rerun_without_sources: sources= is empty; name what to remove")
    answer = answer_of(result)
    runner = Rerunner(rebuild=rebuild, is_wrong=is_wrong, message=message_of(result, message),
                      reruns=reruns, progress=progress, total=2 * reruns, result=result,
                      deps=deps)
    await require_wrong(runner, answer)
    removed = frozenset(s.id for s in chosen)
    labels = tuple(s.label for s in chosen)
    baseline = await runner.probe(frozenset(), "baseline (nothing removed)")
    probe = await runner.probe(removed, f"without {', '.join(labels)}")
    verdict, why = verdict_for(probe, baseline, " + ".join(labels))
    found = RerunResult(removed, labels, probe, baseline, verdict, why)
    keep_proof(result, found.to_proof())
    return found


# -- delta debugging -------------------------------------------------------------------------


@dataclass(slots=True)
class BisectionResult:
    """Minimal sets of sources whose removal flips the answer (ddmin over re-run probes)."""

    verdict: BisectVerdict
    culprits: list[frozenset[str]]
    """Each set, removed alone, flips the answer; a joint cause comes back as one set."""
    probes: list[Probe]
    """Every distinct probe run, in order (the baseline first)."""
    runs_used: int
    reason: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def tier(self) -> Literal["causal", "proxy"]:
        return "causal" if self.verdict == "CAUSAL" else "proxy"

    def to_proof(self) -> dict[str, Any]:
        """The bisection as plain JSON, kept beside the run like a localization's proof."""
        return {"kind": "bisect", "version": 1, "verdict": self.verdict, "reason": self.reason,
                "culprits": [sorted(c) for c in self.culprits], "reruns": self.runs_used,
                "probes": [{"removed": sorted(p.removed), "runs": p.runs, "flips": p.flips}
                           for p in self.probes]}

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    def __str__(self) -> str:
        lines = [f"BISECTION: {self.verdict} — {self.reason}"]
        for culprits in self.culprits:
            lines.append(f"  culprit set: {_label_of(culprits, self.labels)}")
        for probe in self.probes:
            mark = "flipped" if probe.flipped else "held"
            lines.append(f"  probe without [{_label_of(probe.removed, self.labels)}]: "
                         f"{probe.fraction} ({mark})")
        lines.append(f"  {len(self.probes)} probes, {self.runs_used} re-runs")
        return "\n".join(lines)


async def bisect_culprits(
    result: AgentRun,
    *,
    rebuild: Rebuild | None = None,
    is_wrong: IsWrong,
    suspects: Sequence[str | Suspect | RankedSuspect] | None = None,
    message: str | None = None,
    reruns: int = 3,
    max_probes: int = 24,
    max_culprits: int = 4,
    strategy: str | InfluenceStrategy = "lexical_overlap",
    progress: Progress | None = None,
    deps: object = None,
    executor: RerunExecutor | None = None,
    factory: str | Callable[[], Any] | None = None,
) -> BisectionResult:
    """Delta-debug the removable suspects down to minimal culprit sets.

    Order: a baseline probe (any flip → INCONCLUSIVE); a reproduction gate removing every
    candidate (no majority flip → NOT REPRODUCIBLE); then split the candidates (likelier half
    first, by the proxy ranking unless ``suspects`` gives the order) and recurse into the half
    whose removal flips, or into both halves when only removing parts of each flips (a joint
    cause). Repeats on the rest while removing the rest still flips, up to ``max_culprits``
    sets. Each probe is ``reruns`` seeded re-runs judged by strict majority; probes are cached
    and capped by ``max_probes`` (running out → INCONCLUSIVE, no partial claim).
    Without ``rebuild`` the run's agent is re-run as ``source.without(ids)``; ``executor`` and
    ``factory`` spread each probe's re-runs over workers (as for ``localize_context_bug``).
    """
    reruns = check_reruns(reruns)
    factory = check_fanout(executor, factory, rebuild=rebuild, deps=deps, is_wrong=is_wrong,
                           result=result)
    if isinstance(max_probes, bool) or not isinstance(max_probes, int) or max_probes < 2:
        raise ConfigurationError(
            f"max_probes={max_probes!r} must be an int >= 2 (a baseline and a reproduction probe)")
    if isinstance(max_culprits, bool) or not isinstance(max_culprits, int) or max_culprits < 1:
        raise ConfigurationError(f"max_culprits={max_culprits!r} must be an int >= 1")
    answer = answer_of(result)
    every = suspects_of(result)
    if suspects is None:
        ranked = rank_suspects(answer, every, strategy)
        order = [r.suspect for r in ranked if r.suspect.removable]
        candidates = resolve_sources(order, every, "bisect_culprits")
    else:
        candidates = resolve_sources(list(suspects), every, "bisect_culprits")
    if not candidates:
        raise ConfigurationError(
            "bisect_culprits: no removable suspect reached the final call; nothing to bisect")
    ids = [s.id for s in candidates]
    labels = {s.id: s.label for s in candidates}
    runner = Rerunner(rebuild=rebuild, is_wrong=is_wrong, message=message_of(result, message),
                      reruns=reruns, progress=progress, total=max_probes * reruns,
                      max_probes=max_probes, result=result, deps=deps, executor=executor,
                      factory=factory)
    await require_wrong(runner, answer)

    async def flips(removed: Iterable[str]) -> bool:
        key = frozenset(removed)
        return (await runner.probe(key, f"without {_label_of(key, labels)}")).flipped

    async def minimize(cands: list[str], context: frozenset[str]) -> list[str]:
        if len(cands) <= 1:
            return cands
        half = math.ceil(len(cands) / 2)
        top, rest = cands[:half], cands[half:]
        if await flips(context | set(top)):
            return await minimize(top, context)
        if await flips(context | set(rest)):
            return await minimize(rest, context)
        from_top = await minimize(top, context | set(rest))
        from_rest = await minimize(rest, context | set(from_top))
        return from_top + from_rest

    def done(verdict: BisectVerdict, culprits: list[frozenset[str]], reason: str
             ) -> BisectionResult:
        found = BisectionResult(verdict, culprits, list(runner.order), runner.done, reason,
                                labels)
        keep_proof(result, found.to_proof())
        return found

    try:
        baseline = await runner.probe(frozenset(), "baseline (nothing removed)")
        if baseline.flips > 0:
            return done("INCONCLUSIVE", [], (
                f"the unchanged agent itself stopped giving the wrong answer in "
                f"{baseline.fraction} seeded re-runs (baseline unstable); no culprit can be "
                "convicted"))
        if not await flips(ids):
            return done("NOT REPRODUCIBLE", [], (
                f"removing all {len(ids)} candidate(s) at once did not flip a strict majority "
                f"of re-runs ({runner.cache[frozenset(ids)].fraction}); the wrong answer does "
                "not come from these sources as far as these re-runs can see"))
        culprits: list[frozenset[str]] = []
        remaining = list(ids)
        while remaining and len(culprits) < max_culprits:
            if culprits and not await flips(remaining):
                break
            found = frozenset(await minimize(remaining, frozenset()))
            if not await flips(found):
                return done("INCONCLUSIVE", [], (
                    f"the minimised set {_label_of(found, labels)} did not flip on its own "
                    "(the sources interact non-monotonically); no culprit set is claimed"))
            culprits.append(found)
            remaining = [i for i in remaining if i not in found]
    except BudgetExceeded as exc:
        return done("INCONCLUSIVE", [], (
            f"{exc}, before the search finished; no partial claim is made" if str(exc) else
            f"the probe budget max_probes={max_probes} ran out before the search finished; "
            "no partial claim is made"))
    names = "; ".join(_label_of(c, labels) for c in culprits)
    return done("CAUSAL", culprits, (
        f"{len(culprits)} culprit set(s), each flipping a strict majority of seeded re-runs "
        f"when removed, on a baseline of {baseline.fraction}: {names}"))
