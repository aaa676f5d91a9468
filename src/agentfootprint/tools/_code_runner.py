"""A tool that runs the model's Python program in a sandbox, and says exactly how isolated it is.

Why: the model's code must not share the agent's memory, secrets, files, network or event loop.
By default each call runs ``python -I -X utf8 main.py`` in a bubblewrap sandbox
(:mod:`._sandbox`: own PID, network and mount namespaces, a separate unprivileged uid, a
read-only system, a size-limited scratch directory, rlimits on CPU, memory and processes); the
whole sandbox dies with the call. Where that cannot start, the runner refuses to be built
(``ConfigurationError`` naming the fix) unless the user accepts ``isolation="process"``: a plain
subprocess, described to the model as NOT sandboxed. The tool description — which the
recording keeps — states the level in force. On top, a wall-time limit, an output cap per
stream, and a hard stop for a program flooding its output. A program over
``MAX_SCRIPT_BYTES`` is refused unrun, with a result that names the limit.

The runner's facts (:class:`~agentfootprint.tools._scripts.RunnerOutcome`) carry sizes, a hash,
exit status and durations — never the code. :func:`dispatch_script_call` is how a dispatch
loop runs a call of any declared code-running tool: it dispatches it and files the call's row
through the ledger's one writer.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import hashlib
import math
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigurationError
from ..providers._base import ToolCall
from ._registry import ToolOutcome, ToolRegistry
from ._sandbox import (
    ISOLATION_LEVELS,
    SCRATCH,
    Confinement,
    Isolation,
    Limits,
    confinement_for,
    cpu_seconds,
    forbid_same_uid_reads,
)
from ._scripts import (
    ABSENT,
    MAX_SCRIPT_BYTES,
    CallSettlement,
    RunnerOutcome,
    ScriptCall,
    ScriptScope,
    ToolScript,
    program_in,
    record_script_row,
    script_of,
    script_row_for,
    utf8_length,
)
from ._tool import Tool, ToolContext, define_tool

__all__ = [
    "CodeRunnerTool",
    "Execution",
    "RunLimits",
    "ScriptDispatch",
    "code_runner",
    "dispatch_script_call",
    "run_python",
]

_POSIX: Final = os.name == "posix"
_GRACE_SECONDS: Final = 2.0
"""How long the pipes may take to close once the program's group was killed."""
_POLL_SECONDS: Final = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """What one run may use."""

    timeout: float = 10.0
    """Wall-clock seconds before the process group is killed."""
    memory_mb: int | None = 512
    """Address-space limit in MiB (POSIX only); ``None``: no limit."""
    max_output_chars: int = 4000
    """Characters kept per stream: stdout from its start, stderr from its end."""
    max_output_bytes: int = 1024 * 1024
    """Bytes one stream may carry before the program is stopped (an output flood)."""
    disk_mb: int = 64
    """Size of the sandbox's scratch directory in MiB (``sandbox`` isolation)."""
    max_processes: int = 64
    """Processes and threads the program may have at once (``sandbox`` isolation). An agent
    running as root runs every sandbox as uid 65534, and the kernel counts that uid's
    processes together: sandboxes running at the same moment share this budget."""


@dataclass(frozen=True, slots=True)
class Execution:
    """What one run of a program produced, output already clipped to the limits."""

    stdout: str
    stderr: str
    exit_code: int
    """Negative: killed by that signal (in a sandbox: a status over 128, as a shell reads it)."""
    timed_out: bool
    out_of_memory: bool
    duration_ms: float
    stdout_bytes: int
    stderr_bytes: int
    stdout_clipped: bool
    stderr_clipped: bool
    flooded: bool = False
    """Stopped for writing more than ``max_output_bytes`` to one stream."""


