"""A fleet of real ``celery worker`` processes for the distributed tests (see conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELERY = Path(sys.executable).with_name("celery")


class Fleet:
    """Celery workers serving one queue of their own, sharing ``workdir`` with the test."""

    def __init__(self, broker: str, workdir: Path, *, visibility_timeout: float) -> None:
        self.broker = broker
        self.workdir = workdir
        self.queue = f"aftest-{uuid.uuid4().hex[:12]}"
        self.visibility_timeout = visibility_timeout
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        return {**os.environ, "PYTHONPATH": path, "AF_FLEET_DIR": str(self.workdir),
                "AGENTFOOTPRINT_BROKER_URL": self.broker, "AGENTFOOTPRINT_QUEUE": self.queue,
                "AGENTFOOTPRINT_VISIBILITY_TIMEOUT": str(self.visibility_timeout)}

    def start(self, name: str, *, concurrency: int = 2) -> subprocess.Popen[bytes]:
        """Start worker ``name`` (the command the README gives) and wait until it is ready."""
        log = self.workdir / f"worker-{name}.log"
        with log.open("wb") as out:
            process = self._popen(name, concurrency, out)
        self.workers[name] = process
        deadline = time.monotonic() + 30
        while b" ready." not in log.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {name} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        return process

    def _popen(self, name: str, concurrency: int, out: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(CELERY), "-A", "agentfootprint.distributed.worker", "worker",
             "-n", f"{name}@%h", "-c", str(concurrency), "--loglevel=INFO",
             "--without-mingle", "--without-gossip", "--without-heartbeat"],
            env=self.env(), cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)

    def kill(self, name: str) -> None:
        """SIGKILL worker ``name`` and its pool children (its whole process group)."""
        process = self.workers[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def children(self, name: str) -> set[int]:
        """The pids of worker ``name``'s pool processes."""
        pid = self.workers[name].pid
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry.name))
        return found

    def close(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(2)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # its pool children too
            process.wait(10)
