"""What explaining a run costs: exporting and storing its recording, backtracking, localizing.

The recording is always on (that is the product), so its cost inside the run is already in
``agent_overhead.py``'s µs per iteration. This script measures what comes after a run, with
the mock provider and no network:

* **loop50**, a 50-iteration agent run: the scripted mock asks for one tool,
  ``add(a: int, b: int) -> int``, on calls 1..49 and answers on call 50; the agent carries two
  ``define_fact`` injections, one always on and one whose rule fires every tenth iteration, so
  the context record (system-prompt pieces, trigger evaluations) is exercised. Timed: the run
  itself (``await agent.run(...)``, median µs per iteration); ``Recording.of(result)``;
  ``recording.to_json()``; ``RunStore.save(result)`` into a SQLite file in a temporary folder
  (build + serialize + ``INSERT OR REPLACE`` + commit: the whole export path); ``RunStore.load``
  of it back (``SELECT`` + parse + validate); ``backtrack(result)`` on the live result and on a
  freshly loaded ``Recording`` (whose commit log is rebuilt from JSON inside the timer; the
  JSON parse is not timed). Sizes: bytes of ``Recording.of(result).to_json()`` (UTF-8), total
  and per iteration. The overhead of recording is reported as the export and store times over
  the run's own median time (ratios), plus the bytes per iteration;
* **demo**, the offline refunds demo of ``agentfootprint._demo``: ``make_refund_agent().run(
  QUESTION)`` timed on a prebuilt agent and with the agent built inside the timer (what each
  re-run of a localization does), ``backtrack(result)``, and ``localize_context_bug(result,
  rebuild=..., is_wrong=...)`` with ``rebuild`` and ``is_wrong`` as in the demo: median wall
  time, the number of re-runs it made (``report.runs_used``, checked against a count of
  ``rebuild`` calls), and the time per re-run;
* **proof cost**, what a proof spends in re-runs (agent runs) and model calls for ``n`` = 5, 15
  and 50 facts with one planted culprit, and with two redundant culprits (either suffices),
  against the reference's ``3n + 3`` re-runs: on a deterministic model (one scenario per
  shape, exact counts; target ≤ 2·log2(n) + 8 re-runs for one culprit at n = 50, no false
  CAUSAL) and on a sampling model whose every answer flips with probability 0.1 (``SEEDS``
  seeded scenarios per shape: median and p95 of re-runs, how often the culprits were found,
  innocents convicted).

Method: each configuration is warmed up, then run in a loop for a fixed time budget (at least
a minimum number of repetitions); every repetition is timed alone with
``time.perf_counter_ns`` and the median is reported. ``gc.collect()`` runs between
configurations and the garbage collector is disabled inside timed loops. Async work of one
scenario shares one event loop. Each scenario's output is checked once before timing (the
run's iterations and answer, the stored recording read back equal, the backtrack chain, the
localization's CAUSAL verdict on the planted fact).

No targets: the figures are for reference, so nothing is judged PASS/MISS. The SQLite store
commits to a real file in the system temp folder, so its figures include the file system's
``fsync``.

Run it from the repository root::

    python bench/explain_cost.py            # full run, ~20 s
    python bench/explain_cost.py --quick    # smoke run, a few repetitions each
    python bench/explain_cost.py --profile  # also cProfile the export/store/backtrack path

Results are appended as JSON lines to ``bench/results/explain_cost.jsonl`` (gitignored).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import math
import random
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Run as a script, this file's folder (bench/) is on sys.path: see _harness's docstring.
from _harness import (
    FULL,
    QUICK,
    Budget,
    append_results,
    parse_args,
    print_preamble,
    print_table,
    profile_report,
    run_meta,
    spread,
    time_async,
    time_sync,
)

from agentfootprint import Agent, Limits, RunResult, define_fact, tool
from agentfootprint._demo import QUESTION as DEMO_QUESTION
from agentfootprint._demo import is_wrong, make_refund_agent
from agentfootprint.explain import backtrack, localize_context_bug
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore

N = 50
SIZES = (5, 15, 50)
SEEDS = 20
RESULTS = Path(__file__).resolve().parent / "results" / "explain_cost.jsonl"

QUESTION = "Keep adding one until you are told to stop, then say what you got."
FINAL = "I added one at every step; the running total is in the tool results."
ACCOUNT = "The user is on the Pro plan and prefers short answers."
TENTH = "Every tenth step, restate the running total in one sentence."
DEMO_CULPRIT = "customer-profile"


@dataclass(frozen=True, slots=True)
class Row:
    """One timed configuration, in µs per call of what is timed."""

    scenario: str  # "loop50" or "demo"
    config: str
    reps: int
    median_us: float
    min_us: float
    p90_us: float


@dataclass(frozen=True, slots=True)
class Sizes:
    """Bytes of a run's recording (``Recording.of(result).to_json()``, UTF-8)."""

    scenario: str
    iterations: int
    recording_bytes: int

    @property
    def bytes_per_iteration(self) -> float:
        return self.recording_bytes / self.iterations


