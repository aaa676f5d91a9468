"""The escape suite: hostile programs against the default sandbox, each blocked with a clear result.

Each test runs what a model could send — reading the agent's secrets, memory or files, killing
it, calling out, leaving processes behind, exhausting CPU, memory, disk, processes or output —
and asserts from the host side that it failed, that the call returned in bounded time, and
that the result says what happened. Not skipped on Linux: a host where the sandbox cannot
start fails here (with the runner's own refusal message), as CI must.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import ToolContext
from agentfootprint.tools._code_runner import (
    Execution,
    RunLimits,
    code_runner,
    dispatch_script_call,
    run_python,
)
from agentfootprint.tools._registry import ToolRegistry

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the sandbox is made of Linux namespaces")

AGENT = os.getpid()
REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-live-ESCAPE-" + uuid.uuid4().hex


async def escape(program: str, *, timeout: float = 10.0, **limits: int) -> Execution:
    """Run ``program`` in the default sandbox; the call itself must come back in bounded time."""
    started = time.monotonic()
    ran = await run_python(program, limits=RunLimits(timeout=timeout, **limits))
    assert time.monotonic() - started < timeout + 5, "the runner hung past its own timeout"
    return ran


def lines(ran: Execution) -> dict[str, str]:
    """The program's ``key value`` report lines as a dict (its stderr shown on failure)."""
    report = dict(line.split(" ", 1) for line in ran.stdout.splitlines() if " " in line)
    assert report, f"the program reported nothing; stderr: {ran.stderr[-600:]}"
    return report


def new_scope() -> dict[str, Any]:
    return {}


def host_pids_with(marker: str) -> list[int]:
    """Live host processes whose command line carries ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == AGENT:
            continue
        try:
            if marker.encode() not in (entry / "cmdline").read_bytes():
                continue
            if (entry / "stat").read_text().split(")")[-1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def all_gone(marker: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while host_pids_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- the agent's secrets, memory and files -------------------------------------------------------


SCAN = (
    "import os\n"
    "secret = os.environ['AGENT_MARK'][::-1].encode()  # reversed: not in any environ itself\n"
    "seen = 0\n"
    "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
    "    for name in ('environ', 'cmdline'):\n"
    "        try:\n"
    "            seen += open(f'/proc/{pid}/{name}', 'rb').read().count(secret)\n"
    "        except OSError:\n"
    "            pass\n"
    "try:\n"
    "    seen += open(f'/proc/{os.getppid()}/environ', 'rb').read().count(secret)\n"
    "except OSError:\n"
    "    pass\n"
    "try:\n"
    "    open(f'/proc/{os.environ[\"AGENT_PID\"]}/environ', 'rb').read()\n"
    "    agent = 'READ'\n"
    "except OSError as exc:\n"
    "    agent = type(exc).__name__\n"
    "print('seen', seen)\nprint('agent', agent)\nprint('uid', os.getuid())\n"
    "print('key', os.environ.get('OPENAI_API_KEY'))\n")
AGENT_WITH_A_KEY = (
    "import asyncio, os, sys\n"
    "from agentfootprint.tools._code_runner import run_python\n"
    "ran = asyncio.run(run_python(sys.argv[1], isolation=sys.argv[2], env={\n"
    "    'AGENT_PID': str(os.getpid()), 'AGENT_MARK': sys.argv[3][::-1]}))\n"
    "print(ran.stdout, ran.stderr)\n")


async def test_the_agents_environment_is_out_of_reach() -> None:
    """An agent started with its API key in its environment (the usual deployment): no /proc
    entry the program can read holds the key, the agent's pid is absent, the uid is not root."""
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", AGENT_WITH_A_KEY, SCAN, "sandbox", SECRET,
        env={**os.environ, "OPENAI_API_KEY": SECRET}, stdout=subprocess.PIPE)
    stdout, _ = await asyncio.wait_for(agent.communicate(), 60)
    report = dict(line.split(" ", 1) for line in stdout.decode().splitlines() if " " in line)
    assert report.get("seen") == "0", stdout.decode()
    assert report["agent"] in ("FileNotFoundError", "PermissionError")
    assert report["uid"] == "65534" and report["key"] == "None"
    assert SECRET not in stdout.decode()


