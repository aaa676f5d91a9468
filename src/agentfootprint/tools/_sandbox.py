"""Where the code runner's program runs: a bubblewrap sandbox, or (if asked for) a plain process.

Why a sandbox: a program the model wrote must not read the agent's secrets (its environment and
memory under ``/proc``), its files or run store, signal it, reach the network, or outlive its
call. Linux gives each of those a kernel mechanism; Debian's ``bubblewrap`` (``bwrap``) sets
them up, and util-linux's ``prlimit`` and ``setpriv`` finish the job inside:

* own PID, network, mount, IPC and UTS namespaces (the agent's processes and ``/proc`` entries
  do not exist there; the only network is an empty loopback of its own); when the PID
  namespace's first process ends, the kernel kills everything left in it;
* a filesystem of a read-only ``/usr`` (and the ``/bin``-style links), the interpreter's own
  prefixes read-only, a fresh ``/proc`` and ``/dev``, and a size-limited tmpfs scratch
  directory (also ``/tmp``) that vanishes with the namespace; a size-limited ``/dev/shm``;
* a separate unprivileged uid (65534) on the host when the agent runs as root; otherwise the
  agent's uid mapped to 65534 inside a user namespace (a user cannot switch uid without
  privilege) — :attr:`Confinement.summary` says which;
* no capabilities, ``no_new_privs`` (no setuid gain, no ptrace of anything outside), a
  seccomp filter (:mod:`._seccomp`: ptrace, namespaces, mounts, keyrings, bpf, io_uring), and
  rlimits on CPU seconds, address space, process count (fork bombs) and core dumps;
* the program's parent is a shell inside the sandbox, so ``/proc/<ppid>`` is nothing of the
  agent's.

:func:`confinement_for` detects the mechanism once per interpreter and proves it by starting
that interpreter inside; when it is missing or broken the caller gets a ``ConfigurationError``
naming the cause and the fix, never a silent downgrade. ``"process"`` is the weaker level a
user must ask for by name; its summary says plainly what it does not protect.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ..errors import ConfigurationError
from ._seccomp import seccomp_filter

__all__ = ["ISOLATION_LEVELS", "SCRATCH", "Confinement", "Isolation", "Limits",
           "confinement_for", "cpu_seconds", "forbid_same_uid_reads"]

Isolation = Literal["sandbox", "process"]
"""``sandbox``: bubblewrap namespaces + separate uid (the default); ``process``: a plain child."""
ISOLATION_LEVELS: Final = ("sandbox", "process")

NOBODY: Final = 65534
SHM_BYTES: Final = 16 * 1024 * 1024
"""Size of the sandbox's ``/dev/shm``."""
SCRATCH: Final = "/scratch"
"""The program's working directory (and ``HOME``, ``TMPDIR``, ``/tmp``) inside the sandbox."""
_TMP: Final = "/tmp"  # noqa: S108 -- inside the sandbox's own mount namespace, a link to SCRATCH
_SHM: Final = "/dev/shm"  # noqa: S108 -- the sandbox's own size-limited tmpfs
_PROBE_SECONDS: Final = 20.0
_INSTALL: Final = ("install it (Debian/Ubuntu: apt-get install bubblewrap util-linux) or pass "
                   "isolation='process' to accept a plain subprocess that runs as your own user, "
                   "with your files and the network in reach")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The kernel-enforced part of one run's limits (the wall clock is the caller's)."""

    cpu_seconds: int
    memory_mb: int | None
    max_processes: int
    disk_mb: int


@dataclass(frozen=True, slots=True)
class Confinement:
    """How programs run: the level in force and the exact words that say so."""

    level: Isolation
    summary: str
    """One sentence for the model and the recording: what the program can and cannot reach."""
    uid: int
    """The host uid the program runs as."""
    python: str
    _bwrap_prefix: tuple[str, ...] = ()
    _helpers: tuple[str, ...] = ()
    """``prlimit``, ``setpriv`` and ``sh``, found when the sandbox was detected."""
    _as_root: bool = False
    _seccomp: bytes | None = None

    @contextlib.contextmanager
    def launch(self, code: bytes, limits: Limits) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        """The argv that runs ``code`` as ``main.py`` here, and the descriptors to pass it.

        Only for ``sandbox``; the caller runs a ``process`` child itself. The exit status is
        a shell's: ``128 + N`` when signal ``N`` killed the program. Nothing is left on the
        host's disk: the program travels in an unlinked file, the filter in a pipe.
        """
        with tempfile.TemporaryFile() as program:
            program.write(code)
            program.flush()
            program.seek(0)
            fds = [program.fileno()]
            if self._seccomp is not None:  # a few hundred bytes: the pipe holds them all
                read, write = os.pipe()
                os.write(write, self._seccomp)
                os.close(write)
                fds.append(read)
            try:
                yield self._command(limits, *fds), tuple(fds)
            finally:
                for fd in fds[1:]:
                    os.close(fd)

    def _command(self, limits: Limits, program_fd: int, seccomp_fd: int | None = None
                 ) -> list[str]:
        rlimits = [f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}", "--core=0:0",
                   f"--nproc={limits.max_processes}:{limits.max_processes}"]
        if limits.memory_mb is not None:
            size = limits.memory_mb * 1024 * 1024
            rlimits.append(f"--as={size}:{size}")
        drop = ["--no-new-privs", "--inh-caps=-all"]
        if self._as_root:
            drop = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                    "--bounding-set=-all", *drop]
        seccomp = [] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]
        prlimit, setpriv, sh = self._helpers
        return [
            *self._bwrap_prefix, *seccomp,
            "--perms", "1777", "--size", str(limits.disk_mb * 1024 * 1024), "--tmpfs", SCRATCH,
            "--perms", "0644", "--file", str(program_fd), f"{SCRATCH}/main.py",
            *_tmp_link(self._bwrap_prefix), "--chdir", SCRATCH, "--",
            prlimit, *rlimits, "--",
            setpriv, *drop, "--",
            # a parent inside the sandbox, so the program's parent is no agent (nor root)
            sh, "-c", '"$0" -I -X utf8 main.py; exit $?', self.python]


def confinement_for(isolation: str, python: str | None = None) -> Confinement:
    """The confinement for ``isolation``, detected (and for a sandbox proven) once per interpreter.

    Raises ``ConfigurationError`` naming the cause and the fix when a sandbox cannot start here.
    """
    if isolation not in ISOLATION_LEVELS:
        raise ConfigurationError(
            f"code_runner isolation={isolation!r} is not a level; use 'sandbox' (the default: "
            "namespaces, a separate uid, no network) or 'process' (a plain subprocess)")
    interpreter = python or sys.executable
    if not os.path.isfile(interpreter) or not os.access(interpreter, os.X_OK):
        raise ConfigurationError(f"code_runner python={interpreter!r} is not an executable "
                                 "file; pass the path of a Python interpreter")
    if isolation == "process":
        return Confinement("process", _PROCESS_SUMMARY, os.geteuid() if _POSIX else -1,
                           interpreter)
    return _sandbox(interpreter)


_POSIX: Final = os.name == "posix"
_PROCESS_SUMMARY: Final = (
    "in a separate process that is NOT sandboxed: it runs as the agent's own user, so it can "
    "read and change the files that user can, and reach the network")


def _locate(name: str) -> str | None:
    """Where a helper program is; ``None`` when it is not installed (tests hide it here)."""
    return shutil.which(name, path=os.pathsep.join(
        [os.environ.get("PATH", os.defpath), "/usr/bin", "/bin", "/usr/sbin", "/sbin"]))


def _tool(name: str) -> str:
    found = _locate(name)
    if found is None:
        raise ConfigurationError(f"code_runner isolation='sandbox' needs {name}, which is not "
                                 f"installed on this host; {_INSTALL}")
    return found


@functools.lru_cache(maxsize=8)  # a refusal raises, so it is never cached
def _sandbox(interpreter: str) -> Confinement:
    if not sys.platform.startswith("linux"):
        raise ConfigurationError(
            f"code_runner isolation='sandbox' needs Linux namespaces; this is {sys.platform!r}: "
            "pass isolation='process' to accept a plain subprocess that runs as your own user, "
            "with your files and the network in reach")
    bwrap = _locate("bwrap")
    if bwrap is None:
        raise ConfigurationError("code_runner isolation='sandbox' needs bubblewrap (bwrap), "
                                 f"which is not installed on this host; {_INSTALL}")
    as_root = os.geteuid() == 0
    prefix = [bwrap, *(() if as_root else ("--unshare-user", "--uid", str(NOBODY), "--gid",
                                           str(NOBODY), "--disable-userns", "--cap-drop", "ALL")),
              "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
              "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
              "--new-session", *_filesystem(interpreter),
              "--proc", "/proc", "--dev", "/dev",
              "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", _SHM]
    uid = NOBODY if as_root else os.geteuid()
    who = (f"as an unprivileged user (uid {NOBODY}, not the agent's)" if as_root else
           f"as the agent's uid {uid} mapped to an unprivileged user ({NOBODY}) inside a user "
           "namespace")
    seccomp = seccomp_filter()
    calls = ("; a seccomp filter refuses ptrace, namespace, mount, keyring, bpf, perf and "
             "io_uring calls" if seccomp is not None else "")
    tmp = (f"also {_TMP}" if _tmp_link(tuple(prefix)) else
           f"also TMPDIR; {_TMP} holds the read-only interpreter")
    summary = (f"in a bubblewrap sandbox {who}, in its own PID, network, mount, IPC and hostname "
               "namespaces, with no capabilities and no network (only a loopback of its own: the "
               "host's network and loopback services are unreachable), a "
               "read-only system, and only its scratch directory (the current directory, "
               f"{tmp}) writable{calls}; everything it starts is killed when it ends")
    helpers = (_tool("prlimit"), _tool("setpriv"), _tool("sh"))
    confinement = Confinement("sandbox", summary, uid, interpreter, tuple(prefix), helpers,
                              as_root, seccomp)
    _prove(confinement)
    return confinement


def _tmp_link(prefix: tuple[str, ...]) -> list[str]:
    """``/tmp`` as a link to the scratch — unless the interpreter lives under ``/tmp`` (a
    checkout in a temporary folder), whose read-only mount already made ``/tmp`` a directory;
    ``TMPDIR`` points at the scratch either way."""
    taken = any(arg == _TMP or arg.startswith(_TMP + "/") for arg in prefix)
    return [] if taken else ["--symlink", SCRATCH, _TMP]


def _filesystem(interpreter: str) -> list[str]:
    """Read-only mounts: ``/usr``, the ``/bin``-style links, and the interpreter's prefixes."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ("/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", name, name]
    made: set[str] = {"/"}
    for root in _prefixes(interpreter):
        for parent in reversed(Path(root).parents):
            if str(parent) not in made:  # bwrap would make these 0700: unreadable by the uid
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", root, root]
    return args