async def run_python(code: str, *, limits: RunLimits | None = None, python: str | None = None,
                     env: Mapping[str, str] | None = None,
                     isolation: Isolation = "sandbox") -> Execution:
    """Run ``code`` as ``main.py`` in a fresh scratch directory that is gone afterwards.

    ``isolation="sandbox"`` (the default) raises ``ConfigurationError`` when the sandbox cannot
    start on this host; ``"process"`` runs a plain subprocess (see the module docstring).
    Never raises for anything the program does; a program still running at ``timeout`` (or
    when the caller is cancelled) is killed with everything it started.
    """
    limits = limits or RunLimits()
    confinement = await asyncio.to_thread(confinement_for, isolation, python)
    if confinement.level == "process":
        with tempfile.TemporaryDirectory(prefix="agentfootprint-run-",
                                         ignore_cleanup_errors=True) as workdir:
            Path(workdir, "main.py").write_bytes(code.encode("utf-8", "surrogatepass"))
            return await _execute(
                [confinement.python, "-I", "-X", "utf8", "main.py"], limits, cwd=workdir,
                env=_environment(workdir, env, os.environ.get("PATH", os.defpath)),
                preexec_fn=_limiter(limits) if _POSIX else None, pass_fds=())
    rlimits = Limits(cpu_seconds=cpu_seconds(limits.timeout), memory_mb=limits.memory_mb,
                     max_processes=limits.max_processes, disk_mb=limits.disk_mb)
    path = os.pathsep.join([os.path.dirname(confinement.python), "/usr/local/bin", "/usr/bin",
                            "/bin"])
    with confinement.launch(code.encode("utf-8", "surrogatepass"), rlimits) as (argv, fds):
        return await _execute(argv, limits, cwd=None, env=_environment(SCRATCH, env, path),
                              preexec_fn=None, pass_fds=fds, shell_status=True)


async def _execute(argv: list[str], limits: RunLimits, *, cwd: str | None,
                   env: dict[str, str], preexec_fn: Callable[[], None] | None,
                   pass_fds: tuple[int, ...], shell_status: bool = False) -> Execution:
    keep = limits.max_output_chars * 4  # UTF-8 takes at most 4 bytes per character
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    transport, run = await loop.subprocess_exec(
        lambda: _Run(keep, limits.max_output_bytes), *argv, cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=_POSIX,
        preexec_fn=preexec_fn, pass_fds=pass_fds)
    timed_out = False
    try:
        try:
            await asyncio.wait_for(run.exited.wait(), limits.timeout)
        except TimeoutError:
            timed_out = True
        duration_ms = (time.monotonic() - started) * 1000
        _kill_group(transport)  # the program, or what it left running in the background
        with contextlib.suppress(TimeoutError):  # a child that escaped the group
            await asyncio.wait_for(run.finished(), _GRACE_SECONDS)
    finally:
        _kill_group(transport)
        try:  # let the loop reap it (cancelled mid-run), or close() would reap it under it
            if transport.get_returncode() is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(run.exited.wait(), _GRACE_SECONDS)
        finally:
            transport.close()
    stdout, out_clipped = run.out.text(limits.max_output_chars)
    stderr, err_clipped = run.err.text(limits.max_output_chars)
    returncode = transport.get_returncode()
    exit_code = returncode if returncode is not None else -9  # reported as killed
    if shell_status and 128 < exit_code <= 128 + 64:
        exit_code = 128 - exit_code  # the sandbox's shell reports signal N as 128 + N
    timed_out = timed_out and not run.flooded
    out_of_memory = exit_code != 0 and not timed_out and _memory_error(stderr)
    return Execution(stdout, stderr, exit_code, timed_out, out_of_memory, duration_ms,
                     run.out.total, run.err.total, out_clipped or run.flooded, err_clipped,
                     run.flooded)


def _environment(home: str, extra: Mapping[str, str] | None, path: str) -> dict[str, str]:
    """A minimal environment: the host's secrets (API keys, tokens) never reach the program."""
    env = {"PATH": path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
    for name in ("SYSTEMROOT", "SystemRoot"):  # Windows cannot start Python without it
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra or {})
    return env


def _limiter(limits: RunLimits) -> Callable[[], None]:
    """The ``process`` child's limits, applied between fork and exec (imported beforehand)."""
    import resource

    forbid_same_uid_reads()  # the child runs as this user: keep it out of this /proc
    seconds = cpu_seconds(limits.timeout)
    wanted = [(resource.RLIMIT_CPU, seconds, seconds + 1), (resource.RLIMIT_CORE, 0, 0)]
    if limits.memory_mb is not None:
        size = limits.memory_mb * 1024 * 1024
        wanted.append((resource.RLIMIT_AS, size, size))

    def apply() -> None:
        for which, soft, hard in wanted:
            _, ceiling = resource.getrlimit(which)  # an unprivileged process cannot raise it
            if ceiling != resource.RLIM_INFINITY:
                soft, hard = min(soft, ceiling), min(hard, ceiling)
            resource.setrlimit(which, (soft, hard))

    return apply


