"""Scale-out: batches and explanations on 1, 2 and 4 Celery workers against the in-process executor.

Two workloads, each with the mock provider (no network) and a SQLite run store in a temporary
folder that every worker records to:

* **batch** — ``run_many`` of 1,000 runs of ``_scale_agents.make_agent`` (one tool call, then
  the answer: two model calls per run), timed once per configuration: runs per second, with
  one run per Celery task and with ``CHUNK`` runs per task (``celery_executor(chunk=...)``);
* **dbos** — the same batch as DBOS durable workflows (SQLite system database), plain and
  sealed: the overhead DBOS adds per durable step, µs (``dbos_rows``);
* **explain** — ``localize_context_bug`` over the 50 facts of ``make_suspect_agent`` (one
  culprit; a deterministic model, so one re-run per probe and the two halves of each split at
  once): the median wall time of ``REPEATS`` explanations.

Configurations: the in-process executor (``InProcessExecutor()``, asyncio, 8 runs at a time, in
this process), then ``celery_executor`` with 1, 2 and 4 workers started as the README says
(``celery -A agentfootprint.distributed.worker worker -c 1``, one pool process each) on a Redis
broker. Speed-up is in-process time over the configuration's. ``--latency MS`` gives every model
call that latency (a real model's wait; the in-process executor overlaps it, a ``-c 1`` worker
does not). The figures depend on the machine's cores: workers are processes, and on two cores
four workers cannot do more than two at once.

Redis: ``$AGENTFOOTPRINT_REDIS_URL``, else a ``redis-server`` started on a free port for the run.

    python bench/scale_out.py              # full run (~1-2 min)
    python bench/scale_out.py --quick      # 100 runs, 1 and 2 workers
    python bench/scale_out.py --latency 20 # model calls that take 20 ms

Results are appended as JSON lines to ``bench/results/scale_out.jsonl`` (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _harness

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "scale_out.jsonl"
CELERY = Path(sys.executable).with_name("celery")
REPEATS = 5
CHUNK = 16
"""Runs per task in the chunked batch column (``celery_executor(chunk=CHUNK)``)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def redis_url(workdir: Path) -> Iterator[str]:
    found = os.environ.get("AGENTFOOTPRINT_REDIS_URL")
    if found:
        yield found
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("needs AGENTFOOTPRINT_REDIS_URL or a redis-server binary")
    port = _free_port()
    server = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", str(workdir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)


@contextlib.contextmanager
def workers(count: int, broker: str, workdir: Path, latency: float) -> Iterator[str]:
    """``count`` workers of one pool process each on a queue of their own; yields the queue."""
    queue = f"scale-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get(
        "PYTHONPATH")])), "AGENTFOOTPRINT_BROKER_URL": broker, "AGENTFOOTPRINT_QUEUE": queue,
        "AF_SCALE_LATENCY": str(latency)}
    started: list[subprocess.Popen[bytes]] = []
    logs = [workdir / f"{queue}-{i}.log" for i in range(count)]
    try:
        for i, log in enumerate(logs):
            with log.open("wb") as out:
                started.append(subprocess.Popen(
                    [str(CELERY), "-A", "agentfootprint.distributed.worker", "worker",
                     "-n", f"w{i}@%h", "-c", "1", "--loglevel=INFO", "--without-mingle",
                     "--without-gossip", "--without-heartbeat"],
                    env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True))
        deadline = time.monotonic() + 60
        for process, log in zip(started, logs, strict=True):
            while b" ready." not in log.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"a worker did not start: {log.read_text()[-2000:]}")
                time.sleep(0.05)
        yield queue
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


async def _warm(executor: Any, store: str) -> None:
    from agentfootprint.distributed import run_many

    await run_many("_scale_agents:make_agent", ["warm"] * 8, executor=executor, store=store)


async def batch(executor: Any, store: str, n: int) -> float:
    """Runs per second of a batch of ``n`` (checked: every run answered)."""
    from agentfootprint.distributed import run_many

    messages = [f"task {i}" for i in range(n)]
    start = time.perf_counter()
    outcomes = await run_many("_scale_agents:make_agent", messages, executor=executor,
                              store=store)
    took = time.perf_counter() - start
    if [o.content for o in outcomes] != [f"done: {m}" for m in messages]:
        raise RuntimeError(f"a run went wrong: {[o for o in outcomes if o.status != 'done'][:2]}")
    return n / took