def _prefixes(interpreter: str) -> list[str]:
    """The directories the interpreter needs, outside ``/usr``, outermost first, no nesting."""
    candidates = {os.path.dirname(os.path.dirname(os.path.abspath(interpreter))),
                  os.path.dirname(os.path.dirname(os.path.realpath(interpreter)))}
    if os.path.realpath(interpreter) == os.path.realpath(sys.executable):
        candidates |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    config = Path(os.path.dirname(os.path.dirname(os.path.abspath(interpreter))), "pyvenv.cfg")
    if config.is_file():  # a venv: its base interpreter lives where ``home`` says
        for line in config.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                home = os.path.realpath(value.strip())
                candidates.add(os.path.dirname(home))
    kept: list[str] = []
    for path in sorted({os.path.realpath(c) for c in candidates} | candidates, key=len):
        if not os.path.isdir(path) or path in ("/", "/usr") or path.startswith("/usr/"):
            continue
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _prove(confinement: Confinement) -> None:
    """Start the interpreter in the sandbox once; it must find the same prefix as on the host."""
    expected = _host_prefix(confinement.python)
    limits = Limits(cpu_seconds=math.ceil(_PROBE_SECONDS), memory_mb=None, max_processes=16,
                    disk_mb=1)
    with confinement.launch(b"import sys; print(sys.prefix)", limits) as (argv, fds):
        try:
            done = subprocess.run(argv, pass_fds=fds, stdin=subprocess.DEVNULL,  # noqa: S603
                                  capture_output=True, timeout=_PROBE_SECONDS, check=False,
                                  env={"PATH": os.defpath, "LANG": "C.UTF-8"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigurationError(
                f"code_runner isolation='sandbox' could not start bubblewrap on this host "
                f"({exc}); {_INSTALL}") from exc
    seen = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or seen != expected:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or
               [f"the interpreter saw prefix {seen!r}, not {expected!r}"])[-1][:200]
        raise ConfigurationError(
            f"code_runner isolation='sandbox' does not work on this host with python="
            f"{confinement.python!r} ({why}); make unprivileged user namespaces available or run "
            f"the agent as root, or {_INSTALL.split(' or ', 1)[1]}")


def _host_prefix(interpreter: str) -> str:
    if os.path.realpath(interpreter) == os.path.realpath(sys.executable) and \
            os.path.abspath(interpreter) == os.path.abspath(sys.executable):
        return sys.prefix
    done = subprocess.run([interpreter, "-I", "-c", "import sys; print(sys.prefix)"],  # noqa: S603
                          capture_output=True, timeout=_PROBE_SECONDS, check=False)
    return done.stdout.decode(errors="replace").strip()


_PR_SET_DUMPABLE: Final = 4


@functools.cache
def forbid_same_uid_reads() -> bool:
    """Make this process non-dumpable: a same-uid program can no longer read its ``/proc``.

    Used for the ``process`` level (on Linux), where the program runs as the agent's user;
    it also disables core dumps and same-uid debuggers attaching. ``True`` when it took effect.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def cpu_seconds(timeout: float) -> int:
    """The CPU-time rlimit for a wall-clock ``timeout``: one second more, whole seconds."""
    return math.ceil(timeout) + 1
