"""``kill -9`` at random points of 50 runs with tools, then every run resumed to completion.

Each run is a worker process (``kill_worker.py``) on one SQLite run store, killed with SIGKILL
at a random moment after it is in the store (or left to finish). Afterwards, from this process:
every run is listed; each one killed resumes with ``agent.resume(run_id)`` to ``done``; the
idempotent ``charge`` applied each call's effect exactly once (never twice: counted by
idempotency key); the undeclared ``notify`` never ran twice for a call, and every ``notify``
call killed mid-execution is recorded as "outcome unknown".
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from kill_worker import STEPS, build, effects

from agentfootprint.runs import RunStore, trace

HERE = Path(__file__).parent
RUNS = 50
AT_ONCE = 6


def _spawn(workdir: Path, run_id: str, seed: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(HERE / "kill_worker.py"), str(workdir), run_id,
                             str(seed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_at_random(workdir: Path, ids: list[str], rng: random.Random) -> int:
    """Run every worker; SIGKILL each at a random moment once it is in the store. Returns how
    many were killed (some after their run had ended, before the process exited)."""
    waiting = list(ids)
    live: dict[str, tuple[subprocess.Popen[bytes], float | None, float]] = {}
    killed = 0
    while waiting or live:
        while waiting and len(live) < AT_ONCE:
            run_id = waiting.pop(0)
            live[run_id] = (_spawn(workdir, run_id, rng.randrange(1 << 30)), None,
                            time.monotonic() + 60)
        time.sleep(0.005)
        for run_id, (proc, kill_at, deadline) in list(live.items()):
            now = time.monotonic()
            if proc.poll() is not None:
                _, err = proc.communicate()
                assert proc.returncode == 0, f"worker {run_id} failed: {err.decode()[-2000:]}"
                del live[run_id]
            elif kill_at is None and (workdir / f"ready-{run_id}").exists():
                live[run_id] = (proc, now + rng.uniform(0.0, 0.4), deadline)
            elif kill_at is not None and now >= kill_at:
                proc.send_signal(signal.SIGKILL)
                proc.communicate()
                killed += proc.returncode == -signal.SIGKILL
                del live[run_id]
            elif now > deadline:
                proc.kill()
                raise AssertionError(f"worker {run_id} never got into the store in 60 s")
    return killed


def _statuses(recording_log: object) -> dict[str, str]:
    found: dict[str, str] = {}
    for record in getattr(recording_log, "records", ()):
        for change in record.changes:
            if change.key == trace.TOOL_RESULTS and change.op == "set":
                found.update({r["tool_call_id"]: r["status"] for r in change.value})
    return found


async def test_kill_9_at_random_points_then_every_run_resumes(tmp_path: Path) -> None:
    ids = [f"kill-{n:02d}" for n in range(RUNS)]
    killed = _kill_at_random(tmp_path, ids, random.Random(16))
    with RunStore(tmp_path / "runs.db") as store:
        listed = {r.run_id: r.status for r in store.list(limit=RUNS * 2)}
        assert sorted(listed) == ids  # every run is in the store, killed or not
        assert set(listed.values()) <= {"running", "done"}
        interrupted = [run_id for run_id, status in listed.items() if status == "running"]
        assert len(interrupted) >= RUNS // 5, (killed, listed)  # most kills land mid-run
        for run_id in interrupted:
            result = await build(tmp_path, store).resume(run_id)
            assert (result.status, result.content) == ("done", "all done"), run_id
        assert {r.status for r in store.list(limit=RUNS * 2)} == {"done"}
        statuses = {run_id: _statuses(store.load(run_id).commit_log()) for run_id in ids}
    db = effects(tmp_path)
    applied = Counter(key for (key,) in db.execute("SELECT key FROM applied"))
    charges = {f"{run_id}:s{step}-{j}" for run_id in ids for step, batch in enumerate(STEPS)
               for j, (name, _) in enumerate(batch) if name == "charge"}
    assert applied == Counter(charges)  # every charge exactly once: re-run with its key
    phases = Counter(db.execute("SELECT key, phase FROM notify").fetchall())
    assert max(phases.values()) == 1  # a notify call never ran twice
    cut = sorted(key for (key, phase) in phases if phase == "enter"
                 and (key, "exit") not in phases)
    for key in cut:
        run_id, call_id = key.rsplit(":", 1)
        assert statuses[run_id][call_id] == "outcome-unknown", key
    unknown = sum(s == "outcome-unknown" for found in statuses.values() for s in found.values())
    print(f"{killed} of {RUNS} workers killed, {len(interrupted)} runs interrupted and resumed, "
          f"{len(cut)} calls killed inside notify, {unknown} calls recorded outcome unknown")
