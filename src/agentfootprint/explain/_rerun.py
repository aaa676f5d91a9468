"""Re-runs without context sources, judged by one verdict rule: probes, what-ifs, bisection.

This module owns the counterfactual machinery behind ``localize_context_bug``: a ``Probe`` is
``reruns`` seeded re-runs of the agent rebuilt without some sources; ``verdict_for`` judges one
against the baseline; ``rerun_without_sources`` tests several sources removed at once; and
``bisect_culprits`` delta-debugs the suspects down to minimal culprit sets.

``Rerunner`` and the small helpers outside ``__all__`` are shared with the explain modules
that probe the same way (localize, dropped, chat); they are not re-exported to users.

The verdict rules are the same in every function of this module:

* at least 2 re-runs (``reruns < 2`` is refused);
* **CAUSAL** only with a STRICT majority of flips *and* ZERO baseline flips;
* a baseline that flipped even once makes every verdict **INCONCLUSIVE** (the scenario is not
  stable, so a flip says nothing about the removed source);
* some flips but no strict majority → **INCONCLUSIVE**; no flips → **NOT CONFIRMED** (the
  suspect's score stays a proxy; it is not declared innocent).

``rebuild(without)`` builds the agent as it was, minus the injections / tools whose ids are in
``without``. It may be sync or async and may return an ``Agent`` (we ``await
agent.run(message)``), a ``RunResult`` or the answer text. It is called once per re-run, so
every re-run gets a fresh agent; when it accepts a ``seed`` keyword it receives the re-run's
index ``0 .. reruns-1`` (seed your provider with it). A fresh agent starts a fresh
conversation: for a follow-up turn, have ``rebuild`` return the ``RunResult`` of the right
``run(..., continue_from=...)``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigurationError
from ..flow import FlowRun
from ..runs import trace
from ..runs._recording import AgentRun
from ._influence import InfluenceStrategy, RankedSuspect, rank_suspects
from ._suspects import Suspect, is_stage, log_of, suspects_of

__all__ = [
    "BisectionResult",
    "Probe",
    "RerunResult",
    "Verdict",
    "bisect_culprits",
    "rerun_without_sources",
    "verdict_for",
]

Verdict = Literal["CAUSAL", "INCONCLUSIVE", "NOT CONFIRMED"]
BisectVerdict = Literal["CAUSAL", "INCONCLUSIVE", "NOT REPRODUCIBLE"]
Rebuild = Callable[..., Any]
"""``rebuild(without: frozenset[str][, seed=i])`` → Agent | RunResult | str (or awaitable)."""
IsWrong = Callable[[str], Any]
"""``is_wrong(answer) -> bool`` (may be async); a re-run flips when it returns false."""
Progress = Callable[[int, int, str], Any]
"""``progress(done, total, label)`` after every re-run (may be async)."""


# -- probes and verdicts -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    """``runs`` seeded re-runs of the agent rebuilt without ``removed`` (empty = baseline)."""

    removed: frozenset[str]
    flips: int
    """Re-runs whose answer was no longer wrong."""
    runs: int
    answers: tuple[str, ...]

    @property
    def flipped(self) -> bool:
        """A strict majority of the re-runs flipped."""
        return self.flips * 2 > self.runs

    @property
    def fraction(self) -> str:
        return f"{self.flips}/{self.runs}"


def verdict_for(probe: Probe, baseline: Probe, label: str) -> tuple[Verdict, str]:
    """The verdict of one removal probe against its baseline, and the sentence that says why."""
    if probe.runs < 2 or baseline.runs < 2:
        raise ConfigurationError("a verdict needs at least 2 re-runs per probe")
    if baseline.flips > 0:
        return "INCONCLUSIVE", (
            f"INCONCLUSIVE: the unchanged agent itself stopped giving the wrong answer in "
            f"{baseline.fraction} seeded re-runs (baseline unstable), so no removal verdict for "
            f"{label} is trustworthy; removing it flipped {probe.fraction}.")
    if probe.flipped:
        return "CAUSAL", (
            f"CAUSAL: removing {label} flipped the outcome in {probe.fraction} seeded re-runs "
            f"(baseline {baseline.fraction}).")
    if probe.flips > 0:
        return "INCONCLUSIVE", (
            f"INCONCLUSIVE: removing {label} flipped only {probe.fraction} seeded re-runs — "
            "below a strict majority.")
    return "NOT CONFIRMED", (
        f"NOT CONFIRMED: removing {label} did not change the outcome in {probe.runs} seeded "
        "re-runs — its score remains a correlational proxy only.")


def check_reruns(reruns: object) -> int:
    if isinstance(reruns, bool) or not isinstance(reruns, int) or reruns < 2:
        raise ConfigurationError(
            f"reruns={reruns!r}: a verdict needs at least 2 seeded re-runs per probe (3 is the "
            "default); one run cannot tell a cause from noise")
    return reruns


def accepts_seed(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or (
        p.name == "seed" and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        inspect.Parameter.KEYWORD_ONLY))
        for p in parameters)


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _BudgetExceeded(Exception):
    pass


class Rerunner:
    """Runs probes: ``reruns`` fresh, seeded re-runs each, cached by the removed set."""

    def __init__(self, *, rebuild: Rebuild, is_wrong: IsWrong, message: str, reruns: int,
                 progress: Progress | None, total: int, max_probes: int | None = None) -> None:
        if not callable(rebuild):
            raise ConfigurationError(
                f"rebuild={rebuild!r} must be a function (without: frozenset[str]) -> Agent")
        if not callable(is_wrong):
            raise ConfigurationError(
                f"is_wrong={is_wrong!r} must be a function (answer: str) -> bool")
        if progress is not None and not callable(progress):
            raise ConfigurationError(
                f"progress={progress!r} must be a function (done, total, label)")
        self.rebuild = rebuild
        self.is_wrong = is_wrong
        self.message = message
        self.reruns = reruns
        self.progress = progress
        self.total = total
        self.max_probes = max_probes
        self.seeded = accepts_seed(rebuild)
        self.done = 0
        self.cache: dict[frozenset[str], Probe] = {}
        self.order: list[Probe] = []

    async def wrong(self, answer: str) -> bool:
        return bool(await _settle(self.is_wrong(answer)))

    async def probe(self, removed: frozenset[str], label: str) -> Probe:
        cached = self.cache.get(removed)
        if cached is not None:
            return cached
        if self.max_probes is not None and len(self.cache) >= self.max_probes:
            raise _BudgetExceeded
        answers: list[str] = []
        flips = 0
        for seed in range(self.reruns):
            answer = await self._once(removed, seed)
            answers.append(answer)
            flips += not await self.wrong(answer)
            self.done += 1
            if self.progress is not None:
                await _settle(self.progress(self.done, max(self.total, self.done), label))
        probe = Probe(removed, flips, self.reruns, tuple(answers))
        self.cache[removed] = probe
        self.order.append(probe)
        return probe

    async def _once(self, removed: frozenset[str], seed: int) -> str:
        made = self.rebuild(removed, seed=seed) if self.seeded else self.rebuild(removed)
        made = await _settle(made)
        if isinstance(made, str):
            return made
        run = getattr(made, "run", None)
        if callable(run):
            made = await _settle(run(self.message))
            if isinstance(made, str):
                return made
        content = getattr(made, "content", None)
        if isinstance(content, str):
            _check_left_out(made, removed)
            return content
        raise ConfigurationError(
            f"rebuild() returned {made!r}; it must return an Agent (we await "
            ".run(message)), a RunResult, or the answer text")


def _check_left_out(result: Any, removed: frozenset[str]) -> None:
    """Refuse a re-run whose model still read a context source it was meant to go without.

    A ``rebuild`` that ignores ``without`` would report every suspect NOT CONFIRMED, the
    culprit included: a false all-clear. Injections (and memory entries) are checked in the
    prompt of the call that answered; a bare answer text carries no recording to check.
    """
    if not removed or not isinstance(getattr(result, "recording", None), FlowRun):
        return
    log = log_of(result)
    if not any(is_stage(record, trace.CALL_LLM) for record in log.records):
        return
    kept = sorted(removed & {s.id for s in suspects_of(result)
                             if s.kind in ("injection", "message")})
    if kept:
        raise ConfigurationError(
            f"rebuild(without={sorted(removed)}) still gave the model {kept}; build the agent "
            "without the sources named in `without` (leave them out of context= / memory)")


def message_of(result: AgentRun, message: str | None) -> str:
    if message is not None:
        if not isinstance(message, str):
            raise ConfigurationError(f"message={message!r} must be a str")
        return message
    state = getattr(getattr(result, "recording", None), "state", None)
    found = state.get(trace.USER_MESSAGE) if isinstance(state, dict) else None
    if not isinstance(found, str):
        raise ConfigurationError(
            "cannot read the original user message from result.recording.state; pass message=")
    return found


def answer_of(result: object) -> str:
    content = getattr(result, "content", None)
    if not isinstance(content, str):
        raise ConfigurationError(
            f"{result!r} has no .content answer; pass the RunResult of the run to explain")
    return content


async def require_wrong(runner: Rerunner, answer: str) -> None:
    if not await runner.wrong(answer):
        raise ConfigurationError(
            f"is_wrong(result.content) is false for {answer!r}: there is no wrong answer to "
            "explain (check is_wrong, or pass the run whose answer was wrong)")


def removable_by_id(suspects: Iterable[Suspect]) -> dict[str, Suspect]:
    out: dict[str, Suspect] = {}
    for suspect in suspects:
        if suspect.removable:
            out.setdefault(suspect.id, suspect)
    return out


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
) -> RerunResult:
    """Re-run without all ``sources`` at once (after a baseline) and judge it like any probe."""
    reruns = check_reruns(reruns)
    if isinstance(sources, str):
        sources = [sources]
    chosen = resolve_sources(sources, suspects_of(result), "rerun_without_sources")
    if not chosen:
        raise ConfigurationError("rerun_without_sources: sources= is empty; name what to remove")
    answer = answer_of(result)
    runner = Rerunner(rebuild=rebuild, is_wrong=is_wrong, message=message_of(result, message),
                      reruns=reruns, progress=progress, total=2 * reruns)
    await require_wrong(runner, answer)
    removed = frozenset(s.id for s in chosen)
    labels = tuple(s.label for s in chosen)
    baseline = await runner.probe(frozenset(), "baseline (nothing removed)")
    probe = await runner.probe(removed, f"without {', '.join(labels)}")
    verdict, why = verdict_for(probe, baseline, " + ".join(labels))
    return RerunResult(removed, labels, probe, baseline, verdict, why)


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
    rebuild: Rebuild,
    is_wrong: IsWrong,
    suspects: Sequence[str | Suspect | RankedSuspect] | None = None,
    message: str | None = None,
    reruns: int = 3,
    max_probes: int = 24,
    max_culprits: int = 4,
    strategy: str | InfluenceStrategy = "lexical_overlap",
    progress: Progress | None = None,
) -> BisectionResult:
    """Delta-debug the removable suspects down to minimal culprit sets.

    Order: a baseline probe (any flip → INCONCLUSIVE); a reproduction gate removing every
    candidate (no majority flip → NOT REPRODUCIBLE); then split the candidates (likelier half
    first, by the proxy ranking unless ``suspects`` gives the order) and recurse into the half
    whose removal flips, or into both halves when only removing parts of each flips (a joint
    cause). Repeats on the rest while removing the rest still flips, up to ``max_culprits``
    sets. Each probe is ``reruns`` seeded re-runs judged by strict majority; probes are cached
    and capped by ``max_probes`` (running out → INCONCLUSIVE, no partial claim).
    """
    reruns = check_reruns(reruns)
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
                      max_probes=max_probes)
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
        return BisectionResult(verdict, culprits, list(runner.order), runner.done, reason,
                               labels)

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
    except _BudgetExceeded:
        return done("INCONCLUSIVE", [], (
            f"the probe budget max_probes={max_probes} ran out before the search finished; "
            "no partial claim is made"))
    names = "; ".join(_label_of(c, labels) for c in culprits)
    return done("CAUSAL", culprits, (
        f"{len(culprits)} culprit set(s), each flipping a strict majority of seeded re-runs "
        f"when removed, on a baseline of {baseline.fraction}: {names}"))