async def explain(executor: Any, result: Any, repeats: int) -> tuple[float, int]:
    """Median seconds of one localization over 50 suspects, and its re-runs."""
    from agentfootprint.explain import localize_context_bug, wrong_if

    wrong = wrong_if(contains="WRONG")
    times, runs = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        report = await localize_context_bug(
            result, is_wrong=wrong, executor=executor,
            factory=None if executor is None else "_scale_agents:make_suspect_agent")
        times.append(time.perf_counter() - start)
        if [c.members for c in report.causes] != [("f31",)]:
            raise RuntimeError(f"the culprit was not found: {report.causes}")
        runs = report.runs_used
    return statistics.median(times), runs


LONG_CALLS = 5
"""Tool calls of ``make_long_agent``'s runs (so ``2 * LONG_CALLS + 1`` durable steps)."""


def make_long_agent() -> Any:
    """``_scale_agents.make_agent`` with ``LONG_CALLS`` tool calls per run (importable as
    ``scale_out:make_long_agent``): the DBOS rows' second shape."""
    from _scale_agents import lookup

    from agentfootprint import Agent
    from agentfootprint.providers import mock

    def respond(request: Any) -> Any:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done < LONG_CALLS:
            return {"tool_calls": [{"id": f"l{done}", "name": "lookup",
                                    "args": {"ticket": done}}]}
        user = next(m["content"] for m in request.messages if m["role"] == "user")
        return f"done: {user}"

    return Agent(provider=mock(respond=respond), model="mock", tools=[lookup])


async def dbos_rows(workdir: Path, n: int) -> list[dict[str, Any]]:
    """What DBOS adds per durable step: ``n`` runs one after another (three steps each: model
    call, tool call, model call) in-process and as DBOS workflows with a SQLite system
    database, both recording to a SQLite run store; the difference per step (µs, the
    workflow's own rows included) and per run. Also sealed (``seal_key=``: every DBOS record
    Fernet-encrypted)."""
    from cryptography.fernet import Fernet

    from agentfootprint.distributed import InProcessExecutor
    from agentfootprint.distributed._dbos import dbos_executor

    shapes = {"_scale_agents:make_agent": 3, "scale_out:make_long_agent": 2 * LONG_CALLS + 1}

    async def one_at_a_time(executor: Any, store: str, factory: str) -> tuple[float, float]:
        """Seconds and CPU seconds (every thread) per run, one run after another: the cost
        of the steps themselves, no lock contention (SQLite takes one writer at a time)."""
        from agentfootprint.distributed import run_many

        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            (outcome,) = await run_many(factory, [f"task {i}"], executor=executor,
                                        store=store)
            if outcome.content != f"done: task {i}":
                raise RuntimeError(f"a run went wrong: {outcome}")
        return (time.perf_counter() - start) / n, (time.process_time() - cpu) / n

    here = InProcessExecutor()
    plain = {f: await one_at_a_time(here, str(workdir / "dbos-base.db"), f) for f in shapes}
    shm = Path("/dev/shm")
    configs: list[tuple[str, bytes | None, Path]] = [
        ("dbos sqlite", None, workdir), ("dbos sealed", Fernet.generate_key(), workdir)]
    if shm.is_dir():  # the system database in memory: DBOS's cost without the disk's fsync
        configs.append(("dbos tmpfs", None, shm))
    rows: list[dict[str, Any]] = []
    for label, key, folder in configs:
        system = folder / f"af-bench-{uuid.uuid4().hex[:8]}.sys"
        executor = dbos_executor(system_database=f"sqlite:///{system}", seal_key=key)
        try:
            store = str(workdir / f"{label[5:]}.db")
            await _warm(executor, store)
            added = {}
            for factory in shapes:
                wall, cpu = await one_at_a_time(executor, store, factory)
                added[factory] = (wall - plain[factory][0], cpu - plain[factory][1])
        finally:
            executor.close()
            for leftover in folder.glob(system.name + "*"):
                leftover.unlink()
        (short, few), (long, many) = ((added[f], k) for f, k in shapes.items())
        step = [(long[i] - short[i]) / (many - few) for i in (0, 1)]
        run = [short[i] - few * step[i] for i in (0, 1)]
        rows.append({"config": label, "note": (
            f"+{step[0] * 1e6:,.0f} µs wall (+{step[1] * 1e6:,.0f} CPU) per durable step, "
            f"+{run[0] * 1e3:.1f} ms wall (+{run[1] * 1e3:.1f} CPU) per workflow "
            f"(runs of {few} and {many} steps, one at a time, vs in-process)"),
            "us_per_step": step[0] * 1e6, "cpu_us_per_step": step[1] * 1e6,
            "ms_per_workflow": run[0] * 1e3, "cpu_ms_per_workflow": run[1] * 1e3})
    return rows


