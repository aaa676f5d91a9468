"""Per-stage overhead of the flowchart engine, and the size of what it records.

What it measures, on linear chains of N = 10 and N = 1000 stages where every stage does
exactly one tracked read and one write of a scalar (``scope["x"] = scope["x"] + 1``):

* median µs per stage of ``await chart.run(state={"x": 0})`` with the commit log only (it is
  always on), and with the commit log plus a ``NarrativeRecorder``;
* the same chain as a LangGraph ``StateGraph`` (TypedDict state ``x: int``, no checkpointer),
  timed with both ``invoke`` and ``ainvoke``; the faster of the two is the peer we compare to;
* recording bytes per stage, ``len(json.dumps(run.log.to_json())) / N``, at both N.

Method: each configuration is warmed up, then run in a loop for a fixed time budget (at least
a minimum number of repetitions); every repetition is timed alone with
``time.perf_counter_ns`` and the median is reported. ``gc.collect()`` runs between
configurations and the garbage collector is disabled inside timed loops. Our engine's runs
share one event loop; the ``NarrativeRecorder`` is built before the timer starts.

Targets (printed as PASS/MISS; the script never fails on a miss):

* median ≤ 15 µs/stage with the commit log on (commit-log-only configuration);
* ≥ 8× faster than LangGraph (fastest of invoke/ainvoke) at the same N;
* bytes/stage at N = 1000 within 10% of bytes/stage at N = 10.

Run it from the repository root::

    python bench/flow_overhead.py            # full run, ~1-2 s per configuration
    python bench/flow_overhead.py --quick    # smoke run, a few repetitions each
    python bench/flow_overhead.py --profile  # also cProfile the 1000-stage chain

LangGraph comes with ``pip install -e ".[bench]"``; without it the peer rows are skipped.
Results are appended as JSON lines to ``bench/results/flow_overhead.jsonl`` (gitignored).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

# Run as a script, this file's folder (bench/) is on sys.path: see _harness's docstring.
from _harness import (
    FULL,
    QUICK,
    Budget,
    Targets,
    append_results,
    installed_version,
    parse_args,
    print_preamble,
    print_table,
    profile_report,
    run_meta,
    spread,
    time_async,
    time_sync,
)

from agentfootprint.flow import Chart, NarrativeRecorder, Scope, flow_chart

SIZES: tuple[int, ...] = (10, 1000)
RESULTS = Path(__file__).resolve().parent / "results" / "flow_overhead.jsonl"

TARGET_US_PER_STAGE = 15.0
TARGET_SPEEDUP = 8.0
TARGET_BYTES_DRIFT = 0.10


@dataclass(frozen=True, slots=True)
class Row:
    """One timed configuration."""

    config: str
    n: int
    reps: int
    median_us_per_stage: float
    min_us_per_stage: float
    p90_us_per_stage: float
    engine: str  # "ours" or "langgraph"


def summarize(config: str, n: int, engine: str, samples_ns: list[int]) -> Row:
    stats = spread(samples_ns, n)
    return Row(config, n, stats.reps, stats.median, stats.minimum, stats.p90, engine)


# --------------------------------------------------------------------------- our engine


def stage(scope: Scope) -> None:
    scope["x"] = scope["x"] + 1


def build_ours(n: int) -> Chart:
    builder = flow_chart("s0", stage)
    for i in range(1, n):
        builder = builder.then(f"s{i}", stage)
    return builder.build()


async def bench_ours(n: int, budget: Budget) -> tuple[list[Row], float]:
    """Time both modes for one N; return the rows and the recording's bytes per stage."""
    chart = build_ours(n)
    check = await chart.run(state={"x": 0})
    if check.state.get("x") != n:
        raise RuntimeError(f"our {n}-stage chain ended with x={check.state.get('x')!r}")
    bytes_per_stage = len(json.dumps(check.log.to_json())) / n

    def no_recorders() -> list[object]:
        return []

    def narrative_recorder() -> list[object]:
        return [NarrativeRecorder(chart)]

    async def run(recorders: list[object]) -> object:
        return await chart.run(state={"x": 0}, recorders=recorders)

    log_samples = await time_async(run, budget, no_recorders)
    gc.collect()
    narrative_samples = await time_async(run, budget, narrative_recorder)

    rows = [
        summarize("ours: commit log", n, "ours", log_samples),
        summarize("ours: commit log + narrative", n, "ours", narrative_samples),
    ]
    return rows, bytes_per_stage


# --------------------------------------------------------------------------- LangGraph


class ChainState(TypedDict):
    x: int


def lg_node(state: ChainState) -> dict[str, int]:
    return {"x": state["x"] + 1}


def langgraph_version() -> str | None:
    return installed_version("langgraph.graph", "langgraph", missing=(ImportError,))


