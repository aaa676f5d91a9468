"""How long the event loop stalls while many agent runs write to a SQLite run store.

Each measured run is ``N`` concurrent completions (``asyncio.gather``) of one agent whose turn
is a tool call and an answer (deterministic mock model, no network), recorded in a fresh SQLite
run store — so each run writes its start, two journal entries and its final save. Two figures:

* **longest callback**: the longest single step the loop ran (every ``Handle._run`` timed),
  i.e. the longest time nothing else on the loop could run — what a blocking store call costs;
* the same **with the garbage collector's pauses taken out** (a gen-2 collection over 500
  runs' objects is a stall too, but not the store's), and the loop thread's own CPU time
  in that callback (wall minus CPU: waiting for the GIL, or for a core on a busy machine);
* **heartbeat lateness**: the worst lateness of a 5 ms ``asyncio.sleep`` ticker, what a
  concurrent request on the same loop would feel (it includes the other runs' fair share).

    python bench/loop_stall.py                    # the package importable here, N = 200, 500
    python bench/loop_stall.py --base 1713707^    # that commit against HEAD, interleaved rounds

With ``--base`` both sides are ``git archive`` exports (the base ref and ``--head``, default
HEAD), each run in a fresh process, alternating base/head for ``--rounds`` rounds; the table
shows the median over rounds. Results go to ``bench/results/loop_stall.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIZES = (200, 500)


def _time_callbacks() -> list[float]:
    """Time every loop callback from now on: the list holds the longest so far, and the
    longest not counting the garbage collector's pauses inside it (seconds)."""
    longest = [0.0, 0.0, 0.0]
    in_gc = [0.0, 0.0]  # seconds spent collecting so far; when the current collection began
    original = asyncio.events.Handle._run

    def collecting(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            in_gc[1] = time.perf_counter()
        else:
            in_gc[0] += time.perf_counter() - in_gc[1]

    def timed(handle: asyncio.events.Handle) -> None:
        start, collected, cpu = time.perf_counter(), in_gc[0], time.thread_time()
        original(handle)
        took = time.perf_counter() - start
        longest[0] = max(longest[0], took)
        longest[1] = max(longest[1], took - (in_gc[0] - collected))
        longest[2] = max(longest[2], time.thread_time() - cpu)

    gc.callbacks.append(collecting)

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    return longest


async def _measure(n: int, store_dir: Path) -> dict[str, float]:
    from agentfootprint import Agent, Tracing, tool
    from agentfootprint.providers import mock
    from agentfootprint.runs import RunStore

    @tool(side_effects=False)
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"{key}: ok"

    def respond(request: Any) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"key": "k"}}]}
        return "done"

    store = RunStore(store_dir / f"runs-{n}.db")
    agent = Agent(provider=mock(respond=respond), model="mock", tools=[lookup],
                  tracing=Tracing(run_store=store))
    await agent.run("warm up", run_id="warm-up")
    longest = _LONGEST
    longest[:] = [0.0, 0.0, 0.0]
    late = [0.0]
    running = True

    async def heartbeat() -> None:
        while running:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            late[0] = max(late[0], time.perf_counter() - start - 0.005)

    beat = asyncio.create_task(heartbeat())
    started = time.perf_counter()
    await asyncio.gather(*(agent.run("go", run_id=f"r{i}") for i in range(n)))
    wall = time.perf_counter() - started
    running = False
    await beat
    stalled, stalled_no_gc, stalled_cpu = longest
    stored = len(store.list(limit=n + 10)) - 1
    store.close()
    if stored != n:
        raise SystemExit(f"only {stored} of {n} runs were stored")
    return {"n": n, "longest_callback_ms": stalled * 1e3,
            "longest_callback_no_gc_ms": stalled_no_gc * 1e3,
            "longest_callback_cpu_ms": stalled_cpu * 1e3,
            "heartbeat_late_ms": late[0] * 1e3, "wall_s": wall}


_LONGEST: list[float] = [0.0, 0.0, 0.0]


def child(sizes: list[int]) -> None:
    """Measure here (the importable agentfootprint) and print one JSON line per size."""
    global _LONGEST
    _LONGEST = _time_callbacks()
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            print(json.dumps(asyncio.run(_measure(n, Path(tmp)))), flush=True)


def _export(ref: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = into / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), ref,
                    "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run_side(src: Path, sizes: list[int]) -> list[dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, __file__, "--child", *map(str, sizes)], env=env,
                          capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the run against {src} failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def compare(base: str, head: str, rounds: int, sizes: list[int]) -> None:
    rows: dict[tuple[str, int], dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"base": _export(base, Path(tmp) / "base"),
                 "head": _export(head, Path(tmp) / "head")}
        for round_no in range(rounds):
            for side in (("base", "head") if round_no % 2 == 0 else ("head", "base")):
                for row in _run_side(sides[side], sizes):
                    for field in ("longest_callback_ms", "longest_callback_no_gc_ms",
                                  "longest_callback_cpu_ms", "heartbeat_late_ms", "wall_s"):
                        rows.setdefault((side, int(row["n"])), {}).setdefault(
                            field, []).append(row[field])
            print(f"round {round_no + 1}/{rounds} done", file=sys.stderr)
    print(f"\nloop stall, base {base} vs head {head}: medians of {rounds} interleaved rounds\n")
    print(f"{'side':<6} {'N':>5} {'longest callback ms':>20} {'(GC excluded)':>14} "
          f"{'(loop CPU)':>11} "
          f"{'heartbeat late ms':>18} {'wall s':>8}")
    results = []
    for (side, n), fields in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        medians = {f: statistics.median(v) for f, v in fields.items()}
        print(f"{side:<6} {n:>5} {medians['longest_callback_ms']:>20.1f} "
              f"{medians['longest_callback_no_gc_ms']:>14.1f} "
              f"{medians['longest_callback_cpu_ms']:>11.1f} "
              f"{medians['heartbeat_late_ms']:>18.1f} {medians['wall_s']:>8.2f}")
        results.append({"kind": "loop_stall", "side": side, "ref": base if side == "base"
                        else head, "n": n, "rounds": rounds, **medians,
                        "run_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    with (out / "loop_stall.jsonl").open("a", encoding="utf-8") as file:
        file.writelines(json.dumps(r) + "\n" for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs="+", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--base", help="compare this git ref against --head")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    args = parser.parse_args()
    if args.child:
        child(args.child)
    elif args.base:
        compare(args.base, args.head, args.rounds, args.sizes)
    else:
        child(args.sizes)


if __name__ == "__main__":
    main()
