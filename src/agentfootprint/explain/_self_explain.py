"""``self_explain(result)``: a run explains itself in a few plain lines, without a model.

Four parts, always in this order, each saying which tier its claim is:

    ANSWER      what the run answered (or that it failed, and where; or that it is paused,
                and what it waits on)
    RESTS ON    backtrack's chain: the call, where the followed source landed, what let it in,
                where it was born — evidence chosen by a proxy score, not a cause
    INTEGRITY   find_context_errors: the findings, and how many checks could not run
    PROOF       a kept proof's verdicts when the run's store holds one; else "not proven yet"
                and the exact ``agentfootprint prove`` command

It reads the recording only (nothing re-runs) and the run store the agent saved it to, when it
has one. The long forms are ``backtrack``, ``find_context_errors`` and ``agentfootprint explain``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..runs._view import Explainable
from ._backtrack import Backtrack, backtrack
from ._integrity import find_context_errors
from ._kept import kept_proof, prove_command

__all__ = ["self_explain"]

_QUOTE = 200


def self_explain(result: Explainable, *,
                 grounds: Mapping[str, Iterable[str]] | None = None) -> str:
    """A short plain-text self-explanation of ``result`` (a RunResult, FlowRun or Recording)."""
    try:
        chain: Backtrack | None = backtrack(result)
    except ValueError:  # no LLM call: a flow run has no answer to walk back from
        chain = None
    run_id = getattr(result, "run_id", None)
    lines = []
    if chain is None:
        lines.append("ANSWER: none — this run made no LLM call, so nothing to backtrack "
                     "(its narrative and trace_slice explain a flow run).")
    elif chain.failure is not None:
        lines.append(f"ANSWER: none — the run failed: {chain.failure.error[:_QUOTE]}")
        lines.append("WHERE IT FAILED:")
        lines.extend(f"  {hop.kind:<8} {hop.text}" for hop in chain.hops)
    elif chain.pause is not None:
        lines.append(f"ANSWER: none yet — the run is paused: {chain.pause.describe()[:_QUOTE]}")
        lines.append("WHERE IT PAUSED (the source followed is the best proxy match, not a "
                     "proven cause):" if chain.suspect is not None else "WHERE IT PAUSED:")
        lines.extend(f"  {hop.kind:<8} {hop.text}" for hop in chain.hops)
    else:
        answer = chain.answer if len(chain.answer) <= _QUOTE else chain.answer[:_QUOTE] + "…"
        lines.append(f"ANSWER: {answer!r}")
        lines.append("RESTS ON (backtrack; the source followed is the best proxy match, not a "
                     "proven cause):")
        lines.extend(f"  {hop.kind:<8} {hop.text}" for hop in chain.hops[1:])
    report = find_context_errors(result, grounds=grounds)
    blocked = len(report.dispositions) - len(report.ran)
    if report.findings:
        lines.append(f"INTEGRITY: {len(report.findings)} contradiction(s) in the run:")
        lines.extend(f"  - {f.check}: {f.explanation}" for f in report.findings)
    elif report.ran:
        lines.append(f"INTEGRITY: no contradiction found by the {len(report.ran)} of "
                     f"{len(report.dispositions)} check(s) that ran.")
    else:
        lines.append("INTEGRITY: ⚠ no check could run — no evidence either way, not a clean "
                     "run.")
    if blocked:
        lines.append(f"  ⚠ {blocked} check(s) could not run: " + "; ".join(
            f"{d.check} ({d.reason})" for d in report.dispositions
            if d.status == "could-not-run"))
    lines.extend(_proof_lines(result, run_id if isinstance(run_id, str) else None, chain))
    return "\n".join(lines)


def _proof_lines(result: Any, run_id: str | None, chain: Backtrack | None) -> list[str]:
    if chain is None or chain.failure is not None:
        return ["PROOF: nothing to prove — the run gave no model answer."]
    if chain.pause is not None:
        return ["PROOF: nothing to prove yet — a paused run has no answer; explain it once "
                "it is resumed."]
    store = getattr(getattr(result, "source", None), "run_store", None)
    proofs = getattr(store, "proofs", None)
    kept = kept_proof(proofs(run_id)) if callable(proofs) and run_id else None
    if kept is not None:
        return ["PROOF (kept with the run):", *(f"  {line}" for line in kept.lines())]
    if run_id is None:
        return ["PROOF: not proven yet — localize_context_bug(result, ...) re-runs without each "
                "source and proves which one caused the answer."]
    stored = " (save the run first: Tracing(run_store=RunStore(path)))" if store is None else ""
    return [f"PROOF: not proven yet — nothing above is a cause. Prove it{stored}:",
            f"  {prove_command(run_id)}"]