async def test_the_agents_memory_is_out_of_reach() -> None:
    """/proc/<agent>/mem, process_vm_readv and ptrace on the agent all fail; no privileges held."""
    ran = await escape(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "try:\n"
        f"    open('/proc/{AGENT}/mem', 'rb').read(16)\n"
        "    print('mem READ')\n"
        "except OSError as exc:\n"
        "    print('mem', type(exc).__name__)\n"
        "buf = ctypes.create_string_buffer(64)\n"
        "class IOVec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "local = IOVec(ctypes.cast(buf, ctypes.c_void_p), 64)\n"
        "remote = IOVec(ctypes.c_void_p(0x400000), 64)\n"
        f"got = libc.process_vm_readv({AGENT}, ctypes.byref(local), 1,\n"
        "                            ctypes.byref(remote), 1, 0)\n"
        "print('vm_readv', got, ctypes.get_errno())\n"
        f"got = libc.ptrace(0x4206, {AGENT}, None, None)\n"  # PTRACE_SEIZE: never stops it
        "print('ptrace', got, ctypes.get_errno())\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
        "print('nnp', status['NoNewPrivs'].strip())\nprint('caps', status['CapEff'].strip())\n")
    report = lines(ran)
    assert report["mem"] in ("FileNotFoundError", "PermissionError")
    assert report["vm_readv"].split()[0] == "-1" and report["ptrace"].split()[0] == "-1"
    assert report["nnp"] == "1" and int(report["caps"], 16) == 0


@pytest.fixture
def run_store(tmp_path: Path) -> Iterator[Path]:
    """A run-store SQLite file on the host, holding a secret row."""
    path = tmp_path / "runs.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO runs VALUES ('run-1', ?)", (SECRET,))
        db.commit()
    yield path


async def test_files_outside_the_scratch_are_out_of_reach(run_store: Path) -> None:
    """The run store, /root, the repository and the host's /tmp are not there; the system is
    read-only; the run store is byte for byte unchanged afterwards."""
    before = hashlib.sha256(run_store.read_bytes()).hexdigest()
    planted = "escape-" + uuid.uuid4().hex
    targets = {"store": str(run_store), "store_dir": str(run_store.parent),
               "pyproject": str(REPO / "pyproject.toml"), "src": str(REPO / "src"),
               "root_listing": "/root", "shadow": "/etc/shadow", "passwd": "/etc/passwd"}
    ran = await escape(
        "import os, sys\n"
        f"targets = {targets!r}\n"
        "for key, path in targets.items():\n"
        "    try:\n"
        "        if os.path.isdir(path):\n"
        "            shown = [n for n in os.listdir(path) if n != '.pyenv']\n"
        "            print(key, 'LISTED' if shown else 'empty')\n"
        "        else:\n"
        "            open(path, 'rb').read()\n"
        "            print(key, 'READ')\n"
        "    except OSError as exc:\n"
        "        print(key, type(exc).__name__)\n"
        f"for key, path in (('store_write', targets['store']), ('usr_write', '/usr/{planted}'),\n"
        f"                  ('prefix_write', os.path.join(sys.prefix, {planted!r}))):\n"
        "    try:\n"
        "        open(path, 'ab').write(b'x')\n"
        "        print(key, 'WROTE')\n"
        "    except OSError as exc:\n"
        "        print(key, type(exc).__name__)\n"
        "open('mine.txt', 'w').write('scratch is writable')\n"
        "print('scratch', os.getcwd(), open('mine.txt').read().replace(' ', '_'))\n")
    report = lines(ran)
    for key in targets:
        assert report[key] in ("FileNotFoundError", "PermissionError", "empty"), (key, report)
    for key in ("store_write", "usr_write", "prefix_write"):
        assert report[key] in ("FileNotFoundError", "PermissionError", "OSError"), (key, report)
    assert report["scratch"] == "/scratch scratch_is_writable"
    assert hashlib.sha256(run_store.read_bytes()).hexdigest() == before
    assert not Path(sys.prefix, planted).exists() and not Path("/usr", planted).exists()


# -- the agent's process, the network, leftovers ------------------------------------------------


async def test_the_agent_cannot_be_signalled_or_killed() -> None:
    """kill() on the agent, on a host process of the sandbox's uid, and kill(-1) reach nobody."""
    as_nobody = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    bystander = subprocess.Popen(["sleep", "30"], **as_nobody)  # type: ignore[call-overload]
    try:
        ran = await escape(
            "import os, signal\n"
            f"for key, pid in (('agent', {AGENT}), ('bystander', {bystander.pid})):\n"
            "    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n"
            "        print(key, 'SIGNALLED')\n"
            "    except OSError as exc:\n"
            "        print(key, type(exc).__name__)\n"
            "print('done yes', flush=True)\n"
            # kill everything it can — only where the agent is invisible, so that a broken
            # sandbox fails this test instead of killing the host's processes
            f"if os.getuid() != 0 and not os.path.exists('/proc/{AGENT}'):\n"
            "    os.kill(-1, signal.SIGKILL)\n")
        report = lines(ran)
        assert report["agent"] == "ProcessLookupError" and report["done"] == "yes"
        assert report["bystander"] == "ProcessLookupError"
        time.sleep(0.2)
        assert bystander.poll() is None, "a host process of the sandbox's uid was killed"
    finally:
        bystander.kill()
        bystander.wait()