# --------------------------------------------------------------------------- helpers


def summarize(scenario: str, config: str, samples_ns: list[int]) -> Row:
    stats = spread(samples_ns, 1)
    return Row(scenario, config, stats.reps, stats.median, stats.minimum, stats.p90)


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise RuntimeError(what)


def recording_bytes(result: RunResult) -> int:
    return len(Recording.of(result).to_json().encode("utf-8"))


# --------------------------------------------------------------------------- loop50


@tool
def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


def build_loop(n: int = N) -> Agent:
    """Tool ``add`` on calls 1..n-1, the answer on call n; two facts, one on a rule."""
    script: list[Any] = [{"tool_calls": [{"name": "add", "args": {"a": k, "b": 1}}]}
                         for k in range(1, n)]
    context = [
        define_fact(id="account", data=ACCOUNT),
        define_fact(id="tenth-step", data=TENTH,
                    active_when=lambda ctx: ctx.iteration % 10 == 0),
    ]
    return Agent(provider=mock(script=[*script, FINAL]), model="mock", tools=[add],
                 context=context, limits=Limits(max_iterations=n + 1))


async def bench_loop(budget: Budget, folder: Path) -> tuple[list[Row], Sizes]:
    """Time the 50-iteration run and everything done with its recording afterwards."""
    agent = build_loop()
    provider: Any = agent.spec.provider
    result = await agent.run(QUESTION)
    expect(result.content == FINAL and result.iterations == N and result.stopped_early is None,
           f"the {N}-iteration run ended with iterations={result.iterations}, "
           f"stopped_early={result.stopped_early!r}, content={result.content!r}")
    tool_results = sum(1 for m in result.history if m["role"] == "tool")
    expect(tool_results == N - 1, f"the {N}-iteration run ran {tool_results} tools")
    evaluation = result.recording.log.value_at(
        "context_evaluation", len(result.recording.log.records) - 1, default=[])
    expect({row["id"] for row in evaluation if row["fired"]} == {"account", "tenth-step"},
           f"the final iteration's context evaluation was {evaluation!r}")
    sizes = Sizes("loop50", N, recording_bytes(result))

    def prepare_run() -> None:
        provider.reset()

    run_samples = await time_async(lambda _: agent.run(QUESTION), budget, prepare_run)
    rows = [summarize("loop50", f"agent.run, {N} iterations", run_samples)]

    def the_result() -> RunResult:
        return result

    rows.append(summarize("loop50", "Recording.of(result)",
                          time_sync(Recording.of, budget, the_result)))
    recording = Recording.of(result)
    rows.append(summarize("loop50", "recording.to_json()",
                          time_sync(Recording.to_json, budget, lambda: recording)))

    with RunStore(folder / "runs.db") as store:
        saved = store.save(result)
        loaded = store.load(result.run_id)
        expect(loaded.to_json() == saved.to_json(), "the stored recording read back different")
        rows.append(summarize("loop50", "RunStore.save(result)",
                              time_sync(store.save, budget, the_result)))
        rows.append(summarize("loop50", "RunStore.load(run_id)",
                              time_sync(store.load, budget, lambda: result.run_id)))

    chain = backtrack(result)
    expect(chain.suspect is not None and chain.suspect.id == "tenth-step"
           and [hop.kind for hop in chain.hops] == ["ANSWER", "READ", "LANDED", "ALLOWED", "BORN"],
           f"backtrack on the {N}-iteration run followed {chain.suspect!r}")
    rows.append(summarize("loop50", "backtrack(result)",
                          time_sync(backtrack, budget, the_result)))
    text = recording.to_json()
    from_store = backtrack(Recording.from_json(text))
    expect(str(from_store) == str(chain), "backtrack on the loaded recording differs")
    rows.append(summarize("loop50", "backtrack(loaded Recording)",
                          time_sync(backtrack, budget, lambda: Recording.from_json(text))))
    return rows, sizes


