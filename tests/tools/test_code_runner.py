"""The code-running tool: real sandboxed runs, their limits, and one ledger row per dispatch."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, ToolContext, define_tool
from agentfootprint.providers import mock
from agentfootprint.tools._code_runner import (
    CodeRunnerTool,
    RunLimits,
    ScriptDispatch,
    code_runner,
    dispatch_script_call,
    run_python,
)
from agentfootprint.tools._registry import ToolRegistry
from agentfootprint.tools._scripts import (
    DROPPED_KEY,
    LEDGER_KEY,
    MAX_SCRIPT_BYTES,
    MAX_SCRIPT_ROWS,
    ScriptCall,
    ToolScript,
    check_script_ledger,
    record_script_row,
    script_row_for,
    script_rows_of_turn,
    utf8_length,
)

code_runner_module = importlib.import_module("agentfootprint.tools._code_runner")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the default sandbox is made of Linux namespaces")

MARKER = "SECRET_PROGRAM_MARKER_7f3a"


async def dispatch(code: Any, *, scope: dict[str, Any] | None = None, turn: int = 1,
                   call_id: str = "call-1", runner: CodeRunnerTool | None = None,
                   extra: dict[str, Any] | None = None, number: int | None = None,
                   ) -> tuple[ScriptDispatch, dict[str, Any]]:
    scope = {} if scope is None else scope
    tool = runner or code_runner(timeout=5)
    args = {"code": code, **(extra or {})}
    result = await dispatch_script_call(
        ToolRegistry([tool]), {"id": call_id, "name": tool.name, "args": args},
        ToolContext(call_id, 2, "run-1"), scope, turn=turn, dispatch=number)
    return result, scope


def holding(marker: str) -> list[int]:
    """Host pids whose command line carries ``marker`` (sandboxed pids are not the host's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return [pid for pid in found if pid != os.getpid()]


def gone(marker: str, within: float = 5.0) -> bool:
    """No host process carries ``marker`` (a zombie waiting for init counts as gone)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in holding(marker):
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    if stat.read().split(")")[-1].split()[0] != "Z":
                        alive.append(pid)
            except OSError:
                continue
        if not alive:
            return True
        time.sleep(0.05)
    return False


def sleeper(marker: str) -> str:
    """Program text starting a 60 s child that carries ``marker`` on its command line."""
    return ("import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
            f"{marker!r}])\n")


# -- running -----------------------------------------------------------------------------------


async def test_an_ok_program_returns_its_output_and_files_a_ran_row() -> None:
    """stdout comes back as the result; the row carries the program and the runner's facts."""
    result, scope = await dispatch("print(6 * 7)\nprint('héllo')")
    assert result.outcome.content == "42\nhéllo"
    assert result.outcome.status == "success" and not result.outcome.error
    facts = result.facts
    assert facts is not None and facts.ok and facts.exit_code == 0
    assert facts.bytes == utf8_length("print(6 * 7)\nprint('héllo')")
    assert facts.stdout_bytes == len("42\nhéllo\n".encode())
    assert facts.duration_ms > 0
    (row,) = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert (row.dispatch, row.outcome, row.iteration) == (1, "ran", 2)
    assert row.text == "print(6 * 7)\nprint('héllo')" and row.facts == facts
    assert result.dispatch == 1


async def test_the_program_runs_isolated_in_a_fresh_directory_with_a_minimal_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """-I mode, no host secrets, only the extra variables asked for, nothing kept between calls."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    runner = code_runner(env={"GREETING": "hi"})
    program = ("import os, sys, pathlib\n"
               "print(sys.flags.isolated, os.environ.get('OPENAI_API_KEY'), "
               "os.environ.get('GREETING'), pathlib.Path('left.txt').exists())\n"
               "pathlib.Path('left.txt').write_text('x')")
    first, _ = await dispatch(program, runner=runner)
    second, _ = await dispatch(program, runner=runner)
    assert first.outcome.content == "1 None hi False"
    assert second.outcome.content == "1 None hi False"


async def test_a_non_zero_exit_is_reported_with_stderr_and_a_failed_row() -> None:
    """The model reads stderr and the exit line; the row's outcome is ``failed``."""
    result, scope = await dispatch("import sys\nprint('partial')\nsys.exit(3)")
    assert result.outcome.content.endswith("[exit 3] the program failed; read stderr, fix it "
                                           "and call run_code again")
    assert result.facts is not None and result.facts.exit_code == 3 and not result.facts.ok
    crashed, _ = await dispatch("raise ValueError('bad input')")
    assert "stderr:\n" in crashed.outcome.content
    assert "ValueError: bad input" in crashed.outcome.content
    assert "[exit 1]" in crashed.outcome.content
    assert script_rows_of_turn(scope[LEDGER_KEY], 1).current[0].outcome == "failed"


async def test_a_timeout_kills_the_program_and_what_it_started() -> None:
    """At the wall-time limit the whole sandbox is killed, children included."""
    runner = code_runner(timeout=1)
    marker = "timeout-child-" + uuid.uuid4().hex  # unique: other sessions run this test too
    program = sleeper(marker) + "print('started', flush=True)\nimport time; time.sleep(60)"
    started = time.monotonic()
    result, scope = await dispatch(program, runner=runner)
    assert time.monotonic() - started < 5
    assert result.outcome.content.startswith("started")
    assert "[timed out after 1 s" in result.outcome.content
    assert result.facts is not None and result.facts.timed_out and result.facts.exit_code == -9
    assert gone(marker)
    assert script_rows_of_turn(scope[LEDGER_KEY], 1).current[0].outcome == "failed"


async def test_a_program_that_leaves_a_background_child_returns_at_once() -> None:
    """Exit is watched, not pipe closure: a leftover child holding stdout does not stall."""
    marker = "background-child-" + uuid.uuid4().hex
    program = sleeper(marker) + "print(child.pid)"
    started = time.monotonic()
    result, _ = await dispatch(program)
    assert time.monotonic() - started < 3
    assert result.facts is not None and result.facts.ok and not result.facts.timed_out
    assert gone(marker)


async def test_cancelling_the_call_kills_the_program() -> None:
    """A run cancelled from outside (a run timeout) leaves no process behind."""
    marker = "cancelled-child-" + uuid.uuid4().hex
    task = asyncio.ensure_future(run_python(sleeper(marker) + "import time; time.sleep(60)",
                                            limits=RunLimits(timeout=30)))
    deadline = time.monotonic() + 10
    while not holding(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert holding(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(marker)


async def test_the_memory_limit_stops_a_program_that_allocates_too_much() -> None:
    """Over ``memory_mb`` the program dies of MemoryError; under it, it runs."""
    runner = code_runner(memory_mb=64)
    result, scope = await dispatch("block = bytearray(256 * 1024 * 1024)\nprint('no')",
                                   runner=runner)
    assert result.facts is not None and result.facts.out_of_memory and not result.facts.ok
    assert "[out of memory: the program passed its 64 MiB limit" in result.outcome.content
    assert "no" not in result.outcome.content.splitlines()
    small, _ = await dispatch("block = bytearray(8 * 1024 * 1024)\nprint(len(block))",
                              runner=runner)
    assert small.outcome.content == str(8 * 1024 * 1024)
    assert script_rows_of_turn(scope[LEDGER_KEY], 1).current[0].outcome == "failed"


async def test_output_is_capped_per_stream_and_the_cap_is_stated() -> None:
    """stdout keeps its head, stderr its tail, both within ``max_output_chars``; facts say so."""
    runner = code_runner(max_output_chars=100)
    program = ("import sys\nprint('é' * 100000)\n"
               "sys.stderr.write('x' * 50000 + 'THE END')")
    result, _ = await dispatch(program, runner=runner)
    content = result.outcome.content
    assert content.startswith("é" * 100 + "\n[stdout clipped: showing its first 100 characters "
                              "of 200,001 bytes]")
    assert content.endswith("x" * 93 + "THE END\n[stderr clipped: showing its last 100 "
                            "characters of 50,007 bytes]")
    assert result.facts is not None and result.facts.truncated
    assert (result.facts.stdout_bytes, result.facts.stderr_bytes) == (200001, 50007)


async def test_a_silent_program_says_so() -> None:
    """No output is a visible result, not an empty string."""
    result, _ = await dispatch("x = 1")
    assert result.outcome.content == "(the program printed nothing)"


# -- the script bound --------------------------------------------------------------------------


def _program_of(size: int) -> str:
    """``print(1)`` padded with a comment of 3-byte characters to exactly ``size`` bytes."""
    head = "print(1)\n#"
    room = size - utf8_length(head)
    text = head + "€" * (room // 3) + "é" * (room % 3 // 2) + "a" * (room % 3 % 2)
    assert utf8_length(text) == size
    return text


async def test_a_program_of_exactly_max_bytes_runs() -> None:
    """32,768 bytes of multi-byte text is within the bound: it runs and its row keeps it."""
    program = _program_of(MAX_SCRIPT_BYTES)
    result, scope = await dispatch(program)
    assert result.outcome.content == "1"
    (row,) = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert row.outcome == "ran" and row.text == program and row.bytes == MAX_SCRIPT_BYTES


async def test_an_oversize_program_is_refused_naming_the_limit() -> None:
    """32,769 bytes: refused unrun, the result names the limit, the row has no text."""
    program = _program_of(MAX_SCRIPT_BYTES + 1)
    result, scope = await dispatch(program)
    assert result.outcome.content == (
        "Refused: the program is 32,769 bytes (UTF-8), over the 32,768-byte limit "
        "(MAX_SCRIPT_BYTES) of run_code; nothing was run. Send a shorter program.")
    facts = result.facts
    assert facts is not None and facts.refused == "too-large" and facts.exit_code is None
    (row,) = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert (row.outcome, row.bytes, row.text) == ("refused", MAX_SCRIPT_BYTES + 1, None)


# -- the ledger --------------------------------------------------------------------------------


async def test_every_dispatch_files_a_row_through_the_one_writer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ran, failed, refused and invalid calls each file one row, all via record_script_row."""
    written: list[int | None] = []

    def spy(*args: Any, **kwargs: Any) -> int | None:
        number = record_script_row(*args, **kwargs)
        written.append(number)
        return number

    monkeypatch.setattr(code_runner_module, "record_script_row", spy)
    scope: dict[str, Any] = {}
    await dispatch("print(1)", scope=scope)
    await dispatch("import sys; sys.exit(2)", scope=scope)
    await dispatch(_program_of(MAX_SCRIPT_BYTES + 1), scope=scope)
    await dispatch("print(1)", scope=scope, extra={"unexpected": True})
    assert written == [1, 2, 3, 4]
    outcomes = [r.outcome for r in script_rows_of_turn(scope[LEDGER_KEY], 1).current]
    assert outcomes == ["ran", "failed", "refused", "invalid"]
    check_script_ledger(scope[LEDGER_KEY])


async def test_a_call_without_a_program_files_no_row() -> None:
    """``code`` that is not a string is refused by validation and leaves no row."""
    result, scope = await dispatch(12)
    assert result.outcome.status == "invalid" and result.dispatch is None
    assert LEDGER_KEY not in scope


async def test_a_tool_that_runs_no_code_files_no_row() -> None:
    """Only declared code-running tools are on the ledger."""
    echo = define_tool("echo", "Echo.", None, lambda args: "hi")
    scope: dict[str, Any] = {}
    result = await dispatch_script_call(ToolRegistry([echo]),
                                        {"id": "c", "name": "echo", "args": {}},
                                        ToolContext("c", 1, "r"), scope, turn=1)
    assert result.outcome.content == "hi" and result.dispatch is None and scope == {}


async def test_a_tool_that_raises_files_an_error_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner could not start (its interpreter vanished): the row's outcome is ``error``."""
    runner = code_runner()

    async def vanished(*args: Any, **kwargs: Any) -> Any:
        raise ConfigurationError("code_runner python='/gone/python3' is not an executable file")

    monkeypatch.setattr(code_runner_module, "run_python", vanished)
    result, scope = await dispatch("print(1)", runner=runner)
    assert result.outcome.status == "error"
    (row,) = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert row.outcome == "error" and row.text == "print(1)" and row.facts is None


async def test_a_paused_call_settles_into_its_dispatch() -> None:
    """The loop files the pause; the resumed dispatch joins it and carries the program."""
    scope: dict[str, Any] = {}
    draft = script_row_for(ScriptCall(script=ToolScript(), tool="run_code", tool_call_id="c",
                                      iteration=2, turn=1, proposed="print(5)", paused=True))
    assert draft is not None
    number = record_script_row(scope, draft, paused=True)
    await dispatch("print(9)", scope=scope, call_id="other")
    result, _ = await dispatch("print(5)", scope=scope, call_id="c", number=number)
    assert result.dispatch == 1
    current = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert [(r.dispatch, r.outcome, r.text) for r in current] == [
        (2, "ran", "print(9)"), (1, "ran", "print(5)")]


async def test_the_seventeenth_dispatch_of_a_turn_is_run_and_counted() -> None:
    """A full turn still runs the call; it only files no row."""
    scope: dict[str, Any] = {}
    for i in range(MAX_SCRIPT_ROWS):
        await dispatch(f"print({i})", scope=scope)
    result, _ = await dispatch("print('seventeen')", scope=scope)
    assert result.outcome.content == "seventeen" and result.dispatch is None
    assert scope[DROPPED_KEY] == 1


async def test_the_code_never_rides_the_facts_or_the_code_run_event() -> None:
    """Sizes, hash, exit status and durations only: the program's text is nowhere in them."""
    program = f"# {MARKER}\nprint('visible')"
    result, scope = await dispatch(program)
    assert result.code_run is not None and result.facts is not None
    payload = json.dumps(result.code_run)
    assert MARKER not in payload and "visible" not in payload
    assert MARKER not in result.facts.model_dump_json()
    assert result.code_run["tool"] == "run_code" and result.code_run["tool_call_id"] == "call-1"
    assert set(result.code_run) == {
        "tool", "tool_call_id", "iteration", "language", "bytes", "sha256", "ok", "exit_code",
        "timed_out", "out_of_memory", "refused", "duration_ms", "stdout_bytes", "stderr_bytes",
        "truncated"}
    assert MARKER not in result.outcome.content
    # the ledger row holds the program for its own turn only (seed 003), never its facts
    (row,) = scope[LEDGER_KEY]
    assert MARKER in row["text"] and MARKER not in json.dumps(row["facts"])


async def test_the_code_never_reaches_the_agents_tool_results_or_recorded_state() -> None:
    """In an agent run, the tool result, its tool_end event and the answer hold output only."""
    provider = mock(script=[
        {"tool_calls": [{"name": "run_code", "args": {"code": f"# {MARKER}\nprint(2 + 2)"}}]},
        "It is 4."])
    agent = Agent(provider=provider, model="m", tools=[code_runner()])
    events: list[Any] = []
    agent.on("stream.tool_end", events.append)
    result = await agent.run("what is 2 + 2?")
    assert result.content == "It is 4."
    (tool_message,) = [m for m in result.history if m["role"] == "tool"]
    assert tool_message["content"] == "4"
    (end,) = events
    assert end.payload["result"] == "4" and MARKER not in json.dumps(end.payload)


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "named"), [
    ({"timeout": 0}, "timeout=0"),
    ({"timeout": float("inf")}, "timeout=inf"),
    ({"memory_mb": 8}, "memory_mb=8"),
    ({"max_output_chars": 0}, "max_output_chars=0"),
    ({"name": "run code"}, "tool name"),
])
def test_bad_options_are_refused_naming_the_fix(options: dict[str, Any], named: str) -> None:
    """Impossible limits fail at construction, with the offending value."""
    with pytest.raises(ConfigurationError, match=named):
        code_runner(**options)


def test_the_tool_declares_itself_code_running_and_describes_its_limits() -> None:
    """The declaration the dispatch loop keys on, and a schema the model can fill."""
    tool = code_runner(timeout=3, memory_mb=128, max_output_chars=500)
    assert tool.script == ToolScript(argument="code", language="python")
    assert tool.limits == RunLimits(timeout=3.0, memory_mb=128, max_output_chars=500)
    assert "fresh, isolated process" not in tool.description
    assert tool.input_schema["required"] == ["code"]
    assert ("3 s, 128 MiB of memory per process, 64 processes, 64 MiB of scratch disk, "
            "500 characters") in tool.description
    assert "bubblewrap sandbox" in tool.description and tool.isolation in tool.description
    assert f"{MAX_SCRIPT_BYTES} bytes of program" in tool.description
    assert tool.validate({"code": 1}) and not tool.validate({"code": "x"})


async def test_run_python_uses_this_interpreter_by_default() -> None:
    """The default interpreter is the one running the agent."""
    ran = await run_python("import sys; print(sys.executable)")
    assert os.path.realpath(ran.stdout.strip()) == os.path.realpath(sys.executable)
