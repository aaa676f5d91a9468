"""The runner's isolation level: detected at start, stated to the model, refused when missing.

The sandbox must start on this host (CI fails here otherwise); hiding or breaking bubblewrap
makes the default refuse with a message naming the fix; ``isolation="process"`` is the only
way to the weaker level, and says so in the tool's description.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfootprint import Agent, ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.runs import Recording
from agentfootprint.tools._code_runner import RunLimits, code_runner, run_python

sandbox = importlib.import_module("agentfootprint.tools._sandbox")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the sandbox is made of Linux namespaces")


@pytest.fixture
def fresh_detection() -> Iterator[None]:
    """Forget the cached detection before and after, so a faked host does not leak."""
    sandbox._sandbox.cache_clear()
    yield
    sandbox._sandbox.cache_clear()


def hide(monkeypatch: pytest.MonkeyPatch, name: str, instead: str | None = None) -> None:
    real = sandbox._locate
    monkeypatch.setattr(sandbox, "_locate",
                        lambda wanted: instead if wanted == name else real(wanted))


def test_the_sandbox_starts_on_this_host(fresh_detection: None) -> None:
    """The default level is available here: CI fails if the runner would refuse on its host."""
    confinement = sandbox.confinement_for("sandbox")
    assert confinement.level == "sandbox"
    if os.geteuid() == 0:
        assert confinement.uid == 65534 and "uid 65534, not the agent's" in confinement.summary
    if platform.machine() in ("x86_64", "aarch64"):
        assert "a seccomp filter refuses ptrace" in confinement.summary
    tool = code_runner()
    assert tool.isolation == confinement.summary
    assert "bubblewrap sandbox" in tool.description and "no network" in tool.description


@pytest.mark.parametrize("missing", ["bwrap", "prlimit", "setpriv"])
async def test_without_its_mechanism_the_runner_refuses_naming_the_fix(
        monkeypatch: pytest.MonkeyPatch, fresh_detection: None, missing: str) -> None:
    """No bubblewrap (or helper): building the tool and running a program both refuse."""
    hide(monkeypatch, missing)
    with pytest.raises(ConfigurationError, match=missing) as refused:
        code_runner()
    assert "isolation='process'" in str(refused.value)
    assert "apt-get install bubblewrap" in str(refused.value)
    with pytest.raises(ConfigurationError, match=missing):
        await run_python("print(1)")


def test_a_broken_sandbox_is_refused(monkeypatch: pytest.MonkeyPatch,
                                     fresh_detection: None) -> None:
    """A bwrap that cannot start the interpreter is found at start, not at the first call."""
    hide(monkeypatch, "bwrap", instead="/bin/false")
    with pytest.raises(ConfigurationError, match="does not work on this host"):
        code_runner()


async def test_the_weaker_level_must_be_asked_for_and_says_what_it_is(
        monkeypatch: pytest.MonkeyPatch, fresh_detection: None) -> None:
    """``isolation="process"`` works without bubblewrap and tells the model it is no sandbox."""
    hide(monkeypatch, "bwrap")
    tool = code_runner(isolation="process", timeout=5)
    assert "NOT sandboxed" in tool.description and "agent's own user" in tool.description
    assert "isolated" not in tool.description
    ran = await run_python("import os; print(os.getuid())", isolation="process",
                           limits=RunLimits(timeout=5))
    assert ran.stdout.strip() == str(os.geteuid())


@pytest.mark.parametrize("options", [{"isolation": "strict"}, {"isolation": None},
                                     {"disk_mb": 0}, {"max_processes": 1}])
def test_bad_isolation_options_are_refused(options: dict[str, object]) -> None:
    """An unknown level or an impossible bound fails at construction, naming the value."""
    with pytest.raises(ConfigurationError, match=next(iter(options))):
        code_runner(**options)  # type: ignore[arg-type]


def test_an_interpreter_that_is_not_there_is_refused_at_start() -> None:
    """``python=`` naming no executable fails when the tool is built."""
    with pytest.raises(ConfigurationError, match="/nonexistent/python3"):
        code_runner(python="/nonexistent/python3")


async def test_the_recording_states_the_isolation_in_force() -> None:
    """The tool description the model was given — with the level — is in the run's recording."""
    provider = mock(script=[
        {"tool_calls": [{"name": "run_code", "args": {"code": "print(2 + 2)"}}]}, "It is 4."])
    tool = code_runner()
    result = await Agent(provider=provider, model="m", tools=[tool]).run("2 + 2?")
    recorded = json.dumps(Recording.of(result).model_dump(mode="json"))
    assert json.dumps(tool.isolation)[1:-1] in recorded
    assert "bubblewrap sandbox" in recorded and "fresh, isolated process" not in recorded


async def test_a_process_level_run_makes_the_agent_non_dumpable(
        fresh_detection: None) -> None:
    """At the weaker level the child shares the agent's uid: the agent's /proc is closed to it."""
    await run_python("print(1)", isolation="process", limits=RunLimits(timeout=5))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


async def test_killing_the_agent_kills_its_sandbox() -> None:
    """An agent killed mid-call (kill -9) leaves no sandboxed process running."""
    marker = "orphan-" + uuid.uuid4().hex
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import asyncio, sys\n"
        "from agentfootprint.tools._code_runner import RunLimits, run_python\n"
        "asyncio.run(run_python(sys.argv[1], limits=RunLimits(timeout=60)))\n",
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        "time.sleep(60)\n")
    try:
        deadline = time.monotonic() + 30
        while not _holding(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert _holding(marker), "the sandboxed program never started"
        agent.kill()
        await agent.wait()
        deadline = time.monotonic() + 5
        while _holding(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not _holding(marker), "the sandbox outlived its agent"
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()


def _holding(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes() \
                    and (entry / "stat").read_text().split(")")[-1].split()[0] != "Z":
                return True
        except OSError:
            continue
    return False
