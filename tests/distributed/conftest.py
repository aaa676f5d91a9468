"""Real Celery workers for the distributed tests: a Redis server and a fleet of ``celery worker``s.

``redis_server`` is ``$AGENTFOOTPRINT_REDIS_URL`` (``.ci/run`` starts one; CI never skips);
locally, without it, a ``redis-server`` of our own on a free port, stopped at the end. A
:class:`Fleet` starts workers as the README says (``celery -A agentfootprint.distributed.worker
worker``), each in a process group of its own, on a queue no other test uses, and kills every
group it started when the test ends.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery_fleet import Fleet


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    found = os.environ.get("AGENTFOOTPRINT_REDIS_URL")
    if found:
        yield found
        return
    if os.environ.get("CI"):
        pytest.fail("AGENTFOOTPRINT_REDIS_URL is unset under CI; .ci/run starts redis-server.")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs AGENTFOOTPRINT_REDIS_URL or a redis-server binary")
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="af-redis-")
    server = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def fleet(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Two workers of two pool processes each, shared by a test module (30 s visibility)."""
    made = Fleet(redis_server, tmp_path_factory.mktemp("fleet"), visibility_timeout=30.0)
    try:
        made.start("w1")
        made.start("w2")
        yield made
    finally:
        made.close()


@pytest.fixture
def own_fleet(redis_server: str, tmp_path: Path) -> Iterator[Callable[[float], Fleet]]:
    """Workers of a test's own (started by the test), with the visibility timeout it needs."""
    made: list[Fleet] = []

    def make(visibility_timeout: float) -> Fleet:
        fleet = Fleet(redis_server, tmp_path, visibility_timeout=visibility_timeout)
        made.append(fleet)
        return fleet

    try:
        yield make
    finally:
        for fleet in made:
            fleet.close()