async def test_the_network_is_out_of_reach() -> None:
    """A loopback TCP server, the host's own address and an abstract unix socket are unreachable."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    abstract = socket.socket(socket.AF_UNIX)
    name = "\0agentfootprint-escape-" + uuid.uuid4().hex
    abstract.bind(name)
    abstract.listen()
    abstract.setblocking(False)
    port = server.getsockname()[1]
    try:
        ran = await escape(
            "import socket\n"
            f"for key, family, where in (('loopback', socket.AF_INET, ('127.0.0.1', {port})),\n"
            f"        ('any', socket.AF_INET, ('0.0.0.0', {port})),\n"
            "        ('outside', socket.AF_INET, ('1.1.1.1', 53)),\n"
            f"        ('abstract', socket.AF_UNIX, {name!r})):\n"
            "    s = socket.socket(family)\n"
            "    s.settimeout(2)\n"
            "    try:\n"
            "        s.connect(where)\n"
            "        print(key, 'CONNECTED')\n"
            "    except OSError as exc:\n"
            "        print(key, type(exc).__name__)\n"
            "print('interfaces', [n for _, n in socket.if_nameindex()])\n", timeout=15)
        report = lines(ran)
        for key in ("loopback", "any", "outside", "abstract"):
            assert report[key] != "CONNECTED" and report[key].endswith(("Error", "timeout")), \
                (key, report)
        assert report["interfaces"] == "['lo']"
        for listener in (server, abstract):
            with pytest.raises(BlockingIOError):
                listener.accept()
    finally:
        server.close()
        abstract.close()


async def test_a_daemonized_process_is_gone_when_the_call_returns() -> None:
    """A double-forked, setsid'd sleeper does not outlive the call, nor delay it."""
    marker = "daemon-" + uuid.uuid4().hex
    ran = await escape(
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', "
        f"{marker!r}])\n"
        "    os._exit(0)\n"
        "import time; time.sleep(0.3)\n"
        "print('parent leaving', flush=True)\n", timeout=20)
    assert ran.exit_code == 0 and ran.duration_ms < 5000
    assert all_gone(marker), "a daemonized process outlived the call"


# -- exhaustion ------------------------------------------------------------------------------------


async def test_a_fork_bomb_is_capped_and_cleaned_up() -> None:
    """Forking stops at ``max_processes``; a true bomb ends at the timeout with nothing left."""
    marker = "bomb-" + uuid.uuid4().hex
    counted = await escape(
        "import os, sys, time\n"
        "made = 0\n"
        "while True:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('refused_after', made, flush=True)\n"
        "        print('errno', exc.errno, flush=True)\n"
        "        break\n"
        "    if pid == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', "
        f"{marker!r}])\n"
        "    made += 1\n", max_processes=16)
    report = lines(counted)
    assert int(report["refused_after"]) < 16 and report["errno"] == "11"  # EAGAIN
    assert all_gone(marker)
    bomb = await escape("import os\nwhile True:\n    try:\n        os.fork()\n"
                        "    except OSError:\n        pass\n", timeout=3, max_processes=32)
    assert bomb.timed_out and bomb.exit_code == -9
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still forks


async def test_a_cpu_loop_is_stopped_with_a_clear_result() -> None:
    """A busy loop ends at the wall-clock limit; the model reads that it timed out."""
    tool = code_runner(timeout=2)
    result = await dispatch_script_call(
        ToolRegistry([tool]), {"id": "c", "name": "run_code",
                               "args": {"code": "while True:\n    pass"}},
        ToolContext("c", 1, "r"), new_scope(), turn=1)
    assert result.facts is not None and result.facts.timed_out and not result.facts.ok
    assert "[timed out after 2 s: the program was stopped" in result.outcome.content


async def test_a_memory_hog_is_stopped_with_a_clear_result() -> None:
    """Allocating without end dies of MemoryError at the per-process limit."""
    ran = await escape("chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))",
                       memory_mb=128)
    assert ran.out_of_memory and not ran.timed_out and ran.exit_code == 1


