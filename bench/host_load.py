"""Host load: N concurrent conversations against ``serve_app`` on loopback (mock provider).

    python bench/host_load.py                    # N = 10, 100, 1000 x 1 and 4 workers, SQLite
    python bench/host_load.py --postgres         # ... and on PostgreSQL (pgserver, or
                                                 #     $AGENTFOOTPRINT_PG_URL)
    python bench/host_load.py --quick            # N = 10, 100 only

Each conversation starts a session, sends ``--turns`` messages one after another (each turn:
a tool call, then the answer ``turn <k>: <message>``), then reads its transcript; the N
conversations run at once from one client process (httpx, one connection each). Sessions live
in one shared store (a SQLite file, or PostgreSQL) and every run is recorded to a shared run
store of the same kind, as a deployment would; the conversations belong to 50 principals
(API keys), so the per-principal limit is not what is measured.

Figures per configuration: p50/p99 latency of a turn (the POST of a message, client side),
throughput (turns/s over the whole phase), memory per session (the server processes' RSS
after minus before, over N), and whether any session was lost or crossed: each conversation
checks that every reply has its turn number and its own message, that its transcript is
exactly its own messages and answers numbered 1..k, and each principal's session list holds
exactly its own sessions. A failed check is counted, never raised.

The profile table: one more pass per store and worker count at N = 100 with every server
thread under cProfile (``time.thread_time``: CPU, waiting costs nothing), each worker's stats
dumped at shutdown. A function's own time goes to the agentfootprint package folder its file
is in (``flow/`` is the engine, ``runs/`` the recording and run store); time in code outside
the package (the standard library, C builtins, Starlette, the database drivers) goes to the
package folder of its nearest agentfootprint caller, split by the caller edges' cumulative
time, or to "outside" when no agentfootprint function is above it (uvicorn, the event loop).
Profiling slows the server down (~2x), so its latencies are not reported.

The machine these figures come from is shared (2 cores, other jobs running): the client, the
server workers and the database all share those cores, so 4 workers cannot be faster than 2
would be; read ratios and medians, not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import pstats
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _harness

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "host_load.jsonl"
PRINCIPALS = 50
KEYS = {f"p{i:02d}": f"host-load-key-{i:02d}-0123456789" for i in range(PRINCIPALS)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Outcome:
    """One configuration's measurements."""

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    turns: int = 0
    failed: list[str] = field(default_factory=list)
    rss_before: int = 0
    rss_after: int = 0
    shares: dict[str, float] = field(default_factory=dict)


class Server:
    """``_host_server.py`` in a subprocess; ``stop()`` is SIGTERM then reap."""

    def __init__(self, workdir: Path, workers: int, sessions: str, env: dict[str, str],
                 profile_dir: Path | None) -> None:
        import httpx

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(
            [str(HERE), os.environ.get("PYTHONPATH", "")]),
            "AGENTFOOTPRINT_API_KEYS": ",".join(f"{k}={p}" for p, k in KEYS.items())}
        args = [sys.executable, str(HERE / "_host_server.py"), str(self.port), str(workers),
                sessions] + ([str(profile_dir)] if profile_dir else [])
        self.log = (workdir / "server.log").open("wb")
        self.process = subprocess.Popen(args, cwd=workdir, env=environ, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited: {(workdir / 'server.log').read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("the server never answered /healthz")
            time.sleep(0.2)

    def rss(self) -> int:
        """Resident memory of the server and its worker processes, in bytes."""
        import psutil

        root = psutil.Process(self.process.pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=180)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


async def _conversation(client: Any, index: int, turns: int, outcome: Outcome) -> str | None:
    """One conversation; its session id, after checking every reply and its transcript."""
    principal = f"p{index % PRINCIPALS:02d}"
    headers = {"Authorization": f"Bearer {KEYS[principal]}"}
    started = await client.post("/sessions", headers=headers)
    if started.status_code != 201:
        outcome.failed.append(f"conversation {index}: start answered {started.status_code}")
        return None
    session = started.json()["id"]
    expected: list[tuple[int, str, str]] = []
    for turn in range(1, turns + 1):
        message = f"conversation {index} message {turn} {uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        reply = await client.post(f"/sessions/{session}/messages", headers=headers,
                                  json={"message": message})
        outcome.latencies.append(time.perf_counter() - t0)
        body = reply.json() if reply.status_code == 200 else {}
        answer = f"turn {turn}: {message}"
        if body.get("turn") != turn or body.get("answer") != answer:
            outcome.failed.append(f"conversation {index} turn {turn}: {reply.status_code} "
                                  f"{reply.text[:200]}")
            return session
        outcome.turns += 1
        expected += [(turn, "user", message), (turn, "assistant", answer)]
    transcript = await client.get(f"/sessions/{session}/transcript", headers=headers)
    got = [(e["turn"], e["role"], e["content"]) for e in transcript.json().get("entries", [])]
    if got != expected:
        outcome.failed.append(f"conversation {index}: transcript is not its own: {got[:4]}")
    return session


async def _load(url: str, n: int, turns: int, outcome: Outcome, *,
                measured: bool = True) -> dict[str, set[str]]:
    import httpx

    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    phase = {"x-host-load": "measure" if measured else "warm-up"}
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits,
                                 headers=phase) as client:
        t0 = time.perf_counter()
        sessions = await asyncio.gather(*(_conversation(client, i, turns, outcome)
                                          for i in range(n)))
        outcome.wall = time.perf_counter() - t0
        owned: dict[str, set[str]] = defaultdict(set)
        for index, session in enumerate(sessions):
            if session is not None:
                owned[f"p{index % PRINCIPALS:02d}"].add(session)
        for principal in sorted(owned):
            listed = await client.get("/sessions", params={"limit": 1000}, headers={
                "Authorization": f"Bearer {KEYS[principal]}"})
            found = listed.json()["sessions"]
            mine = {s["id"] for s in found}
            if not owned[principal] <= mine or any(s["owner"] != principal for s in found):
                outcome.failed.append(f"{principal}'s session list is not its own")
        return owned


