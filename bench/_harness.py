"""The timing harness shared by the benchmark scripts in ``bench/``.

``flow_overhead.py`` and ``agent_overhead.py`` must measure the same way (the same warm-up,
time budget, garbage-collector policy and statistics) for their figures to mean the same
thing, and they report and record them the same way; one copy here keeps them from drifting
apart. What each script times, and its targets, stay in the script.

``bench/`` is not a package: the scripts run as ``python bench/<script>.py`` from the
repository root, Python puts the script's own folder first on ``sys.path``, and
``import _harness`` finds this file. The underscore says it is a helper, not a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import importlib.metadata
import io
import json
import os
import platform
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Budget:
    """How long to time each configuration.

    Timing for a fixed time rather than a fixed count lets fast and slow configurations both
    get enough repetitions for a stable median without the slow ones taking minutes.
    """

    seconds: float
    min_reps: int
    max_reps: int
    warmup_seconds: float
    min_warmup: int
    cold_launches: int
    """Subprocess launches per cold-start figure (only agent_overhead.py measures one)."""


FULL = Budget(seconds=1.5, min_reps=5, max_reps=5000, warmup_seconds=0.3, min_warmup=2,
              cold_launches=15)
QUICK = Budget(seconds=0.05, min_reps=3, max_reps=50, warmup_seconds=0.0, min_warmup=1,
               cold_launches=3)


# --------------------------------------------------------------------------- timing


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collect first, then keep the collector off for the timed loop.

    A collection landing inside one repetition would charge that repetition for garbage the
    previous configurations made; collecting up front and pausing keeps the samples clean.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _warm_up(budget: Budget) -> Iterator[None]:
    """Yield once per warm-up repetition: at least ``min_warmup``, for ``warmup_seconds``."""
    clock = time.perf_counter_ns
    end = clock() + int(budget.warmup_seconds * 1e9)
    done = 0
    while done < budget.min_warmup or clock() < end:
        yield
        done += 1


def _timed_reps(budget: Budget, samples: list[int]) -> Iterator[None]:
    """Yield once per timed repetition until the budget is spent.

    ``samples`` is the caller's list of times so far: its length counts the repetitions.

    The clock starts at the first repetition, not at the call, so that the ``gc.collect()``
    of :func:`gc_paused` around the loop does not eat into the budget.
    """
    clock = time.perf_counter_ns
    end = clock() + int(budget.seconds * 1e9)
    while len(samples) < budget.max_reps and (len(samples) < budget.min_reps or clock() < end):
        yield


CLOCK = os.environ.get("BENCH_CLOCK", "wall")
"""``wall`` (``time.perf_counter_ns``, the default) or ``cpu`` (``time.process_time_ns``: this
process's CPU time, so time spent waiting for a core that other processes hold is not counted —
what ``compare_commits.py --clock cpu`` uses on a loaded machine, where wall medians swing
±30 % from minute to minute). Only the timed repetitions use it; budgets stay wall time."""


def _sample_clock() -> Callable[[], int]:
    if CLOCK not in ("wall", "cpu"):
        raise SystemExit(f"BENCH_CLOCK={CLOCK!r} must be 'wall' or 'cpu'")
    return time.process_time_ns if CLOCK == "cpu" else time.perf_counter_ns


def time_sync(fn: Callable[[P], object], budget: Budget, prepare: Callable[[], P]) -> list[int]:
    """Per-repetition times (ns, see ``CLOCK``) of ``fn(prepare())``; ``prepare`` is not timed."""
    clock = _sample_clock()  # a local: the lookup must not land inside the timed window
    for _ in _warm_up(budget):
        fn(prepare())
    samples: list[int] = []
    with gc_paused():
        for _ in _timed_reps(budget, samples):
            arg = prepare()
            t0 = clock()
            fn(arg)
            samples.append(clock() - t0)
    return samples


async def time_async(fn: Callable[[P], Awaitable[object]], budget: Budget,
                     prepare: Callable[[], P]) -> list[int]:
    """Per-repetition times (ns, see ``CLOCK``) of ``await fn(prepare())``, all in the current
    loop.

    ``prepare`` runs before the timer starts, so per-run setup (a fresh recorder, rewinding a
    fake model's script) is not timed.
    """
    clock = _sample_clock()
    for _ in _warm_up(budget):
        await fn(prepare())
    samples: list[int] = []
    with gc_paused():
        for _ in _timed_reps(budget, samples):
            arg = prepare()
            t0 = clock()
            await fn(arg)
            samples.append(clock() - t0)
    return samples


class Spread(NamedTuple):
    """The statistics of one configuration's samples, in µs per unit of work."""

    reps: int
    median: float
    minimum: float
    p90: float


def spread(samples_ns: Sequence[int], n: int) -> Spread:
    """Reduce samples of a run doing ``n`` units of work (stages, iterations) to µs per unit.

    The median is the figure the targets use: one slow repetition (a scheduler hiccup on a
    busy machine) moves it far less than it moves a mean.
    """
    per_unit = sorted(ns / 1000 / n for ns in samples_ns)
    p90 = per_unit[min(len(per_unit) - 1, int(0.9 * len(per_unit)))]
    return Spread(len(per_unit), statistics.median(per_unit), per_unit[0], p90)


def profile_report(many: Callable[[], Coroutine[Any, Any, object]],
                   *restrictions: str | int) -> str:
    """cProfile one ``asyncio.run(many())`` after an untimed one; the report, by two sorts.

    ``restrictions`` go to ``pstats.Stats.print_stats`` (a name filter, a line count), so the
    hot spots come out both by own time and by cumulative time.
    """
    asyncio.run(many())  # warm
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(many())
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(*restrictions)
    stats.sort_stats("cumulative").print_stats(*restrictions)
    return out.getvalue()


def installed_version(module: str, distribution: str, *,
                      missing: tuple[type[Exception], ...] = (Exception,)) -> str | None:
    """The installed version of a peer, or None when importing ``module`` raises ``missing``.

    The peers are optional (``pip install -e ".[bench]"``): a missing one skips its rows
    instead of failing the run.
    """
    try:
        importlib.import_module(module)
    except missing:
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# --------------------------------------------------------------------------- command line


def parse_args(doc: str, argv: Sequence[str] | None, *, profile_help: str,
               extra_flags: Sequence[tuple[str, str]] = ()) -> argparse.Namespace:
    """The common flags: ``--quick``, ``--profile``, the script's ``extra_flags``, ``--no-write``.

    ``extra_flags`` are (flag, help) pairs of on/off switches, listed before ``--no-write``.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: a few repetitions each")
    parser.add_argument("--profile", action="store_true", help=profile_help)
    for flag, help_text in extra_flags:
        parser.add_argument(flag, action="store_true", help=help_text)
    parser.add_argument("--no-write", action="store_true", help="do not append to results")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- report


def print_preamble(name: str, budget: Budget, quick: bool) -> None:
    """Say what ran and how it was timed, so a pasted output explains its own figures."""
    print(f"{name}: Python {platform.python_version()} on {platform.machine()}, "
          f"{'quick' if quick else 'full'} run")
    print(f"timing: warm-up then ~{budget.seconds:g} s per config (min {budget.min_reps} reps), "
          f"{'time.process_time_ns (CPU time)' if CLOCK == 'cpu' else 'time.perf_counter_ns'} "
          "per repetition, median reported; gc.collect() between configs, "
          "gc disabled during timed loops")


def print_table(header: str, lines: Sequence[str]) -> None:
    """A header, a rule as wide as it, then the rows (already formatted to the header)."""
    print(header)
    print("-" * len(header))
    for line in lines:
        print(line)


@dataclass(slots=True)
class Targets:
    """The targets of a run: each is printed as it is judged, and kept for the results file.

    A miss is reported as MISS, never raised: the figures depend on the machine that runs them.
    """

    checks: list[dict[str, Any]] = field(default_factory=list)

    def judge(self, target: str, text: str, value: float, ok: bool, **where: object) -> None:
        """Print ``text`` with PASS/MISS; record ``{"target", **where, "value", "ok"}``."""
        self.checks.append({"target": target, **where, "value": value, "ok": ok})
        print(f"  {text}  {'PASS' if ok else 'MISS'}")


def run_meta(quick: bool, **extra: object) -> dict[str, object]:
    """The fields stamped on every results line: when, which mode, which Python, then ``extra``.

    The results file accumulates runs across machines and commits; these say which is which.
    """
    return {
        "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "python": platform.python_version(),
        **extra,
    }


def append_results(path: Path, lines: Sequence[Mapping[str, object]]) -> None:
    """Append ``lines`` as JSON lines to ``path`` (creating its folder) and say so.

    Appending, not overwriting, keeps the history of runs for comparing before and after.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(line) + "\n" for line in lines)
    print(f"\nappended {len(lines)} lines to {path}")
