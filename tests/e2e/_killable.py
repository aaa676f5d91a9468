"""One child process of a kill-and-recover test, run until it answers or asks to be killed.

The child prints ``KILLME`` when it has reached the point to die at (this kills its whole
process group with SIGKILL, as a crash would) or ``DONE <answer>`` when it finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def run_child(module: str, env: dict[str, str]) -> tuple[str, int | None]:
    """Run ``module.child_main()``; ``("killed", rc)`` or ``(answer, rc)``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import {module} as a; a.child_main()"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            if line.startswith("KILLME"):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                return "killed", proc.returncode
            if line.startswith("DONE "):
                proc.wait(10)
                return line[5:], proc.returncode
            if time.monotonic() > deadline:
                break
        proc.wait(10)
        err = proc.stderr.read() if proc.stderr is not None else ""
        raise AssertionError(f"child ended without an answer (rc {proc.returncode}): "
                             f"{err[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