IDLE = frozenset({"<method 'get' of '_queue.SimpleQueue' objects>",
                  "<method 'acquire' of '_thread.lock' objects>",
                  "<method 'poll' of 'select.epoll' objects>", "<built-in method time.sleep>"})
"""Where a thread waits. ``time.thread_time`` charges waiting nothing, but a thread still
waiting when its stats are taken (a pool thread in ``get``) is closed with the main thread's
clock, a meaningless figure: these are left out."""


def attribute(stats: pstats.Stats) -> dict[str, float]:
    """CPU seconds by owner: the agentfootprint folder of a function's file, or of its nearest
    agentfootprint caller (split by the caller edges' cumulative time), else ``outside``."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    memo: dict[Any, dict[str, float]] = {}

    def folder(func: Any) -> str | None:
        name = str(func[0]).replace("\\", "/")
        if "/agentfootprint/" not in name:
            return None
        part = name.split("/agentfootprint/", 1)[1]
        return part.split("/", 1)[0] if "/" in part else "agentfootprint (top)"

    def owners(func: Any, depth: int = 0) -> dict[str, float]:
        if func in memo:
            return memo[func]
        own = folder(func)
        if own is not None:
            return {own: 1.0}
        callers = table.get(func, (0, 0, 0, 0, {}))[4]
        total = sum(edge[3] for edge in callers.values())
        if depth > 40 or not callers or total <= 0:
            return {"outside": 1.0}
        memo[func] = {"outside": 1.0}  # a cycle through this function: outside
        mix: dict[str, float] = defaultdict(float)
        for caller, edge in callers.items():
            for owner, part in owners(caller, depth + 1).items():
                mix[owner] += part * edge[3] / total
        memo[func] = dict(mix)
        return memo[func]

    seconds: dict[str, float] = defaultdict(float)
    for func, (_, _, own_time, _, _) in table.items():
        if func[2] in IDLE:
            continue
        for owner, part in owners(func).items():
            seconds[owner] += own_time * part
    return dict(seconds)


def _shares(profile_dir: Path) -> dict[str, float]:
    files = sorted(profile_dir.glob("*.prof"))
    if not files:
        return {}
    stats = pstats.Stats(*(str(f) for f in files))
    seconds = attribute(stats)
    total = sum(seconds.values()) or 1.0
    return {owner: value / total for owner, value in seconds.items()} | {"cpu_s": total}


def run_config(store: str, workers: int, n: int, turns: int, *, pg_url: str | None,
               profile: bool) -> Outcome:
    """Start a fresh server on a fresh store, warm it, run the N conversations, stop it."""
    workdir = Path(tempfile.mkdtemp(prefix="host-load-"))
    env: dict[str, str] = {}
    if store == "sqlite":
        sessions = f"sqlite:{workdir / 'sessions.db'}"
        env["AF_HOST_RUNS"] = str(workdir / "runs.db")
    else:
        assert pg_url is not None
        sessions = pg_url
        env["AF_HOST_RUNS"] = pg_url
        env["AF_HOST_SCHEMA"] = f"hostload_{uuid.uuid4().hex[:12]}"
    profile_dir = workdir / "profiles" if profile else None
    if profile_dir:
        profile_dir.mkdir()
    outcome = Outcome()
    server = Server(workdir, workers, sessions, env, profile_dir)
    try:
        asyncio.run(_load(server.url, 4 * workers, 1, Outcome(), measured=False))  # warm
        outcome.rss_before = server.rss()
        asyncio.run(_load(server.url, n, turns, outcome))
        outcome.rss_after = server.rss()
    finally:
        server.stop()
    if profile_dir:
        outcome.shares = _shares(profile_dir)
    if store == "postgres" and pg_url:
        _drop_schema(pg_url, env["AF_HOST_SCHEMA"])
    shutil.rmtree(workdir, ignore_errors=True)
    return outcome


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _pg_url(workdir: Path) -> tuple[str, dict[str, str] | None]:
    """``$AGENTFOOTPRINT_PG_URL``, or a pgserver this script starts (and stops at the end)."""
    found = os.environ.get("AGENTFOOTPRINT_PG_URL")
    if found:
        return found, None
    env = {**os.environ, "PG_SERVER_DIR": str(workdir / "pg"),
           "PYTHON": str(Path(sys.executable))}
    script = ROOT / ".ci" / "pg-server.sh"
    subprocess.run([str(script), "start"], env=env, check=True, capture_output=True)
    url = subprocess.run([str(script), "url"], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()
    return url, env


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 10 and 100 only")
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL")
    parser.add_argument("--only-postgres", action="store_true", help="PostgreSQL only")
    parser.add_argument("--n", default=None, help="comma-separated N (default 10,100,1000)")
    parser.add_argument("--workers", default="1,4", help="comma-separated worker counts")
    parser.add_argument("--turns", type=int, default=3, help="turns per conversation")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled passes")
    parser.add_argument("--no-write", action="store_true", help="do not append to results")
    options = parser.parse_args(argv)
    sizes = [int(x) for x in (options.n or ("10,100" if options.quick else "10,100,1000"))
             .split(",")]
    worker_counts = [int(x) for x in options.workers.split(",")]
    stores = (["postgres"] if options.only_postgres
              else ["sqlite", "postgres"] if options.postgres else ["sqlite"])
    print(f"host_load: Python {platform.python_version()}, {os.cpu_count()} CPUs (shared with "
          f"other jobs), {options.turns} turns per conversation, mock provider, loopback; "
          "client and servers on the same cores")
    scratch = Path(tempfile.mkdtemp(prefix="host-load-pg-"))
    pg_url, pg_env = (None, None)
    if "postgres" in stores:
        pg_url, pg_env = _pg_url(scratch)
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    shares: list[str] = []
    header = (f"{'store':8} {'workers':>7} {'N':>5} {'turns':>6} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'turns/s':>8} {'KiB/session':>11} {'lost/crossed':>12}")
    try:
        for store in stores:
            for workers in worker_counts:
                for n in sizes:
                    got = run_config(store, workers, n, options.turns, pg_url=pg_url,
                                     profile=False)
                    lat = sorted(got.latencies) or [0.0]
                    p50 = statistics.median(lat) * 1000
                    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000
                    rate = got.turns / got.wall if got.wall else 0.0
                    per = (got.rss_after - got.rss_before) / n / 1024
                    line = (f"{store:8} {workers:>7} {n:>5} {got.turns:>6} {p50:>8.1f} "
                            f"{p99:>8.1f} {rate:>8.1f} {per:>11.1f} {len(got.failed):>12}")
                    print(line, flush=True)
                    for failure in got.failed[:5]:
                        print(f"    {failure}")
                    lines.append(line)
                    rows.append({"store": store, "workers": workers, "n": n,
                                 "turns": got.turns, "p50_ms": p50, "p99_ms": p99,
                                 "turns_per_s": rate, "kib_per_session": per,
                                 "failed": len(got.failed)})
                if not options.no_profile:
                    got = run_config(store, workers, 100, options.turns, pg_url=pg_url,
                                     profile=True)
                    s = got.shares
                    shares.append(
                        f"{store:8} {workers:>7} {s.get('cpu_s', 0):>7.1f} "
                        f"{100 * s.get('flow', 0):>6.1f} {100 * s.get('runs', 0):>6.1f} "
                        f"{100 * (s.get('flow', 0) + s.get('runs', 0)):>10.1f} "
                        f"{100 * s.get('agent', 0):>6.1f} {100 * s.get('serve', 0):>6.1f} "
                        f"{100 * s.get('outside', 0):>8.1f}")
                    print(shares[-1], flush=True)
                    rows.append({"store": store, "workers": workers, "n": 100,
                                 "profile_shares": s})
    finally:
        if pg_env is not None:
            subprocess.run([str(ROOT / ".ci" / "pg-server.sh"), "stop"], env=pg_env,
                           check=False, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    _harness.print_table(header, lines)
    if shares:
        print("\nserver CPU by owner at N=100 (cProfile, every thread; % of the server's CPU)")
        _harness.print_table(f"{'store':8} {'workers':>7} {'cpu s':>7} {'flow/':>6} "
                             f"{'runs/':>6} {'flow+runs':>10} {'agent/':>6} {'serve/':>6} "
                             f"{'outside':>8}", shares)
    if not options.no_write:
        meta = _harness.run_meta(options.quick, cpus=os.cpu_count(), turns=options.turns)
        _harness.append_results(RESULTS, [{**meta, **row} for row in rows])


if __name__ == "__main__":
    main()