def _kill_group(transport: asyncio.SubprocessTransport) -> None:
    try:
        if _POSIX:
            os.killpg(transport.get_pid(), signal.SIGKILL)
        elif transport.get_returncode() is None:
            transport.kill()
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


@dataclass(slots=True)
class _Captured:
    """One output stream: its first (or last) ``keep`` bytes and how many bytes it had."""

    keep: int
    tail: bool
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.tail:
            self.data += chunk
            del self.data[: -self.keep]
        elif len(self.data) < self.keep:
            self.data += chunk[: self.keep - len(self.data)]

    def text(self, max_chars: int) -> tuple[str, bool]:
        """The decoded text within ``max_chars``, and whether anything was cut."""
        data = bytes(self.data)
        clipped = self.total > len(data)
        if self.tail:
            start = 0
            while clipped and start < len(data) and data[start] & 0xC0 == 0x80:
                start += 1  # the cut went through a character
            text = data[start:].decode("utf-8", "replace")
            return (text[-max_chars:], True) if len(text) > max_chars else (text, clipped)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data, final=not clipped)
        return (text[:max_chars], True) if len(text) > max_chars else (text, clipped)


class _Run(asyncio.SubprocessProtocol):
    """Collects one process's output; knows when it exited and when its pipes closed.

    A stream passing ``flood`` bytes stops the program at once (``flooded``).
    """

    def __init__(self, keep: int, flood: int) -> None:
        self.out = _Captured(keep, tail=False)
        self.err = _Captured(keep, tail=True)
        self.exited = asyncio.Event()
        self.flooded = False
        self._flood = flood
        self._transport: asyncio.SubprocessTransport | None = None
        self._open = {1, 2}
        self._closed = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.SubprocessTransport):
            self._transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        stream = self.out if fd == 1 else self.err
        stream.add(chunk)
        if stream.total > self._flood and not self.flooded:
            self.flooded = True
            if self._transport is not None:
                _kill_group(self._transport)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open:
            self._closed.set()

    def process_exited(self) -> None:
        self.exited.set()

    async def finished(self) -> None:
        """The process exited and both pipes are drained."""
        await self.exited.wait()
        await self._closed.wait()


def _memory_error(stderr: str) -> bool:
    """The program died of ``MemoryError`` (the usual end of a program over ``RLIMIT_AS``)."""
    lines = stderr.strip().splitlines()
    return bool(lines) and lines[-1].startswith("MemoryError")


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRunnerTool(Tool):
    """A tool that runs code: its ``script`` declaration tells the dispatch loop to file rows."""

    script: ToolScript
    limits: RunLimits
    isolation: str
    """Where its programs run, in the words its description gives the model."""


@dataclass(slots=True)
class _CallSlot:
    submitted: object = ABSENT
    facts: RunnerOutcome | None = None


_call_slot: contextvars.ContextVar[_CallSlot | None] = contextvars.ContextVar(
    "code_runner_call", default=None)
"""Set by :func:`dispatch_script_call` around one dispatch: where the runner leaves its facts."""


