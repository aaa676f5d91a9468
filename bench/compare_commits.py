"""Ours against ours: a benchmark run on an earlier commit and on the working tree, interleaved.

"At most 5 % slower than the pre-change commit" is only measurable on a noisy 2-core machine if
both sides run in the same minutes, alternating, so a burst of load hits both. This script
exports ``BASE``'s ``src/`` (``git archive``) into a temporary folder, then runs the chosen
benchmark scripts (from the working tree, so both sides run the same measuring code) in fresh
processes with ``PYTHONPATH`` pointing at one tree or the other — base, head, head, base, … —
for ``--rounds`` rounds, and prints, per timing row, the median over rounds of each side's
median, and head/base.

    python bench/compare_commits.py 064d90b                  # agent and flow, 5 rounds
    python bench/compare_commits.py HEAD~3 --rounds 9 --bench flow_overhead

``interleaved_flat`` is the same idea for ``agent_overhead.py``'s CPU-time figure at one N
(base and head in alternating fresh processes); ``agent_overhead.py --base REF`` prints it.

Only our rows are compared (peers are the same code on both sides). The bench scripts' own
result lines are not kept: each run writes them into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHES = {
    "agent_overhead": (["--no-cold"], "median_us_per_iteration", "µs/iteration"),
    "flow_overhead": ([], "median_us_per_stage", "µs/stage"),
}


def export_src(ref: str, into: Path) -> Path:
    """``ref``'s ``src/`` unpacked under ``into``."""
    archive = into / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), ref,
                    "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run_once(bench: str, src: Path, quick: bool, clock: str = "wall"
             ) -> dict[tuple[str, int], float]:
    """One run of ``bench`` against the package in ``src``: ``{(config, n): median}``."""
    flags, field, _ = BENCHES[bench]
    with tempfile.TemporaryDirectory() as results:
        script = Path(results) / f"{bench}.py"
        # The bench appends to bench/results next to itself: run a copy beside its harness.
        script.write_text((ROOT / "bench" / f"{bench}.py").read_text(encoding="utf-8"))
        (Path(results) / "_harness.py").write_text(
            (ROOT / "bench" / "_harness.py").read_text(encoding="utf-8"))
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1",
               "BENCH_CLOCK": clock}
        quick_flag = ["--quick"] if quick else []
        done = subprocess.run([sys.executable, str(script), *flags, *quick_flag],
                              env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{bench} failed against {src}:\n{done.stderr[-2000:]}")
        rows: dict[tuple[str, int], float] = {}
        for path in Path(results).glob("results/*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if row.get("kind") == "timing" and (row.get("framework") or row.get("engine")) \
                        == "ours" and field in row:
                    rows[(row["config"], int(row["n"]))] = float(row[field])
        if not rows:
            raise SystemExit(f"{bench} wrote no timing rows of ours")
        return rows


def flat_worker_once(src: Path, n: int, quick: bool) -> dict[str, float]:
    """One fresh process timing our ``n``-call run against the package in ``src``.

    It runs ``agent_overhead.py --flat-worker n`` (the working tree's measuring code on
    either side) and returns its figures: CPU µs per iteration, the provider's part, and
    recording bytes per iteration.
    """
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    script = ROOT / "bench" / "agent_overhead.py"
    done = subprocess.run([sys.executable, str(script), "--flat-worker", str(n),
                           *(["--quick"] if quick else [])],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"flat worker failed against {src}: "
                           f"{(done.stderr.strip().splitlines() or ['(no output)'])[-1]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(figures.pop("package")).startswith(str(src)):
        raise RuntimeError(f"the flat worker did not import the package from {src}")
    return figures


def interleaved_flat(base: str, n: int, rounds: int, quick: bool
                     ) -> dict[str, dict[str, float]]:
    """``base``'s and the working tree's figures at ``n``, interleaved in fresh processes.

    base, head, head, base, ... for ``rounds`` rounds, so load on a shared machine hits both
    sides alike; each figure is the median over rounds of one process's median.
    """
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"base": export_src(base, Path(tmp)), "head": ROOT / "src"}
        runs: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
        for round_no in range(rounds):
            for side in (["base", "head"] if round_no % 2 == 0 else ["head", "base"]):
                runs[side].append(flat_worker_once(sides[side], n, quick))
    return {side: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
            for side, rows in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the git ref to compare the working tree against")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bench", action="append", choices=sorted(BENCHES))
    parser.add_argument("--quick", action="store_true", help="the benches' smoke runs")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="time repetitions by wall clock (default) or by the process's CPU "
                             "time (on a loaded machine: waiting for a core is not counted)")
    args = parser.parse_args()
    benches = args.bench or sorted(BENCHES)
    with tempfile.TemporaryDirectory() as tmp:
        base_src = export_src(args.base, Path(tmp))
        sides = {"base": base_src, "head": ROOT / "src"}
        samples: dict[str, dict[tuple[str, int], dict[str, list[float]]]] = {
            b: defaultdict(lambda: {"base": [], "head": []}) for b in benches}
        for round_no in range(args.rounds):
            order = ["base", "head"] if round_no % 2 == 0 else ["head", "base"]
            for bench in benches:
                for side in order:
                    for key, value in run_once(bench, sides[side], args.quick,
                                                       args.clock).items():
                        samples[bench][key][side].append(value)
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
    print(f"\nhead (working tree) vs base {args.base}, {args.rounds} interleaved rounds, "
          f"{args.clock} clock; each figure is the median over rounds of a run's own median\n")
    print(f"{'bench':<16} {'config':<34} {'N':>5} {'base':>10} {'head':>10} {'head/base':>10}")
    print("-" * 90)
    for bench in benches:
        unit = BENCHES[bench][2]
        for (config, n), sides_ in sorted(samples[bench].items()):
            base = statistics.median(sides_["base"])
            head = statistics.median(sides_["head"])
            print(f"{bench:<16} {config[:34]:<34} {n:>5} {base:>10.1f} {head:>10.1f} "
                  f"{head / base:>10.3f}")
        print(f"{'':<16} ({unit})")


if __name__ == "__main__":
    main()