# --------------------------------------------------------------------------- demo


@dataclass(slots=True)
class Rebuilds:
    """The demo's ``rebuild``, counting its calls (one per re-run)."""

    calls: int = 0

    def __call__(self, without: frozenset[str], seed: int = 0) -> Agent:
        self.calls += 1
        return make_refund_agent(without=without, seed=seed)


async def bench_demo(budget: Budget) -> tuple[list[Row], Sizes, int]:
    """Time the demo run, its backtrack and its localization; return the re-run count too."""
    agent = make_refund_agent()
    result = await agent.run(DEMO_QUESTION)
    expect(is_wrong(result.content), f"the demo answered {result.content!r}, not the planted bug")
    sizes = Sizes("demo", result.iterations, recording_bytes(result))

    async def build_and_run(_: None) -> RunResult:
        return await make_refund_agent().run(DEMO_QUESTION)

    rows = [
        summarize("demo", "agent.run (prebuilt agent)",
                  await time_async(lambda _: agent.run(DEMO_QUESTION), budget, lambda: None)),
        summarize("demo", "make_refund_agent() + run",
                  await time_async(build_and_run, budget, lambda: None)),
    ]

    chain = backtrack(result)  # follows the best-ranked source (a proxy), whichever it is
    expect(chain.suspect is not None and len(chain.hops) == 5,
           f"backtrack on the demo gave no chain: {chain}")
    rows.append(summarize("demo", "backtrack(result)",
                          time_sync(backtrack, budget, lambda: result)))

    rebuild = Rebuilds()
    report = await localize_context_bug(result, rebuild=rebuild, is_wrong=is_wrong)
    causal = [item.suspect.id for item in report.suspects if item.verdict == "CAUSAL"]
    expect(causal == [DEMO_CULPRIT], f"localize_context_bug convicted {causal!r}")
    expect(rebuild.calls == report.runs_used,
           f"rebuild ran {rebuild.calls} times, report.runs_used = {report.runs_used}")

    async def localize(counter: Rebuilds) -> object:
        return await localize_context_bug(result, rebuild=counter, is_wrong=is_wrong)

    counters: list[Rebuilds] = []

    def prepare_localize() -> Rebuilds:
        counters.append(Rebuilds())
        return counters[-1]

    samples = await time_async(localize, budget, prepare_localize)
    expect(all(c.calls == report.runs_used for c in counters),
           f"re-run counts varied: {sorted({c.calls for c in counters})}")
    rows.append(summarize("demo", "localize_context_bug", samples))
    return rows, sizes, report.runs_used


# --------------------------------------------------------------------------- proof cost


@dataclass(frozen=True, slots=True)
class ProofCost:
    """What proving costs for one shape: ``n`` facts, ``culprits`` planted (1, or 2 redundant)."""

    model: str  # "deterministic" or "noisy(0.1)"
    n: int
    culprits: int
    scenarios: int
    reruns_median: float
    reruns_p95: float
    model_calls_median: float
    found: int
    """Scenarios whose culprit(s) were all proven CAUSAL."""
    innocents_convicted: int
    innocents_probed: int

    @property
    def reference(self) -> int:
        return 3 * self.n + 3


def _planted_agent(n: int, culprits: tuple[int, ...], noise: float, seed: int
                   ) -> tuple[Agent, list[str]]:
    rng = random.Random(seed * 7919 + n)

    def respond(request: Any) -> str:
        wrong = "override-zq" in (request.system or "")
        if noise and rng.random() < noise:
            wrong = not wrong
        return "WRONG: escalate." if wrong else "Handled by policy."

    facts = [define_fact(id=f"f{i}", data=(f"Note {i}: override-zq applies." if i in culprits
                                             else f"Note {i}: the usual rules apply to team {i}."))
             for i in range(n)]
    return (Agent(provider=mock(respond=respond, deterministic=not noise), model="m",
                  context=facts), [f"f{i}" for i in culprits])


