"""``agentfootprint serve`` as a user starts it, for the tests that need the real server.

``LiveServer(store=..., workdir=...)`` runs the command in a subprocess on a free 127.0.0.1
port (the agent: ``serve_factories.py`` in this folder unless ``target`` says otherwise),
waits until ``/healthz`` answers, and ``stop()`` sends SIGTERM and reaps it (SIGKILL after
15 s), so a test leaves no process behind. Everything the process writes (uvicorn's access
log, the app's warnings) goes to ``log``, which the leak checks read.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}
"""principal -> API key, as ``$AGENTFOOTPRINT_API_KEYS`` gives them to the server."""


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bearer(principal: str = "alice") -> dict[str, str]:
    """The Authorization header of ``principal``'s key."""
    return {"Authorization": f"Bearer {KEYS[principal]}"}


class LiveServer:
    """One ``agentfootprint serve`` process; a context manager that stops it on exit."""

    def __init__(self, *, sessions: str, workdir: Path, target: str = "serve_factories:make_agent",
                 args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(HERE), os.environ.get("PYTHONPATH", "")]),
            "AGENTFOOTPRINT_API_KEYS": ",".join(f"{k}={p}" for p, k in KEYS.items()),
            **(env or {})}
        self.log = workdir / f"server-{self.port}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "import sys; from agentfootprint.cli import main; "
                 "sys.exit(main())", "serve", target, "--port", str(self.port),
                 "--sessions", sessions, "--request-timeout", "20", *args],
                cwd=workdir, env=environ, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server never answered: {self.log.read_text()}")
            time.sleep(0.1)

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM (the runs under way finish), then reap; SIGKILL after 15 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def client(self, principal: str = "alice") -> httpx.Client:
        """An httpx client of this server with ``principal``'s key."""
        return httpx.Client(base_url=self.url, timeout=20, headers=bearer(principal))
