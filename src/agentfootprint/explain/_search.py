"""Group testing for causes: every suspect covered, in few re-runs, several causes included.

Removing sources one at a time costs a probe per suspect and misses causes that act through
either of two sources. Instead (one shared baseline first):

1. Remove **every** removable suspect at once. If the answer holds, no removable source — alone
   or in any combination — caused it: every suspect is covered as NOT CONFIRMED.
2. Otherwise split the flipping set in halves (in proxy-rank order) and probe **both** halves:
   a half that flips is split again down to single sources (each a CAUSAL leaf); a half that
   holds covers its suspects. A culprit among ``n`` costs about ``2·log2(n) + 2`` probes.
3. When a set flips but neither half does, the cause spans both halves: the answer is produced
   by *either* of several sources, so removing one is not enough. A minimal flipping set is then
   searched (delta debugging) and reported as "either of {A, B} suffices".

The search assumes **monotonicity**: removing more sources never undoes a flip that fewer
removals cause (so a set that holds clears all its subsets). Answers that contradict it are
reported, and the search never convicts on a contradicted probe.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._fanout import both
from ._rerun import BudgetExceeded, Probe, Rerunner, Verdict, verdict_for

__all__ = ["Cause", "SearchResult", "find_causes"]

MONOTONICITY = ("group testing assumes monotonicity: removing more sources never undoes a flip "
                "that fewer removals cause")


@dataclass(frozen=True, slots=True)
class Cause:
    """A proven cause: one source, or a minimal set of sources acting as one."""

    kind: Literal["single", "either"]
    """``single``: removing it alone flips the answer. ``either``: removing the whole set
    flips it, removing any one member alone does not — each member suffices on its own."""
    members: tuple[str, ...]
    probe: Probe
    verdict: Verdict
    why: str


@dataclass(slots=True)
class SearchResult:
    causes: list[Cause] = field(default_factory=list)
    covered: dict[str, frozenset[str]] = field(default_factory=dict)
    """Suspect id → the removed set that held with it inside (NOT CONFIRMED, by monotonicity)."""
    uncovered: list[str] = field(default_factory=list)
    """Suspects the budget ran out before reaching: no verdict, not innocent."""
    notes: list[str] = field(default_factory=list)
    full: Probe | None = None
    """The probe removing every suspect at once."""


async def find_causes(runner: Rerunner, ids: Sequence[str], labels: Mapping[str, str]
                      ) -> SearchResult:
    """Search ``ids`` (proxy-rank order) for causes within the runner's budget."""
    found = SearchResult()
    base = await runner.baseline()

    def name(members: Sequence[str] | frozenset[str]) -> str:
        ordered = [i for i in ids if i in members]
        return " + ".join(labels.get(i, repr(i)) for i in ordered) or "nothing"

    async def judge(members: frozenset[str]) -> Probe:
        return await runner.judge(members, f"without {name(members)}")

    def cover(members: Sequence[str], probe: Probe) -> None:
        for sid in members:
            found.covered.setdefault(sid, probe.removed)

    async def minimize(candidates: list[str], context: frozenset[str]) -> list[str]:
        if len(candidates) <= 1:
            return candidates
        half = math.ceil(len(candidates) / 2)
        top, rest = candidates[:half], candidates[half:]
        if (await judge(context | set(top))).flipped:
            return await minimize(top, context)
        if (await judge(context | set(rest))).flipped:
            return await minimize(rest, context)
        from_top = await minimize(top, context | set(rest))
        from_rest = await minimize(rest, context | set(from_top))
        return from_top + from_rest

    async def explore(members: list[str]) -> None:
        if len(members) == 1:
            probe = await judge(frozenset(members))
            verdict, why = verdict_for(probe, base, name(members), alpha=runner.alpha)
            found.causes.append(Cause("single", tuple(members), probe, verdict, why))
            return
        half = math.ceil(len(members) / 2)
        left, right = members[:half], members[half:]
        held_left, held_right = await both(  # at once on an executor (_fanout.py)
            runner, lambda: judge(frozenset(left)), lambda: judge(frozenset(right)))
        for part, probe in ((left, held_left), (right, held_right)):
            if probe.flipped or (probe.decision == "undecided" and probe.runs):
                await explore(part)  # looking closer costs re-runs, never a conviction
            elif probe.decision == "held":
                cover(part, probe)
        if held_left.decision != "held" or held_right.decision != "held":
            if not (held_left.runs and held_right.runs):
                found.notes.append(
                    f"[undecided] removing {name(left)} or {name(right)} gave no answer "
                    "(re-runs could not complete); their part of the cause is unknown.")
            return
        joint = await minimize(members, frozenset())
        # a sampling model can make a lone cause look like a set: each member must be needed
        for member in list(joint):
            if len(joint) > 1 and (await runner.judge(
                    frozenset(joint) - {member}, f"without {name(frozenset(joint) - {member})}",
                    fresh=True)).flipped:
                joint.remove(member)
        probe = await judge(frozenset(joint))
        if len(joint) == 1:  # a single source after all (the halves were judged wrongly)
            verdict, why = verdict_for(probe, base, name(joint), alpha=runner.alpha)
            found.causes.append(Cause("single", tuple(joint), probe, verdict, why))
            return
        if not probe.flipped:
            found.notes.append(
                f"[non-monotone] the sources {name(joint)} flip the answer only with others "
                f"removed too; {MONOTONICITY}, which these answers contradict — no set is "
                "claimed.")
            return
        verdict, why = verdict_for(probe, base, name(joint), alpha=runner.alpha)
        found.causes.append(Cause("either", tuple(i for i in ids if i in joint), probe,
                                  verdict, why))

    try:
        if ids:
            everything = await judge(frozenset(ids))
            found.full = everything
            if everything.flipped or (everything.decision == "undecided" and everything.runs):
                await explore(list(ids))
            elif everything.decision == "held":
                cover(ids, everything)
            else:
                found.notes.append(
                    f"[undecided] removing every suspect at once gave no clear answer "
                    f"({everything.fraction} flipped, {everything.incomplete} re-run(s) could "
                    "not complete).")
    except BudgetExceeded as exc:
        found.notes.append(
            f"[budget] {exc} before every suspect was covered." if str(exc) else
            f"[budget] the re-run budget ({runner.budget}) ran out before every suspect was "
            "covered.")
    reached = set(found.covered) | {m for c in found.causes for m in c.members}
    found.uncovered = [i for i in ids if i not in reached]
    return found