async def test_a_disk_flood_fills_only_the_scratch() -> None:
    """Writing without end meets ENOSPC at ``disk_mb`` in the scratch and in /dev/shm."""
    ran = await escape(
        "import os\n"
        "chunk = b'x' * (1024 * 1024)\n"
        "for key, path in (('scratch', 'flood.bin'), ('shm', '/dev/shm/flood.bin'),\n"
        "                  ('tmp', '/tmp/flood2.bin')):\n"
        "    written = 0\n"
        "    try:\n"
        "        with open(path, 'wb') as out:\n"
        "            while written < 1024:\n"
        "                out.write(chunk)\n"
        "                out.flush()\n"
        "                written += 1\n"
        "    except OSError as exc:\n"
        "        print(key, written, exc.errno)\n"
        "    else:\n"
        "        print(key, written, 'unbounded')\n"
        "    if key == 'scratch':\n"
        "        os.remove(path)\n", disk_mb=8)
    report = lines(ran)
    written, errno = report["scratch"].split()
    assert int(written) <= 8 and errno == "28"  # ENOSPC
    written, errno = report["shm"].split()
    assert int(written) <= 16 and errno == "28"
    written, errno = report["tmp"].split()  # /tmp is the scratch, or read-only when the
    # interpreter itself lives under /tmp (a checkout in a temporary folder)
    assert (int(written) <= 8 and errno == "28") or (written == "0" and errno in ("13", "30"))


async def test_an_output_flood_is_stopped_at_once_with_a_clear_result() -> None:
    """Endless printing is cut at ``max_output_bytes``, long before the timeout."""
    tool = code_runner(timeout=30)
    started = time.monotonic()
    result = await dispatch_script_call(
        ToolRegistry([tool]), {"id": "c", "name": "run_code",
                               "args": {"code": "while True:\n    print('x' * 10000)"}},
        ToolContext("c", 1, "r"), new_scope(), turn=1)
    assert time.monotonic() - started < 10
    facts = result.facts
    assert facts is not None and not facts.ok and not facts.timed_out and facts.truncated
    assert facts.stdout_bytes > 1024 * 1024
    assert result.outcome.content.endswith(
        "[stopped: the program wrote more than 1,048,576 bytes to one stream; print less, "
        "then call run_code again]")


async def test_concurrent_sandboxes_do_not_see_each_other() -> None:
    """Two calls at once: each sees only its own processes and its own scratch."""
    program = ("import os, time\nopen('mine', 'w').write(str(os.getpid()))\ntime.sleep(0.5)\n"
               "print('procs', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
               "print('files', sorted(os.listdir('.')))\n")
    first, second = await asyncio.gather(escape(program), escape(program))
    for ran in (first, second):
        report = lines(ran)
        assert report["files"] == "['main.py', 'mine']"
        assert int(report["procs"]) <= 4  # bwrap's init, the shell, the program (and /proc/self)


async def test_the_signal_exit_status_reads_as_a_signal() -> None:
    """A program killed by a signal reports a negative exit code, as a plain subprocess does."""
    ran = await escape("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)")
    assert ran.exit_code == -signal.SIGTERM


async def test_kernel_surface_calls_are_refused_and_ordinary_ones_work() -> None:
    """The seccomp layer: a new user namespace, mount and ptrace fail with EPERM; threads,
    subprocesses and a multiprocessing pool (clone without namespace flags) still work."""
    ran = await escape(
        "import ctypes, multiprocessing, subprocess, sys, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"  # CLONE_NEWUSER
        "print('mount', libc.mount(b'none', b'/scratch', b'tmpfs', 0, None), ctypes.get_errno())\n"
        "print('ptrace', libc.ptrace(0, 0, None, None), ctypes.get_errno())\n"  # TRACEME
        "print('seccomp', [l.split()[1] for l in open('/proc/self/status')\n"
        "                  if l.startswith('Seccomp:')][0])\n"
        "box = []\nt = threading.Thread(target=box.append, args=(1,))\nt.start()\nt.join()\n"
        "print('thread', box)\n"
        "print('child', subprocess.run([sys.executable, '-c', 'print(7)'],\n"
        "                              capture_output=True, text=True).stdout.strip())\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.Pool(2) as pool:\n"
        "        print('pool', pool.map(abs, [-1, -2]))\n")
    report = lines(ran)
    for call in ("unshare", "mount", "ptrace"):
        assert report[call] == "-1 1", (call, report)  # EPERM
    assert report["seccomp"] == "2"
    assert (report["thread"], report["child"], report["pool"]) == ("[1]", "7", "[1, 2]")


async def test_the_kernel_limits_are_in_force_inside() -> None:
    """CPU seconds, address space, processes and core size are the program's own rlimits."""
    ran = await escape(
        "import resource\n"
        "for name in ('CPU', 'AS', 'NPROC', 'CORE'):\n"
        "    print(name, *resource.getrlimit(getattr(resource, 'RLIMIT_' + name)))\n",
        timeout=4, memory_mb=96, max_processes=24)
    report = lines(ran)
    assert report["CPU"] == "5 6" and report["AS"] == f"{96 << 20} {96 << 20}"
    assert report["NPROC"] == "24 24" and report["CORE"] == "0 0"
