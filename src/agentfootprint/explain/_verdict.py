"""The verdict rule: does the answer flip more often without a source than with nothing removed?

A probe is a set of re-runs of the agent without some sources; the *baseline* is one shared set
of re-runs with nothing removed. A re-run *flips* when its answer is no longer wrong.

* **Sampling model** (every real one): the two flip rates are compared with Fisher's exact test,
  one-sided (is the flip rate without the source higher?). The probe runs adaptively, in looks
  of ``LOOKS`` re-runs (4, 8, 16, 32); the false-positive rate ``alpha`` is split evenly over
  the looks (Bonferroni), so however early a probe stops, an innocent source is called CAUSAL with
  probability at most ``alpha``. A probe stops early as *held* when its flips are too few for a
  cause (none of the first four, at most a quarter of the first eight): a source that flips
  90 % of re-runs stops there with probability under 0.01 %.
* **Deterministic model** (``provider.deterministic``: the same request always gets the same
  reply): one re-run per probe is the whole distribution, so the rule reduces to "flips every
  time; baseline never" and the false-positive rate is zero — as long as the baseline holds; a
  baseline that flips disproves the declaration and the explanation falls back to sampling.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Literal

__all__ = ["DEFAULT_ALPHA", "LOOKS", "Decision", "fisher_greater", "look_decision"]

DEFAULT_ALPHA = 0.01
LOOKS: tuple[int, ...] = (4, 8, 16, 32)
"""Cumulative re-runs at which a sampling probe is judged."""
BASELINE_RUNS = 8
"""Re-runs of the unchanged agent on a sampling model (one on a deterministic model)."""

Decision = Literal["flipped", "held", "undecided"]


def fisher_greater(flips: int, runs: int, base_flips: int, base_runs: int) -> float:
    """One-sided Fisher exact p-value that the probe's flip rate exceeds the baseline's.

    The probability, with both groups' flips pooled and dealt at random, that the probe gets
    ``flips`` or more of them.
    """
    if runs <= 0:
        return 1.0
    total = flips + base_flips
    n = runs + base_runs
    denominator = comb(n, runs)
    tail = sum(comb(total, k) * comb(n - total, runs - k)
               for k in range(flips, min(total, runs) + 1))
    return min(1.0, tail / denominator)


@dataclass(frozen=True, slots=True)
class LookResult:
    decision: Decision
    p_value: float


def look_decision(flips: int, runs: int, base_flips: int, base_runs: int, *, alpha: float,
                  final: bool) -> LookResult:
    """Judge a sampling probe at one of its looks (``final``: no more re-runs will come)."""
    p = fisher_greater(flips, runs, base_flips, base_runs)
    if p <= alpha / len(LOOKS):
        return LookResult("flipped", p)
    if (runs >= LOOKS[1] and 4 * flips <= runs) or (runs >= LOOKS[0] and flips == 0):
        return LookResult("held", p)
    if final:  # out of looks: most flipped but not significantly → undecided, never acquitted
        return LookResult("undecided" if 2 * flips > runs else "held", p)
    return LookResult("undecided", p)