def code_runner(*, name: str = "run_code", description: str | None = None,
                timeout: float = 10.0, memory_mb: int | None = 512,
                max_output_chars: int = 4000, python: str | None = None,
                env: Mapping[str, str] | None = None, isolation: Isolation = "sandbox",
                disk_mb: int = 64, max_processes: int = 64) -> CodeRunnerTool:
    """A tool that runs a Python program (argument ``code``) and returns what it printed.

    Each call is a fresh sandbox with a fresh scratch directory: nothing persists between calls.
    ``isolation="sandbox"`` (the default) is detected and proven here: when it cannot run on
    this host, this raises ``ConfigurationError`` naming the fix, unless you pass
    ``isolation="process"`` to accept a plain, unsandboxed subprocess. ``memory_mb`` is per
    process; ``disk_mb`` and ``max_processes`` bound the sandbox. ``env`` adds variables to
    the program's minimal environment; ``python`` picks another interpreter.
    """
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ConfigurationError(f"code_runner timeout={timeout!r} must be a positive number "
                                 "of seconds")
    if memory_mb is not None and (not isinstance(memory_mb, int) or memory_mb < 32):
        raise ConfigurationError(f"code_runner memory_mb={memory_mb!r} is too small for Python "
                                 "to start; use 32 or more, or None for no limit")
    if memory_mb is not None and not _POSIX:
        raise ConfigurationError("code_runner memory_mb needs a POSIX system (RLIMIT_AS); pass "
                                 "memory_mb=None to run without a memory limit")
    if not isinstance(max_output_chars, int) or max_output_chars < 1:
        raise ConfigurationError(f"code_runner max_output_chars={max_output_chars!r} must be a "
                                 "positive number of characters")
    if not isinstance(disk_mb, int) or isinstance(disk_mb, bool) or disk_mb < 1:
        raise ConfigurationError(f"code_runner disk_mb={disk_mb!r} must be a positive number "
                                 "of MiB for the scratch directory")
    if not isinstance(max_processes, int) or isinstance(max_processes, bool) \
            or max_processes < 4:
        raise ConfigurationError(f"code_runner max_processes={max_processes!r} is too few to "
                                 "start the program; use 4 or more")
    if isolation not in ISOLATION_LEVELS:
        raise ConfigurationError(
            f"code_runner isolation={isolation!r} is not a level; use 'sandbox' (the default) "
            "or 'process' (a plain subprocess, not sandboxed)")
    confinement = confinement_for(isolation, python)  # refuses here, before any agent runs
    limits = RunLimits(timeout=float(timeout), memory_mb=memory_mb,
                       max_output_chars=max_output_chars, disk_mb=disk_mb,
                       max_processes=max_processes)
    script = ToolScript(argument="code", language="python")
    text = description or _describe(confinement, limits)
    schema = {"type": "object", "additionalProperties": False, "required": ["code"],
              "properties": {"code": {"type": "string",
                                      "description": "The Python program to run."}}}

    async def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        code = args.get(script.argument)
        slot = _call_slot.get()
        if slot is not None:
            slot.submitted = code
        if not isinstance(code, str):
            return f"{name} needs 'code': the Python program to run, as a string."
        return await _run(name, code, limits, python, env, isolation, slot)

    base = define_tool(name, text, schema, execute)
    return CodeRunnerTool(base.name, base.description, base.input_schema, base.execute,
                          base.validate, base.check_in, script=script, limits=limits,
                          isolation=confinement.summary)


def _describe(confinement: Confinement, limits: RunLimits) -> str:
    """The tool description: what the program may do, where it runs, and every limit."""
    memory = f"{limits.memory_mb} MiB of memory per process, " \
        if limits.memory_mb is not None else ""
    sandbox = f"{limits.max_processes} processes, {limits.disk_mb} MiB of scratch disk, " \
        if confinement.level == "sandbox" else ""
    return (
        f"Run a complete Python 3 program and read what it prints (stdout, then stderr). It "
        f"runs {confinement.summary}. Nothing persists between calls: define and print "
        f"everything you need in one program. Limits: {limits.timeout:g} s, {memory}{sandbox}"
        f"{limits.max_output_chars} characters of output per stream, {MAX_SCRIPT_BYTES} bytes "
        "of program.")


async def _run(name: str, code: str, limits: RunLimits, python: str | None,
               env: Mapping[str, str] | None, isolation: Isolation,
               slot: _CallSlot | None) -> str:
    size = utf8_length(code)
    digest = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
    if size > MAX_SCRIPT_BYTES:
        if slot is not None:
            slot.facts = RunnerOutcome(language="python", bytes=size, sha256=digest, ok=False,
                                       refused="too-large")
        return (f"Refused: the program is {size:,} bytes (UTF-8), over the "
                f"{MAX_SCRIPT_BYTES:,}-byte limit (MAX_SCRIPT_BYTES) of {name}; nothing was run. "
                "Send a shorter program.")
    ran = await run_python(code, limits=limits, python=python, env=env, isolation=isolation)
    if slot is not None:
        slot.facts = RunnerOutcome(
            language="python", bytes=size, sha256=digest,
            ok=ran.exit_code == 0 and not ran.timed_out and not ran.flooded,
            exit_code=ran.exit_code,
            timed_out=ran.timed_out, out_of_memory=ran.out_of_memory,
            duration_ms=round(ran.duration_ms, 3), stdout_bytes=ran.stdout_bytes,
            stderr_bytes=ran.stderr_bytes, truncated=ran.stdout_clipped or ran.stderr_clipped)
    return _render(name, ran, limits)


