"""The planted-bug battery: default settings find the culprit and convict no innocent.

240 generated scenarios (40 of each kind: facts, steering, memory entries, RAG chunks, tool
results, an upstream agent's fact in a composition), explained with ``localize_context_bug``'s
defaults — once on a deterministic model, once on a sampling model whose every answer flips
with probability 0.1. The culprit must be CAUSAL in at least 95 % of scenarios and innocents
CAUSAL in at most 0.5 % of those a verdict reached.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from agentfootprint.explain import localize_context_bug

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planted import KINDS, build, explained, is_wrong

SCENARIOS = 240


@pytest.mark.parametrize("noise", [0.0, 0.1], ids=["deterministic", "noisy"])
async def test_the_battery_finds_every_planted_culprit_and_convicts_no_innocent(
        noise: float) -> None:
    found = 0
    probed = convicted = 0
    missed: list[str] = []
    reruns: list[int] = []
    for seed in range(SCENARIOS):
        planted = await build(seed, noise=noise)
        report = await localize_context_bug(await explained(planted), is_wrong=is_wrong)
        reruns.append(report.runs_used)
        if report.verdict_of(planted.culprit) == "CAUSAL":
            found += 1
        else:
            missed.append(f"{planted.kind}#{seed}: {report.verdict_of(planted.culprit)}")
        for innocent in planted.innocents:
            verdict = report.verdict_of(innocent)
            if verdict is not None:
                probed += 1
                convicted += verdict == "CAUSAL"
    reruns.sort()
    print(f"\nnoise={noise}: culprit CAUSAL {found}/{SCENARIOS}; innocents CAUSAL "
          f"{convicted}/{probed}; re-runs median {statistics.median(reruns)}, "
          f"p95 {reruns[int(0.95 * len(reruns)) - 1]}; kinds {', '.join(KINDS)}; "
          f"missed {missed[:10]}")
    assert found >= 0.95 * SCENARIOS, missed
    assert convicted <= 0.005 * probed
    if noise == 0.0:
        assert found == SCENARIOS and convicted == 0
