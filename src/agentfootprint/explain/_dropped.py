"""Missing context: what was available to the run but never reached the model — and did it matter?

Ablation cannot convict a culprit that is *absent*: there is nothing to remove. What the run had
at hand is in its record, though, and ``find_dropped_context`` lists it for the call that
produced the answer:

* ``injection:<id>`` — a declared injection whose trigger did not fire (the evaluator's reason);
* ``window:<index>`` — a history message the window strategy left out of the request;
* ``memory:<id>#<entry>`` — a store entry the memory found but did not admit (below the
  threshold, over ``k``), with its score.

Each candidate is then confirmed, or not, by *restoration*: ``restore(ids)`` rebuilds the agent
with those candidates put back (for a window message, ``restoring(strategy, [index])``; for an
injection, a trigger that always fires; for a memory entry, a lower threshold), re-runs it
several seeded times, and the verdict rule is the one ablation uses (``rerun.verdict_for``):
against a baseline — the same rebuild with nothing restored — on a deterministic model every
re-run must stop being wrong while the baseline never does; on a sampling model Fisher's
one-sided test at α = 0.01 must find the restored runs right more often than the baseline's.
That needs ``reruns`` ≥ 5 on a sampling model (5 of 5 against 0 of 5 is p = 0.004; 3 of 3
against 0 of 3 is p = 0.05 and can never be CAUSAL), hence the default. Otherwise INCONCLUSIVE
or NOT CONFIRMED.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigurationError
from ..flow._commitlog import CommitLog
from ..flow._display import clip_line
from ..runs import trace
from ..runs._recording import AgentRun
from ..runs._view import CallView, Explainable, RunView
from ._display import explanation_html, explanation_repr
from ._rerun import (
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
    verdict_for,
)

__all__ = ["DroppedCandidate", "DroppedContextReport", "dropped_candidates", "find_dropped_context"]

DroppedKind = Literal["injection", "window", "memory"]


@dataclass(slots=True)
class DroppedCandidate:
    """Something the run had that the answering call never saw."""

    id: str
    kind: DroppedKind
    detail: str
    """Why it was left out, in the record's words."""
    text: str = ""
    """Its content, when the record holds it (clipped)."""
    score: float | None = None
    verdict: Verdict | None = None
    """Set by restoration re-runs; ``None`` means it was only listed (no proof attempted)."""
    fraction: str | None = None
    reason: str | None = None

    @property
    def tier(self) -> Literal["causal", "listed"]:
        return "causal" if self.verdict is not None else "listed"


@dataclass(slots=True)
class DroppedContextReport:
    """Every dropped candidate, with restoration verdicts when they were run."""

    answer: str
    candidates: list[DroppedCandidate]
    baseline: Probe | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def confirmed(self) -> list[DroppedCandidate]:
        """Candidates whose restoration fixed the answer (CAUSAL)."""
        return [c for c in self.candidates if c.verdict == "CAUSAL"]

    def find(self, id: str) -> DroppedCandidate:
        for candidate in self.candidates:
            if candidate.id == id:
                return candidate
        known = ", ".join(c.id for c in self.candidates) or "none"
        raise KeyError(f"no dropped candidate {id!r}; candidates: {known}")

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    def __str__(self) -> str:
        if not self.candidates:
            return "Nothing available to the run was left out of the answering call."
        lines = [f"Left out of the call that answered {self.answer[:80]!r}:"]
        for c in self.candidates:
            stamp = f"{c.verdict} {c.fraction}" if c.verdict else "listed (not re-run)"
            lines.append(f"  {c.id:<28} {stamp:<22} {c.detail}")
        if self.baseline is not None:
            lines.append(f"  baseline (nothing restored): {self.baseline.fraction} no longer "
                         "wrong")
        lines.extend(self.notes)
        return "\n".join(lines)


def dropped_candidates(source: Explainable) -> list[DroppedCandidate]:
    """The candidates of the answering call, read from the log alone (no re-runs)."""
    view = RunView.of(source)
    call = view.call()
    out: list[DroppedCandidate] = []
    out.extend(_unfired(call))
    out.extend(_evicted(call))
    out.extend(_near_misses(view.log, call))
    return out


def _unfired(call: CallView) -> list[DroppedCandidate]:
    return [DroppedCandidate(id=f"injection:{row['id']}", kind="injection",
                             detail=f"{row['trigger']} did not fire — {row['reason']}")
            for row in call.evaluation
            if not row["fired"] and row.get("flavor") not in ("memory", "rag")]


def _evicted(call: CallView) -> list[DroppedCandidate]:
    window = call.window
    if window is None:
        return []
    kept = set(window["kept"])
    out = []
    for index, message in enumerate(call.history):
        if index in kept:
            continue
        how = "summarized" if index in (window.get("summarized") or ()) else "outside-window"
        out.append(DroppedCandidate(
            id=f"window:{index}", kind="window", text=clip_line(str(message["content"]), 160),
            detail=f"{message['role']} message {index} left out by {window['strategy']} "
                   f"({how})"))
    return out


