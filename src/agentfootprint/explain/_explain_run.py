"""What ``agentfootprint explain RUN_ID`` says about a stored run: proof first, then the chain.

Three cases, in this order:

* the run **failed** — the error, the step that raised it and the context at that moment (see
  ``failure.py``); there is no answer to trace and nothing to prove;
* the run is **paused** — the step it stopped at and what it waits on (the pending tool call,
  traced to the context of the call that asked for it; see ``_paused.py``); it has no answer
  yet, so nothing to prove;
* a **proof is kept** with the run — the proven cause(s) with the answer the agent gave without
  them and the criterion that judged "wrong"; the backtrack then follows the proven cause, and
  the proxy ranking is listed with each suspect's verdict, its leader never called a winner;
* **nothing is proven yet** — said plainly, with the exact ``agentfootprint prove`` command;
  the backtrack follows the best proxy score, labelled as such.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..runs._recording import Recording
from ..runs._view import RunView
from ._backtrack import Backtrack, backtrack
from ._failure import failure_of
from ._kept import KeptProof, is_redacted, kept_proof, prove_command
from ._paused import pause_of

__all__ = ["NoAnswer", "explain_recording", "follow_proof"]


class NoAnswer(ValueError):
    """The run made no LLM call and did not fail: there is no answer to explain."""


def explain_recording(recording: Recording, proofs: Sequence[Mapping[str, Any]] = ()) -> str:
    """The explanation of a stored run (the CLI prints it); ``proofs`` are the store's."""
    if failure_of(recording) is not None:
        return (str(backtrack(recording)) + "\n\nNothing to prove: a failed run has no answer. "
                f"`agentfootprint report {recording.run_id}` shows every step up to the error.")
    if pause_of(recording) is not None:
        paused = backtrack(recording)
        proxy = (" — the chain above follows the best proxy score, not a cause"
                 if paused.suspect is not None else "")
        return (f"{paused}\n\nNothing to prove yet: a paused run has no answer{proxy}. Once "
                "it is resumed, explain the finished run; "
                f"`agentfootprint report {recording.run_id}` shows every step up to the pause.")
    if not RunView.of(recording).records:
        raise NoAnswer(
            f"run {recording.run_id} ({recording.kind} {recording.name!r}) made no LLM call, so "
            f"there is no answer to backtrack; `agentfootprint report {recording.run_id}` shows "
            "its steps")
    proof = kept_proof(proofs, redacted=is_redacted(recording))
    if proof is None:
        chain = backtrack(recording)
        factory = "" if recording.meta.get("factory") else " --factory MODULE:FUNCTION"
        head = [
            "NOT PROVEN YET: no re-runs are kept with this run, so nothing below is a cause — "
            "the chain follows the best proxy score (similarity to the answer).",
            "Prove it (isolated re-runs without each source; the proof is kept with the run):",
            f"  {prove_command(recording.run_id)}{factory}",
            "  (PHRASE: what makes the answer wrong, e.g. a word of it)", ""]
        return "\n".join([*head, str(chain)])
    lines = proof.lines()
    chain, note = follow_proof(recording, proof)
    lines.append("")
    if proof.lead is not None:
        label = proof.causes[0].labels[0]
        lines.append(f"BACKTRACK to the proven cause, {label}:")
    else:
        lines.append("BACKTRACK (follows the best proxy score — not a cause, nothing was "
                     "proven):")
    if note:
        lines.append(note)
    lines.extend(f"{hop.kind:<8} {hop.text}" for hop in chain.hops)
    lines.append("")
    lines.extend(_ranking(chain, proof))
    for kept in proof.notes:
        lines.append(f"⚠ {kept}")
    others = Counter(str(p.get("kind")) for p in proofs if p.get("kind") != "localize")
    if others:
        lines.append("also kept with the run: " + ", ".join(
            f"{count} {kind!r} proof(s)" for kind, count in sorted(others.items())))
    return "\n".join(lines)


def follow_proof(recording: Recording, proof: KeptProof | None) -> tuple[Backtrack, str]:
    """The chain to the proven cause; the proxy's chain (said so) when it did not reach the
    final call this backtrack reads."""
    if proof is None or proof.lead is None:
        return backtrack(recording), ""
    try:
        return backtrack(recording, suspect=proof.lead), ""
    except KeyError:
        return backtrack(recording), (
            f"(the proven cause {proof.lead!r} is not among the sources this chain reads; it "
            "follows the best proxy score instead — not a cause)")


def _ranking(chain: Backtrack, proof: KeptProof) -> list[str]:
    """The proxy ranking with the kept verdicts; a leader the proof disagrees with is said so."""
    if not chain.ranked:
        return []
    out = ["Candidates that reached the call (proxy scores, not causes; kept verdicts):"]
    seen: set[str] = set()
    for item in chain.ranked:
        sid = item.suspect.id
        kept = proof.verdict_of(sid) if sid not in seen else None
        seen.add(sid)
        verdict = ""
        if kept is not None and kept.verdict is not None:
            verdict = f"  {kept.verdict}" + (f" {kept.fraction}" if kept.fraction else "")
        elif not item.suspect.removable:
            verdict = "  no verdict (cannot be removed)"
        out.append(f"  {item.score:0.3f}  {item.suspect.label}{verdict}")
    leader = chain.ranked[0].suspect
    proven = proof.proven
    if proven and leader.id not in proven:
        names = ", ".join(c.labels[0] if c.kind == "single" else "{" + ", ".join(c.labels) + "}"
                          for c in proof.causes)
        out.append(f"  The proxy's leader, {leader.label}, is not the cause: the re-runs proved "
                   f"{names}.")
    return out