async def _prove_once(n: int, culprits: tuple[int, ...], noise: float, seed: int
                      ) -> tuple[int, int, bool, int, int]:
    agent, guilty = _planted_agent(n, culprits, noise, seed)
    result = await agent.run("Ticket 42?")
    while "WRONG" not in result.content:
        result = await agent.run("Ticket 42?")
    report = await localize_context_bug(result, is_wrong=lambda a: "WRONG" in a)
    found = all(report.verdict_of(g) == "CAUSAL" for g in guilty)
    innocent = [s for s in report.suspects if s.suspect.removable and s.suspect.id not in guilty]
    probed = [s for s in innocent if s.verdict is not None]
    return (report.runs_used, report.model_calls, found,
            sum(s.verdict == "CAUSAL" for s in probed), len(probed))


async def bench_proof_cost(seeds: int) -> list[ProofCost]:
    out = []
    for noise, runs in ((0.0, 1), (0.1, seeds)):
        for n in SIZES:
            for culprits in ((n // 2,), (1, n - 2)):
                done = [await _prove_once(n, culprits, noise, seed) for seed in range(runs)]
                reruns = sorted(d[0] for d in done)
                out.append(ProofCost(
                    "deterministic" if not noise else f"noisy({noise})", n, len(culprits), runs,
                    statistics.median(reruns), reruns[max(0, math.ceil(0.95 * runs) - 1)],
                    statistics.median(d[1] for d in done), sum(d[2] for d in done),
                    sum(d[3] for d in done), sum(d[4] for d in done)))
    return out


# --------------------------------------------------------------------------- profiling


def profile_export(reps: int = 20, top: int = 25) -> str:
    """cProfile ``reps`` rounds of save, load and backtrack of the 50-iteration recording."""
    result = asyncio.run(build_loop().run(QUESTION))

    async def many() -> None:
        with tempfile.TemporaryDirectory(prefix="agentfootprint-bench-") as folder, \
                RunStore(Path(folder) / "runs.db") as store:
            for _ in range(reps):
                store.save(result)
                backtrack(store.load(result.run_id))

    return profile_report(many, "agentfootprint|pydantic|sqlite", top)


# --------------------------------------------------------------------------- report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, argv, profile_help="also cProfile saving, loading and "
                      f"backtracking the {N}-iteration recording")
    budget = QUICK if args.quick else FULL

    print_preamble("explain_cost", budget, args.quick)
    print(f"workloads: loop50 = {N} model calls, tool add(a, b) on calls 1..{N - 1}, answer on "
          f"call {N}, two define_fact injections (one always, one every tenth iteration); "
          f"demo = agentfootprint._demo refunds agent; mock provider, no network")

    gc.collect()
    with tempfile.TemporaryDirectory(prefix="agentfootprint-bench-") as folder:
        rows, loop_sizes = asyncio.run(bench_loop(budget, Path(folder)))
    gc.collect()
    demo_rows, demo_sizes, runs_used = asyncio.run(bench_demo(budget))
    rows += demo_rows

    print()
    print_table(f"{'scenario':<8} {'measurement':<34} {'reps':>5} {'median µs':>11} "
                f"{'min µs':>11} {'p90 µs':>11}",
                [f"{r.scenario:<8} {r.config:<34} {r.reps:>5} {r.median_us:>11.1f} "
                 f"{r.min_us:>11.1f} {r.p90_us:>11.1f}" for r in rows])

    by = {(r.scenario, r.config): r.median_us for r in rows}
    run_us = by[("loop50", f"agent.run, {N} iterations")]
    build_us = by[("loop50", "Recording.of(result)")]
    serialize_us = by[("loop50", "recording.to_json()")]
    save_us = by[("loop50", "RunStore.save(result)")]
    load_us = by[("loop50", "RunStore.load(run_id)")]
    ratios = {
        "build_over_run": build_us / run_us,
        "build_and_serialize_over_run": (build_us + serialize_us) / run_us,
        "save_over_run": save_us / run_us,
        "save_and_load_over_run": (save_us + load_us) / run_us,
    }

    print()
    print(f"loop50 ({N} iterations):")
    print(f"  run: {run_us / N:.1f} µs/iteration median ({run_us / 1000:.2f} ms per run)")
    print(f"  recording: {loop_sizes.recording_bytes} bytes, "
          f"{loop_sizes.bytes_per_iteration:.1f} bytes/iteration")
    print("  overhead of recording (it is always on; this is the cost of exporting it), "
          "relative to the run's median:")
    print(f"    Recording.of(result)                  {build_us / 1000:>8.2f} ms  "
          f"{ratios['build_over_run']:>6.3f}× run")
    print(f"    Recording.of + to_json                {(build_us + serialize_us) / 1000:>8.2f} "
          f"ms  {ratios['build_and_serialize_over_run']:>6.3f}× run")
    print(f"    RunStore.save(result)  (whole export) {save_us / 1000:>8.2f} ms  "
          f"{ratios['save_over_run']:>6.3f}× run")
    print(f"    save + load back                      {(save_us + load_us) / 1000:>8.2f} ms  "
          f"{ratios['save_and_load_over_run']:>6.3f}× run")

    backtrack_us = by[("loop50", "backtrack(result)")]
    ratios["backtrack_over_run"] = backtrack_us / run_us
    print(f"  backtrack(result): {backtrack_us / 1000:.2f} ms, "
          f"{ratios['backtrack_over_run']:.3f}× run")

    localize_us = by[("demo", "localize_context_bug")]
    rerun_us = localize_us / runs_used
    rebuilt_run_us = by[("demo", "make_refund_agent() + run")]
    print()
    print(f"demo ({demo_sizes.iterations} iterations):")
    print(f"  recording: {demo_sizes.recording_bytes} bytes, "
          f"{demo_sizes.bytes_per_iteration:.1f} bytes/iteration")
    print(f"  localize_context_bug: {localize_us / 1000:.2f} ms median, "
          f"{runs_used} re-runs, {rerun_us:.1f} µs per re-run "
          f"({rerun_us / rebuilt_run_us:.2f}× one make_refund_agent() + run)")

    gc.collect()
    costs = asyncio.run(bench_proof_cost(3 if args.quick else SEEDS))
    print()
    print("proof cost (re-runs = agent runs; the reference spends 3n+3):")
    print_table(f"{'model':<14} {'n':>3} {'culprits':>8} {'runs':>4} {'re-runs med':>11} "
                f"{'p95':>5} {'calls med':>9} {'3n+3':>5} {'ratio':>6} {'found':>7} "
                f"{'innocent CAUSAL':>15}",
                [f"{c.model:<14} {c.n:>3} {c.culprits:>8} {c.scenarios:>4} "
                 f"{c.reruns_median:>11.1f} {c.reruns_p95:>5.0f} {c.model_calls_median:>9.1f} "
                 f"{c.reference:>5} {c.reruns_median / c.reference:>6.2f} "
                 f"{c.found:>3}/{c.scenarios:<3} {c.innocents_convicted:>7}/"
                 f"{c.innocents_probed:<7}" for c in costs])
    target = next(c for c in costs if c.model == "deterministic" and c.n == 50
                  and c.culprits == 1)
    print(f"  target, deterministic, one culprit, n = 50: ≤ {2 * math.log2(50) + 8:.1f} re-runs; "
          f"measured {target.reruns_median:.0f} "
          f"({'met' if target.reruns_median <= 2 * math.log2(50) + 8 else 'MISSED'})")

    if not args.no_write:
        meta = run_meta(args.quick, versions={
            "agentfootprint": importlib.metadata.version("agentfootprint")})
        lines: list[dict[str, Any]] = [{**meta, "kind": "timing", **asdict(row)} for row in rows]
        lines += [{**meta, "kind": "bytes", **asdict(s), "bytes_per_iteration":
                   s.bytes_per_iteration} for s in (loop_sizes, demo_sizes)]
        lines += [{**meta, "kind": "ratio", "scenario": "loop50", "what": what, "value": value}
                  for what, value in ratios.items()]
        lines.append({**meta, "kind": "localize", "scenario": "demo",
                      "runs_used": runs_used, "median_us": localize_us,
                      "median_us_per_rerun": rerun_us,
                      "rerun_over_build_and_run": rerun_us / rebuilt_run_us})
        lines += [{**meta, "kind": "proof_cost", **asdict(c), "reference": c.reference}
                  for c in costs]
        append_results(RESULTS, lines)

    if args.profile:
        print(f"\ncProfile, 20 rounds of RunStore.save + load + backtrack of the {N}-iteration "
              "recording:")
        print(profile_export())
    return 0


if __name__ == "__main__":
    sys.exit(main())
