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

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import json
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from agentfootprint.flow import Chart, NarrativeRecorder, Scope, flow_chart
from agentfootprint.flow.recorders import Recorder

P = TypeVar("P")

SIZES: tuple[int, ...] = (10, 1000)
RESULTS = Path(__file__).resolve().parent / "results" / "flow_overhead.jsonl"

TARGET_US_PER_STAGE = 15.0
TARGET_SPEEDUP = 8.0
TARGET_BYTES_DRIFT = 0.10


@dataclass(frozen=True, slots=True)
class Budget:
    """How long to time each configuration."""

    seconds: float
    min_reps: int
    max_reps: int
    warmup_seconds: float
    min_warmup: int


FULL = Budget(seconds=1.5, min_reps=5, max_reps=5000, warmup_seconds=0.3, min_warmup=2)
QUICK = Budget(seconds=0.05, min_reps=3, max_reps=50, warmup_seconds=0.0, min_warmup=1)


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


# --------------------------------------------------------------------------- timing helpers


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collect first, then keep the collector off for the timed loop."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def summarize(config: str, n: int, engine: str, samples_ns: list[int]) -> Row:
    per_stage = sorted(ns / 1000 / n for ns in samples_ns)
    p90 = per_stage[min(len(per_stage) - 1, int(0.9 * len(per_stage)))]
    return Row(config, n, len(per_stage), statistics.median(per_stage), per_stage[0], p90, engine)


def time_sync(fn: Callable[[], object], budget: Budget) -> list[int]:
    """Per-repetition wall times (ns) of a synchronous call."""
    clock = time.perf_counter_ns
    warm_end = clock() + int(budget.warmup_seconds * 1e9)
    warmed = 0
    while warmed < budget.min_warmup or clock() < warm_end:
        fn()
        warmed += 1
    samples: list[int] = []
    with gc_paused():
        end = clock() + int(budget.seconds * 1e9)
        while len(samples) < budget.max_reps and (len(samples) < budget.min_reps or clock() < end):
            t0 = clock()
            fn()
            samples.append(clock() - t0)
    return samples


async def time_async(fn: Callable[[P], Awaitable[object]], budget: Budget,
                     prepare: Callable[[], P]) -> list[int]:
    """Per-repetition wall times (ns) of ``await fn(prepare())``, all in the current loop.

    ``prepare`` runs before the timer starts, so per-run setup (a fresh recorder) is not timed.
    """
    clock = time.perf_counter_ns
    warm_end = clock() + int(budget.warmup_seconds * 1e9)
    warmed = 0
    while warmed < budget.min_warmup or clock() < warm_end:
        await fn(prepare())
        warmed += 1
    samples: list[int] = []
    with gc_paused():
        end = clock() + int(budget.seconds * 1e9)
        while len(samples) < budget.max_reps and (len(samples) < budget.min_reps or clock() < end):
            arg = prepare()
            t0 = clock()
            await fn(arg)
            samples.append(clock() - t0)
    return samples


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

    def no_recorders() -> list[Recorder]:
        return []

    def narrative_recorder() -> list[Recorder]:
        return [NarrativeRecorder(chart)]

    async def run(recorders: list[Recorder]) -> object:
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
    try:
        import langgraph.graph  # noqa: F401
    except ImportError:
        return None
    try:
        return importlib.metadata.version("langgraph")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


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

    sync_samples = time_sync(lambda: graph.invoke({"x": 0}, config), budget)
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

    asyncio.run(many())  # warm
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(many())
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# --------------------------------------------------------------------------- report


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: a few repetitions each")
    parser.add_argument("--profile", action="store_true",
                        help="also cProfile the 1000-stage chain and print the hot spots")
    parser.add_argument("--no-write", action="store_true", help="do not append to results")
    args = parser.parse_args(argv)
    budget = QUICK if args.quick else FULL

    lg_version = langgraph_version()
    print(f"flow_overhead: Python {platform.python_version()} on {platform.machine()}, "
          f"{'quick' if args.quick else 'full'} run")
    print(f"timing: warm-up then ~{budget.seconds:g} s per config (min {budget.min_reps} reps), "
          "time.perf_counter_ns per repetition, median reported; gc.collect() between configs, "
          "gc disabled during timed loops")

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
    header = f"{'config':<30} {'N':>5} {'reps':>5} {'median µs/stage':>16} {'LangGraph/ours':>15}"
    print(header)
    print("-" * len(header))
    for row in sorted(rows, key=lambda r: (r.n, r.engine != "ours", r.config)):
        if row.engine == "ours" and row.n in peer:
            ratio = f"{peer[row.n].median_us_per_stage / row.median_us_per_stage:.1f}×"
        elif row.engine == "langgraph":
            ratio = "(fastest peer)" if peer[row.n] is row else "—"
        else:
            ratio = "n/a"
        print(f"{row.config:<30} {row.n:>5} {row.reps:>5} "
              f"{row.median_us_per_stage:>16.2f} {ratio:>15}")
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
    checks: list[dict[str, Any]] = []
    for n in SIZES:
        us = log_rows[n].median_us_per_stage
        ok = us <= TARGET_US_PER_STAGE
        checks.append({"target": "us_per_stage", "n": n, "value": us, "ok": ok})
        print(f"  median ≤ {TARGET_US_PER_STAGE:g} µs/stage, commit log on, N={n}: "
              f"{us:.2f} µs  {verdict(ok)}")
    for n in SIZES:
        if n not in peer:
            print(f"  ≥ {TARGET_SPEEDUP:g}× faster than LangGraph, N={n}: skipped (no LangGraph)")
            continue
        speedup = peer[n].median_us_per_stage / log_rows[n].median_us_per_stage
        ok = speedup >= TARGET_SPEEDUP
        checks.append({"target": "speedup_vs_langgraph", "n": n, "value": speedup, "ok": ok})
        print(f"  ≥ {TARGET_SPEEDUP:g}× faster than LangGraph, N={n}: "
              f"{speedup:.1f}×  {verdict(ok)}")
    ok = abs(drift - 1) <= TARGET_BYTES_DRIFT
    checks.append({"target": "bytes_per_stage_drift", "value": drift, "ok": ok})
    print(f"  bytes/stage at N={large} within {TARGET_BYTES_DRIFT:.0%} of N={small}: "
          f"{drift - 1:+.1%}  {verdict(ok)}")

    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "quick": args.quick,
            "python": platform.python_version(),
            "langgraph": lg_version,
        }
        with RESULTS.open("a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps({**meta, "kind": "timing", **asdict(row)}) + "\n")
            for n, size in bytes_per_stage.items():
                fh.write(json.dumps({**meta, "kind": "bytes", "n": n,
                                     "bytes_per_stage": size}) + "\n")
            for check in checks:
                fh.write(json.dumps({**meta, "kind": "target", **check}) + "\n")
        print(f"\nappended {len(rows) + len(bytes_per_stage) + len(checks)} lines to {RESULTS}")

    if args.profile:
        print("\ncProfile, 20 runs of the 1000-stage chain, commit log only:")
        print(profile_ours())
    return 0


if __name__ == "__main__":
    sys.exit(main())