def _render(name: str, ran: Execution, limits: RunLimits) -> str:
    """What the model reads: stdout, a stderr block, and a line saying how the run ended."""
    cap = limits.max_output_chars
    parts: list[str] = []
    if ran.stdout:
        parts.append(ran.stdout.rstrip("\n"))
    if ran.stdout_clipped:
        parts.append(f"[stdout clipped: showing its first {cap} characters of "
                     f"{ran.stdout_bytes:,} bytes]")
    if ran.stderr:
        parts.append("stderr:\n" + ran.stderr.rstrip("\n"))
    if ran.stderr_clipped:
        parts.append(f"[stderr clipped: showing its last {cap} characters of "
                     f"{ran.stderr_bytes:,} bytes]")
    if ran.flooded:
        parts.append(f"[stopped: the program wrote more than {limits.max_output_bytes:,} bytes "
                     f"to one stream; print less, then call {name} again]")
    elif ran.timed_out:
        parts.append(f"[timed out after {limits.timeout:g} s: the program was stopped; make it "
                     f"faster or do less, then call {name} again]")
    elif ran.out_of_memory:
        parts.append(f"[out of memory: the program passed its {limits.memory_mb} MiB limit; use "
                     f"less memory, then call {name} again]")
    elif ran.exit_code != 0:
        parts.append(f"[exit {ran.exit_code}] the program failed; read stderr, fix it and call "
                     f"{name} again")
    return "\n".join(parts) if parts else "(the program printed nothing)"


@dataclass(frozen=True, slots=True)
class ScriptDispatch:
    """One dispatched call: what the model reads, and for a code-running tool its bookkeeping."""

    outcome: ToolOutcome
    facts: RunnerOutcome | None = None
    """The runner's facts, when its tool ran or refused the program."""
    dispatch: int | None = None
    """The ledger dispatch the call's row was filed under; ``None``: no row (see below)."""
    code_run: dict[str, Any] | None = None
    """The ``tools.code_run`` event payload (no code in it), when there are facts."""


async def dispatch_script_call(registry: ToolRegistry, call: ToolCall, ctx: ToolContext,
                               scope: ScriptScope, *, turn: int,
                               dispatch: int | None = None,
                               proposed: object = ABSENT) -> ScriptDispatch:
    """Dispatch one call; for a declared code-running tool, file its row with the one writer.

    ``dispatch`` names the paused dispatch this call settles; ``proposed`` is the program as
    the model proposed it, before any rule rewrote ``call`` (default: ``call``'s own). No row
    is filed for a tool that runs no code, a call whose program is not a string, or a call
    dropped from a full turn (counted in ``scripts_dropped``).
    """
    found = registry.tools.get(call["name"])
    script = script_of(found) if found is not None else None
    if script is None:
        return ScriptDispatch(await registry.dispatch(call, ctx))
    if proposed is ABSENT:
        proposed = program_in(script, call.get("args"))
    slot = _CallSlot()
    token = _call_slot.set(slot)
    try:
        outcome = await registry.dispatch(call, ctx)
    finally:
        _call_slot.reset(token)
    reached = outcome.status in ("success", "error")
    submitted = slot.submitted if slot.submitted is not ABSENT else (
        proposed if reached else ABSENT)
    draft = script_row_for(ScriptCall(
        script=script, tool=call["name"], tool_call_id=call["id"], iteration=ctx.iteration,
        turn=turn, proposed=proposed, submitted=submitted,
        settlement=_settlement(outcome, slot.facts), facts=slot.facts))
    number = record_script_row(scope, draft, dispatch=dispatch) if draft is not None else None
    code_run = None if slot.facts is None else {
        "tool": call["name"], "tool_call_id": call["id"], "iteration": ctx.iteration,
        **slot.facts.model_dump(mode="json")}
    return ScriptDispatch(outcome, slot.facts, number, code_run)


def _settlement(outcome: ToolOutcome, facts: RunnerOutcome | None) -> CallSettlement:
    if outcome.status == "invalid":
        return "invalid"
    if outcome.status != "success":
        return "error"
    if facts is None:
        return "ran"
    if facts.refused is not None:
        return "refused"
    return "ran" if facts.ok else "failed"