def _near_misses(log: CommitLog, call: CallView) -> list[DroppedCandidate]:
    out = []
    state = log.state_at(call.record.idx - 1, ns=call.record.ns)
    for key, evidence in state.items():
        if not trace.MEMORY_RETRIEVED.matches(key) or not isinstance(evidence, dict):
            continue
        memory_id = trace.MEMORY_RETRIEVED.suffix(key)
        for candidate in evidence.get("candidates") or ():
            if candidate.get("admitted"):
                continue
            where = (f"in {candidate['uri']}" if "uri" in candidate
                     else f"turn {candidate.get('turn')}")
            out.append(DroppedCandidate(
                id=trace.memory_entry_id(memory_id, candidate["id"]), kind="memory",
                score=candidate.get("score"),
                detail=f"found by memory {memory_id!r} ({where}, score "
                       f"{candidate.get('score', 0):.2f}) but {candidate.get('reason')}"))
    return out


async def find_dropped_context(
    result: AgentRun,
    *,
    restore: Rebuild | None = None,
    is_wrong: IsWrong | None = None,
    message: str | None = None,
    reruns: int = 5,
    max_candidates: int = 8,
    progress: Progress | None = None,
    deps: object = None,
) -> DroppedContextReport:
    """List what the answering call never saw; with ``restore``, prove which absence mattered.

    ``restore(ids: frozenset[str][, seed=i])`` rebuilds the agent with the candidates in
    ``ids`` put back and returns an Agent, a RunResult or the answer (as ``rebuild`` does for
    ablation); ``is_wrong(answer)`` says whether an answer is still the wrong one.
    """
    answer = answer_of(result)
    candidates = dropped_candidates(result)
    report = DroppedContextReport(answer=answer, candidates=candidates)
    if restore is None:
        if is_wrong is not None:
            raise ConfigurationError(
                "find_dropped_context(is_wrong=...) also needs restore=: a function that "
                "rebuilds the agent with the given candidates put back")
        return report
    if is_wrong is None:
        raise ConfigurationError(
            "find_dropped_context(restore=...) also needs is_wrong=: a function answer -> bool")
    reruns = check_reruns(reruns)
    if not candidates:
        return report
    chosen = candidates[:max_candidates]
    runner = Rerunner(rebuild=restore, is_wrong=is_wrong, message=message_of(result, message),
                      reruns=reruns, progress=progress, total=reruns * (1 + len(chosen)),
                      result=result, deps=deps)
    if not await runner.wrong(answer):
        raise ConfigurationError(
            "is_wrong() says the recorded answer is not wrong; there is nothing to explain — "
            "check is_wrong against the answer you are investigating")
    baseline = await runner.probe(frozenset(), "baseline (nothing restored)")
    report.baseline = baseline
    if baseline.flips:
        report.notes.append(
            f"[baseline-unstable] the rebuilt agent with nothing restored stopped being wrong "
            f"in {baseline.fraction} re-runs — every verdict is INCONCLUSIVE.")
    for candidate in chosen:
        probe = await runner.probe(frozenset({candidate.id}), f"with {candidate.id} restored")
        verdict, _ = verdict_for(probe, baseline, candidate.id)
        candidate.verdict, candidate.fraction = verdict, probe.fraction
        candidate.reason = _sentence(verdict, candidate.id, probe, baseline)
    if len(candidates) > len(chosen):
        skipped = ", ".join(c.id for c in candidates[len(chosen):])
        report.notes.append(f"[not-rerun] beyond max_candidates={max_candidates}: {skipped} — "
                            "listed only.")
    keep_proof(result, {"kind": "dropped", "version": 1, "notes": list(report.notes),
                        "baseline": {"runs": baseline.runs, "flips": baseline.flips},
                        "candidates": [{"id": c.id, "kind": c.kind, "verdict": c.verdict,
                                        "fraction": c.fraction, "reason": c.reason}
                                       for c in chosen]})
    return report


def _sentence(verdict: Verdict, label: str, probe: Probe, baseline: Probe) -> str:
    if verdict == "CAUSAL":
        return (f"CAUSAL: restoring {label} fixed the answer in {probe.fraction} seeded re-runs "
                f"(baseline {baseline.fraction}).")
    if baseline.flips:
        return f"INCONCLUSIVE: the baseline itself changed in {baseline.fraction} re-runs."
    if probe.flips:
        return f"INCONCLUSIVE: restoring {label} fixed only {probe.fraction} re-runs."
    return f"NOT CONFIRMED: restoring {label} changed nothing in {probe.runs} re-runs."