async def main(quick: bool, latency_ms: float, write: bool) -> None:
    from agentfootprint.distributed import InProcessExecutor
    from agentfootprint.distributed._celery import celery_executor

    sys.path.insert(0, str(HERE))
    os.environ["AF_SCALE_LATENCY"] = str(latency_ms / 1000)
    import _scale_agents

    n = 100 if quick else 1000
    fleet = (1, 2) if quick else (1, 2, 4)
    repeats = 2 if quick else REPEATS
    print(f"scale_out: Python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), "
          f"{'quick' if quick else 'full'} run; {n} runs per batch, model latency "
          f"{latency_ms:g} ms, explanation: median of {repeats}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, redis_url(Path(tmp)) as broker:
        workdir = Path(tmp)
        result = await _scale_agents.make_suspect_agent().run("What about ticket 42?")
        store = str(workdir / "in-process.db")
        here = InProcessExecutor()
        await _warm(here, store)
        rows.append({"config": "in-process", "workers": 0,
                     "runs_per_s": await batch(here, store, n)})
        rows[-1]["explain_s"], rows[-1]["reruns"] = await explain(None, result, repeats)
        print("  in-process done", flush=True)
        for count in fleet:
            with workers(count, broker, workdir, latency_ms / 1000) as queue:
                executor = celery_executor(broker=broker, queue=queue, timeout=600)
                chunked = celery_executor(broker=broker, queue=queue, timeout=600, chunk=CHUNK)
                store = str(workdir / f"celery-{count}.db")
                await _warm(executor, store)
                row: dict[str, Any] = {"config": f"celery x{count}", "workers": count,
                                       "runs_per_s": await batch(executor, store, n),
                                       "chunked_runs_per_s": await batch(chunked, store, n)}
                row["explain_s"], row["reruns"] = await explain(executor, result, repeats)
                executor.close()
                chunked.close()
                rows.append(row)
            print(f"  {count} worker(s) done", flush=True)
        rows += await dbos_rows(workdir, n)
        print("  dbos done", flush=True)
    base = rows[0]
    print()
    header = (f"{'executor':<14} {'batch runs/s':>13} {'speed-up':>9} "
              f"{f'chunk={CHUNK} runs/s':>16} {'speed-up':>9} {'explain s':>10} "
              f"{'speed-up':>9} {'re-runs':>8}")
    lines = []
    for row in rows:
        if "note" in row:
            lines.append(f"{row['config']:<14} {row['note']}")
            continue
        up = row["runs_per_s"] / base["runs_per_s"]
        ex = base["explain_s"] / row["explain_s"]
        chunked = row.get("chunked_runs_per_s")
        shown = (f"{chunked:>16,.0f} {chunked / base['runs_per_s']:>8.2f}x" if chunked
                 else f"{'—':>16} {'':>9}")
        lines.append(f"{row['config']:<14} {row['runs_per_s']:>13,.0f} {up:>8.2f}x {shown} "
                     f"{row['explain_s']:>10.3f} {ex:>8.2f}x {row['reruns']:>8}")
    _harness.print_table(header, lines)
    if write:
        meta = _harness.run_meta(quick, latency_ms=latency_ms, n=n, cpus=os.cpu_count(),
                                 celery=_harness.installed_version("celery", "celery"))
        _harness.append_results(RESULTS, [{**meta, **row} for row in rows])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 runs, 1 and 2 workers")
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS",
                        help="each model call waits this long (default 0)")
    parser.add_argument("--no-write", action="store_true", help="do not append to results")
    options = parser.parse_args()
    asyncio.run(main(options.quick, options.latency, not options.no_write))