def build_langgraph(n: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(ChainState)
    for i in range(n):
        graph.add_node(f"s{i}", lg_node)
    graph.add_edge(START, "s0")
    for i in range(1, n):
        graph.add_edge(f"s{i - 1}", f"s{i}")
    graph.add_edge(f"s{n - 1}", END)
    return graph.compile()


def bench_langgraph(n: int, budget: Budget) -> list[Row]:
    graph = build_langgraph(n)
    config = {"recursion_limit": n + 10}
    result = graph.invoke({"x": 0}, config)
    if result.get("x") != n:
        raise RuntimeError(f"LangGraph {n}-node chain ended with x={result.get('x')!r}")

    sync_samples = time_sync(lambda _: graph.invoke({"x": 0}, config), budget, lambda: None)
    gc.collect()

    async def run_async() -> list[int]:
        return await time_async(lambda _: graph.ainvoke({"x": 0}, config), budget, lambda: None)

    async_samples = asyncio.run(run_async())
    return [
        summarize("LangGraph invoke (sync)", n, "langgraph", sync_samples),
        summarize("LangGraph ainvoke", n, "langgraph", async_samples),
    ]


# --------------------------------------------------------------------------- profiling


def profile_ours(n: int = 1000, reps: int = 20, top: int = 25) -> str:
    """cProfile ``reps`` runs of the n-stage chain (commit log only); return the report."""
    chart = build_ours(n)

    async def many() -> None:
        for _ in range(reps):
            await chart.run(state={"x": 0})

    return profile_report(many, top)


# --------------------------------------------------------------------------- report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, argv, profile_help="also cProfile the 1000-stage chain and "
                      "print the hot spots")
    budget = QUICK if args.quick else FULL

    lg_version = langgraph_version()
    print_preamble("flow_overhead", budget, args.quick)

    rows: list[Row] = []
    bytes_per_stage: dict[int, float] = {}
    for n in SIZES:
        gc.collect()
        ours, size = asyncio.run(bench_ours(n, budget))
        rows += ours
        bytes_per_stage[n] = size

    if lg_version is None:
        print("LangGraph not importable: skipping the peer rows "
              '(install with `pip install -e ".[bench]"`).')
    else:
        print(f"peer: langgraph {lg_version}, StateGraph compiled without checkpointer")
        for n in SIZES:
            gc.collect()
            rows += bench_langgraph(n, budget)

    # The peer at each N is whichever LangGraph entry point was faster.
    peer: dict[int, Row] = {}
    for row in rows:
        if row.engine == "langgraph" and (
            row.n not in peer or row.median_us_per_stage < peer[row.n].median_us_per_stage
        ):
            peer[row.n] = row

    print()
    table: list[str] = []
    for row in sorted(rows, key=lambda r: (r.n, r.engine != "ours", r.config)):
        if row.engine == "ours" and row.n in peer:
            ratio = f"{peer[row.n].median_us_per_stage / row.median_us_per_stage:.1f}×"
        elif row.engine == "langgraph":
            ratio = "(fastest peer)" if peer[row.n] is row else "—"
        else:
            ratio = "n/a"
        table.append(f"{row.config:<30} {row.n:>5} {row.reps:>5} "
                     f"{row.median_us_per_stage:>16.2f} {ratio:>15}")
    print_table(f"{'config':<30} {'N':>5} {'reps':>5} {'median µs/stage':>16} "
                f"{'LangGraph/ours':>15}", table)
    if peer:
        modes = ", ".join(f"N={n}: {r.config}" for n, r in sorted(peer.items()))
        print(f"LangGraph/ours uses the faster LangGraph entry point per N ({modes}).")

    small, large = SIZES[0], SIZES[-1]
    drift = bytes_per_stage[large] / bytes_per_stage[small]
    print()
    for n in SIZES:
        print(f"recording bytes/stage at N={n}: {bytes_per_stage[n]:.1f}")
    print(f"bytes/stage ratio N={large} / N={small}: {drift:.3f}")

    print()
    print("targets:")
    log_rows = {r.n: r for r in rows if r.config == "ours: commit log"}
    targets = Targets()
    for n in SIZES:
        us = log_rows[n].median_us_per_stage
        targets.judge("us_per_stage", f"median ≤ {TARGET_US_PER_STAGE:g} µs/stage, commit log "
                      f"on, N={n}: {us:.2f} µs", us, us <= TARGET_US_PER_STAGE, n=n)
    for n in SIZES:
        if n not in peer:
            print(f"  ≥ {TARGET_SPEEDUP:g}× faster than LangGraph, N={n}: skipped (no LangGraph)")
            continue
        speedup = peer[n].median_us_per_stage / log_rows[n].median_us_per_stage
        targets.judge("speedup_vs_langgraph", f"≥ {TARGET_SPEEDUP:g}× faster than LangGraph, "
                      f"N={n}: {speedup:.1f}×", speedup, speedup >= TARGET_SPEEDUP, n=n)
    targets.judge("bytes_per_stage_drift", f"bytes/stage at N={large} within "
                  f"{TARGET_BYTES_DRIFT:.0%} of N={small}: {drift - 1:+.1%}", drift,
                  abs(drift - 1) <= TARGET_BYTES_DRIFT)

    if not args.no_write:
        meta = run_meta(args.quick, langgraph=lg_version)
        lines: list[dict[str, Any]] = [{**meta, "kind": "timing", **asdict(row)} for row in rows]
        lines += [{**meta, "kind": "bytes", "n": n, "bytes_per_stage": size}
                  for n, size in bytes_per_stage.items()]
        lines += [{**meta, "kind": "target", **check} for check in targets.checks]
        append_results(RESULTS, lines)

    if args.profile:
        print("\ncProfile, 20 runs of the 1000-stage chain, commit log only:")
        print(profile_ours())
    return 0


if __name__ == "__main__":
    sys.exit(main())
