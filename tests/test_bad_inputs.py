"""The bad-input battery: every input the hardening issue found answered wrongly, one row each.

Each row asserts its class of outcome:

* **refused** — an error of ours, one sentence, naming the thing (a field, a key, a file, a
  URL) and the fix, raised before harm is done (no model call, no driver error);
* **one line** — a command-line user error is one line on stderr and an exit status, never a
  traceback;
* **handled** — the input is dealt with correctly: a bad tool argument becomes an issue the
  model reads (the tool does not run), every recording stays strict JSON, a raising tool is
  logged.

The rows that need a server (identities on Redis and PostgreSQL, a provider's bad answers on a
real HTTP server) are in ``test_bad_inputs_servers.py``.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import socket
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, define_tool, tool
from agentfootprint.cli import main
from agentfootprint.compose import Conditional
from agentfootprint.errors import (
    AgentFootprintError,
    CheckpointError,
    ConfigurationError,
    RunError,
)
from agentfootprint.flow import flow_chart
from agentfootprint.memory import (
    MemoryIdentity,
    MemoryStoreError,
    RedisStore,
    SQLiteStore,
)
from agentfootprint.memory._errors import InvalidIdentityError
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore

# -- refused: an error naming the thing and the fix ---------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """``attempt(tmp_path)`` (sync or async) must raise ``error`` saying every one of ``says``."""

    attempt: Callable[[Path], Any]
    error: type[Exception]
    says: tuple[str, ...]


def _noop(scope: Any) -> None:
    return None


def _decider(rules: list[dict[str, Any]], state: dict[str, Any]) -> Callable[[Path], Any]:
    def attempt(_: Path) -> Any:
        chart = (flow_chart("Receive", _noop).decide("Route", rules=rules, default="approve")
                 .branch("reject", "Reject", _noop).branch("approve", "Approve", _noop)
                 .end().build())
        return chart.run(state=state)
    return attempt


def _conditional(_: Path) -> Any:
    def fixed(answer: str) -> Agent:
        return Agent(provider=mock(reply=answer), model="m")

    router = Conditional(("vip", lambda i: i.message["tier"] == "gold", fixed("V")),
                         otherwise=fixed("O"), name="Triage")
    return router.run("hello")


async def _surrogate_message(_: Path) -> None:
    provider = mock(reply="answered")
    try:
        await Agent(provider=provider, model="m").run("bad \ud800 text")
    finally:
        assert provider.requests == []  # refused before the model was asked: nothing lost


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends


async def _redis_on_a_closed_port(_: Path) -> None:
    pytest.importorskip("redis")
    store = RedisStore(f"redis://127.0.0.1:{_closed_port()}/0")
    try:
        await store.list(MemoryIdentity("c"))
    finally:
        await store.aclose()


async def _recording_without_idx(_: Path) -> None:
    data = json.loads(Recording.of(await flow_chart("Receive", _noop).build().run()).to_json())
    del data["log"]["records"][0]["idx"]
    Recording.from_json(json.dumps(data))


def _run_id(run_id: str) -> Callable[[Path], Any]:
    return lambda _: Agent(provider=mock(reply="hi"), model="m").run("hi", run_id=run_id)


async def _same_run_id_twice(tmp: Path) -> None:
    from agentfootprint import Tracing

    with RunStore(tmp / "runs.db") as store:
        agent = Agent(provider=mock(reply="hi"), model="m", tracing=Tracing(run_store=store))
        await agent.run("hi", run_id="order-1")
        await agent.run("again", run_id="order-1")


async def _history_not_a_list(_: Path) -> None:
    first = await Agent(provider=mock(reply="hi"), model="m").run("hi")
    checkpoint = {**first.checkpoint, "history": "not a list"}
    await Agent(provider=mock(reply="hi"), model="m").run("more", continue_from=checkpoint)


def _paused_checkpoint(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], Any]:
    """Pause a run at a check-in, damage its checkpoint's flow part, and resume it."""
    async def attempt(_: Path) -> None:
        from agentfootprint import check_in_approved

        @tool(check_in=True)
        def refund(order: str) -> str:
            """Refund an order."""
            return "refunded"

        def agent() -> Agent:
            script = [{"tool_calls": [{"name": "refund", "args": {"order": "A-1"}}]}, "done"]
            return Agent(provider=mock(script=script), model="m", tools=[refund])

        paused = await agent().run("refund A-1")
        assert paused.paused
        checkpoint = json.loads(json.dumps(paused.checkpoint))
        edit(checkpoint["flow"])
        await agent().resume(checkpoint, check_in_approved(by="ops"))
    return attempt


def _cut_half_the_log(flow: dict[str, Any]) -> None:
    records = flow["log"]["records"]
    flow["log"]["records"] = records[: len(records) // 2]


def _sqlite_store(make: Callable[[Path], Path]) -> Callable[[Path], Any]:
    return lambda tmp: SQLiteStore(make(tmp))


def _directory(tmp: Path) -> Path:
    (tmp / "memory.db").mkdir()
    return tmp / "memory.db"


REFUSALS = [
    pytest.param(Refusal(lambda _: MemoryIdentity("a\ud800b"), InvalidIdentityError,
                         ("MemoryIdentity.conversation_id", "lone surrogate", "remove it")),
                 id="conversation-id-lone-surrogate"),
    pytest.param(Refusal(lambda _: MemoryIdentity("a\x00b"), InvalidIdentityError,
                         ("MemoryIdentity.conversation_id", "NUL", "remove it")),
                 id="conversation-id-nul"),
    pytest.param(Refusal(lambda _: MemoryIdentity("x" * 1_000_000), InvalidIdentityError,
                         ("MemoryIdentity.conversation_id", "1000000 characters", "256",
                          "pass a shorter id")),
                 id="conversation-id-1mb"),
    pytest.param(Refusal(lambda _: MemoryIdentity("c", principal="p\x00"), InvalidIdentityError,
                         ("MemoryIdentity.principal", "NUL")),
                 id="principal-nul"),
    pytest.param(Refusal(lambda _: MemoryIdentity("c", tenant="t" * 257), InvalidIdentityError,
                         ("MemoryIdentity.tenant", "257 characters")),
                 id="tenant-too-long"),
    pytest.param(Refusal(_surrogate_message, ConfigurationError,
                         ("message", "lone surrogate at position 4", "errors='replace'")),
                 id="user-message-lone-surrogate"),
    pytest.param(Refusal(lambda _: Recording.from_json(b"\xff\xfe{"), RunError,
                         ("not a recording", "not UTF-8 text (byte 0xff at position 0)",
                          "exactly as they were written")),
                 id="recording-file-non-utf8-bytes"),
    pytest.param(Refusal(_recording_without_idx, RunError,
                         ("malformed", "Field required at log.records.0.idx",
                          "restore the original")),
                 id="recording-file-missing-idx"),
    *(pytest.param(Refusal(_run_id(bad), ConfigurationError,
                           ("is not a valid run id", "use 1-128 letters, digits")), id=name)
      for name, bad in (("run-id-path-traversal", "../../escaped"),
                        ("run-id-ansi-escape", "x\x1b[2J"), ("run-id-newline", "a\nb"))),
    pytest.param(Refusal(_same_run_id_twice, ConfigurationError,
                         ("run id 'order-1' is already taken", "give this run its own run_id")),
                 id="same-run-id-twice"),
    pytest.param(Refusal(_history_not_a_list, ConfigurationError,
                         ("continue_from['history'] must be a list",
                          "pass the checkpoint unchanged")),
                 id="conversation-checkpoint-history-not-a-list"),
    pytest.param(Refusal(_paused_checkpoint(_cut_half_the_log), CheckpointError,
                         ("incomplete log", "records were cut from its end",
                          "resume the checkpoint the run returned")),
                 id="paused-checkpoint-half-its-log-cut"),
    pytest.param(Refusal(_paused_checkpoint(lambda flow: flow["state"].update(iteration="NaN")),
                         CheckpointError,
                         ("'iteration' is 'NaN', not a whole number",
                          "resume the checkpoint the run returned, unchanged")),
                 id="paused-checkpoint-iteration-nan"),
    pytest.param(Refusal(_paused_checkpoint(lambda flow: flow["state"].update(history="x")),
                         CheckpointError,
                         ("'history' is not a list of messages",
                          "resume the checkpoint the run returned, unchanged")),
                 id="paused-checkpoint-history-not-a-list"),
    pytest.param(Refusal(_sqlite_store(_directory), MemoryStoreError,
                         ("memory.db", "it is a directory", "pass a file path")),
                 id="sqlite-store-on-a-directory"),
    pytest.param(Refusal(_sqlite_store(lambda tmp: tmp / "missing" / "memory.db"),
                         MemoryStoreError,
                         ("missing/memory.db", "does not exist", "create it first")),
                 id="sqlite-store-in-a-missing-directory"),
    pytest.param(Refusal(_redis_on_a_closed_port, MemoryStoreError,
                         ("RedisStore('redis://127.0.0.1:", "could not reach the server",
                          "start Redis there, or pass the url= of a running server")),
                 id="redis-store-on-a-closed-port"),
    pytest.param(Refusal(_decider([{"when": {"credit_scor": {"lt": 620}}, "then": "reject"}],
                                  {"credit_score": 700}), RunError,
                         ("'credit_scor'", "did you mean 'credit_score'?",
                          "keys: 'credit_score'", "fix the key")),
                 id="decide-filter-key-typo"),
    pytest.param(Refusal(_decider([{"when": lambda s: s["credit_scor"] < 620,
                                    "then": "reject"}], {"credit_score": 700}), RunError,
                         ("rule 0 (to 'reject') raised KeyError", "fix its predicate")),
                 id="decide-predicate-raises"),
    pytest.param(Refusal(_decider([{"when": {"x": {"eq": 1}}, "then": "reject", "lable": "X"}],
                                  {"x": 1}), ConfigurationError,
                         ("unknown key 'lable'", "did you mean 'label'?", "'when', 'then'")),
                 id="decide-rule-key-typo"),
    pytest.param(Refusal(_conditional, RunError,
                         ("Triage: the predicate of branch 'vip' raised TypeError",
                          "return False when the branch does not apply")),
                 id="conditional-predicate-raises"),
]


@pytest.mark.parametrize("row", REFUSALS)
async def test_refused_with_one_sentence_naming_the_thing_and_the_fix(row: Refusal,
                                                                    tmp_path: Path) -> None:
    """The bad input raises our error, on one line, with the thing and the fix in it."""
    with pytest.raises(row.error) as caught:
        outcome = row.attempt(tmp_path)
        if hasattr(outcome, "__await__"):
            await outcome
    message = str(caught.value)
    assert isinstance(caught.value, AgentFootprintError)
    assert "\n" not in message
    for part in row.says:
        assert part in message, f"{part!r} missing from: {message}"


# -- one line: the command line never shows a traceback for a user error ------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run store holding one agent run (its file and the run id), copied by each row."""
    path = tmp_path_factory.mktemp("store") / "runs.db"
    result = Agent(provider=mock(reply="hi"), model="m").run_sync("hello")
    with RunStore(path) as store:
        store.save(result)
    return path, result.run_id


def _edited(edit: Callable[[dict[str, Any]], object]) -> Callable[[Path, str], None]:
    """Rewrite the stored body: ``edit(body)`` changes it in place or returns the new text."""
    def change(path: Path, run_id: str) -> None:
        with sqlite3.connect(path) as db:
            body = json.loads(db.execute("SELECT body FROM runs WHERE run_id = ?",
                                         (run_id,)).fetchone()[0])
            replaced = edit(body)
            text = replaced if isinstance(replaced, str | bytes) else json.dumps(body)
            db.execute("UPDATE runs SET body = CAST(? AS TEXT) WHERE run_id = ?",
                       (text, run_id))
    return change


def _replace_file(write: Callable[[Path], None]) -> Callable[[Path, str], None]:
    def change(path: Path, run_id: str) -> None:
        for leftover in path.parent.glob(path.name + "*"):
            leftover.unlink()
        write(path)
    return change


def _truncate(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)


@dataclass(frozen=True)
class CommandLine:
    """``damage(store, run_id)`` then ``argv`` (``{store}``, ``{run}`` filled in) must exit
    ``status`` with stderr saying every one of ``says``."""

    damage: Callable[[Path, str], None] | None
    argv: tuple[str, ...]
    status: int
    says: tuple[str, ...]


def _drop_idx(body: dict[str, Any]) -> None:
    del body["log"]["records"][0]["idx"]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        target: Any = body
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
    return edit


EXPLAIN = ("explain", "{run}", "--store", "{store}")
REPORT = ("report", "{run}", "--store", "{store}", "-o", "{store}.html")
LIST = ("runs", "list", "--store", "{store}")
UNREADABLE = ("is unreadable", "malformed")

COMMANDS = [
    pytest.param(CommandLine(None, (*LIST, "--limit", "-1"), 2,
                             ("--limit", "'-1' is not a count", "pass 1 or more")),
                 id="runs-list-limit-negative"),
    pytest.param(CommandLine(None, (*LIST, "--limit", "0"), 2, ("pass 1 or more",)),
                 id="runs-list-limit-zero"),
    *(pytest.param(CommandLine(_edited(_drop_idx), argv, 1,
                               (*UNREADABLE, "Field required at log.records.0.idx",
                                "restore the original")), id=f"{argv[0]}-missing-idx")
      for argv in (EXPLAIN, REPORT)),
    *(pytest.param(CommandLine(_edited(_set(("log", "records", 0, "idx"), "x")), argv, 1,
                               (*UNREADABLE, "valid integer at log.records.0.idx")),
                   id=f"{argv[0]}-idx-of-the-wrong-type") for argv in (EXPLAIN, REPORT)),
    pytest.param(CommandLine(_edited(_set(("log", "records"), "nope")), EXPLAIN, 1,
                             (*UNREADABLE, "valid list at log.records")),
                 id="explain-records-of-the-wrong-type"),
    pytest.param(CommandLine(_edited(_set(("log", "records", 0, "idx"), 7)), EXPLAIN, 1,
                             ("log record 0 says idx 7", "missing or out of order")),
                 id="explain-records-out-of-order"),
    pytest.param(CommandLine(_edited(_set(("chart",), [])), REPORT, 1,
                             (*UNREADABLE, "valid dictionary at chart")),
                 id="report-chart-of-the-wrong-type"),
    *(pytest.param(CommandLine(_edited(lambda body: "{not json"), argv, 1,
                               ("is unreadable", "it is not JSON")), id=f"{argv[0]}-not-json")
      for argv in (EXPLAIN, REPORT)),
    pytest.param(CommandLine(_edited(_set(("format",), "agentfootprint.recording.v9")),
                             EXPLAIN, 1,
                             ("'agentfootprint.recording.v9' is not one this version reads",
                              "upgrade this one")),
                 id="explain-another-format-version"),
    pytest.param(CommandLine(_edited(lambda body: b"\xff\xfe{"), EXPLAIN, 1,
                             ("run store", "UTF-8")),
                 id="explain-non-utf8-bytes"),
    pytest.param(CommandLine(_replace_file(lambda p: p.write_text("not a database")), LIST, 1,
                             ("cannot open the run store", "SQLite file")),
                 id="runs-list-store-is-a-text-file"),
    pytest.param(CommandLine(_replace_file(_truncate), LIST, 1,
                             ("cannot open the run store", "SQLite file")),
                 id="runs-list-store-is-truncated"),
    pytest.param(CommandLine(_replace_file(lambda p: p.mkdir()), LIST, 1,
                             ("cannot open the run store", "SQLite file")),
                 id="runs-list-store-is-a-directory"),
]


@pytest.mark.parametrize("row", COMMANDS)
def test_a_command_line_mistake_is_one_line_never_a_traceback(
        row: CommandLine, recorded: tuple[Path, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The command exits with its status and one line on stderr (argparse's usage line aside)."""
    source, run_id = recorded
    store = tmp_path / "runs.db"
    shutil.copy(source, store)
    if row.damage is not None:
        row.damage(store, run_id)
    argv = [part.format(store=store, run=run_id) for part in row.argv]
    try:
        status = main(argv)
    except SystemExit as exited:  # argparse's usage errors
        status = int(exited.code or 0)
    err = capsys.readouterr().err
    assert status == row.status, err
    lines = [line for line in err.splitlines() if not line.startswith("usage:")]
    assert len(lines) == 1, err
    for part in row.says:
        assert part in lines[0], f"{part!r} missing from: {lines[0]}"


# -- handled: a bad tool argument is an issue the model reads; the tool never runs --------------


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


@dataclass(frozen=True)
class BadArguments:
    """A call with ``args`` must reach the model as an issue holding ``line``."""

    args: dict[str, Any]
    line: str
    schema: bool = False
    """Call the ``define_tool`` twin (a raw JSON Schema) instead of the ``@tool`` one."""


ARGUMENTS = [
    pytest.param(BadArguments({"amount": math.nan}, "- 'amount': expected a finite number, "
                              "got NaN"), id="nan"),
    pytest.param(BadArguments({"amount": math.inf}, "- 'amount': expected a finite number, "
                              "got Infinity"), id="infinity"),
    pytest.param(BadArguments({"amount": -math.inf}, "- 'amount': expected a finite number, "
                              "got -Infinity"), id="minus-infinity"),
    pytest.param(BadArguments({"amount": 1.0, "notes": [1.0, math.nan]},
                              "- 'notes[1]': expected a finite number, got NaN"),
                 id="nan-nested-in-a-list"),
    pytest.param(BadArguments({"amount": True}, "- 'amount': expected number, got boolean"),
                 id="true-for-a-float"),
    pytest.param(BadArguments({"amount": 1.0, "count": False},
                              "- 'count': expected integer or null, got boolean"),
                 id="false-for-an-optional-int"),
    pytest.param(BadArguments({"amount": "12.5"}, "- 'amount': expected number, got string"),
                 id="string-for-a-float"),
    pytest.param(BadArguments({"amount": math.nan}, "- 'amount': expected a finite number, "
                              "got NaN", schema=True), id="nan-raw-schema"),
    pytest.param(BadArguments({"amount": True}, "- 'amount': expected number, got boolean",
                              schema=True), id="true-for-a-number-raw-schema"),
]


@pytest.mark.parametrize("row", ARGUMENTS)
async def test_a_bad_tool_argument_is_an_issue_the_model_reads(row: BadArguments) -> None:
    """The tool does not run, the model reads the issue by field, the recording is strict JSON."""
    ran: list[Any] = []

    @tool
    def charge(amount: float, count: int | None = None, notes: list[Any] | None = None) -> str:
        """Charge an amount."""
        ran.append(amount)
        return "charged"

    raw = define_tool("charge", "Charge an amount.", {
        "type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
        lambda args: ran.append(args) or "charged")
    provider = mock(script=[{"tool_calls": [{"name": "charge", "args": row.args}]}, "done"])
    result = await Agent(provider=provider, model="m",
                         tools=[raw if row.schema else charge]).run("go")
    assert ran == []
    (message,) = [m for m in result.history if m["role"] == "tool"]
    lines = message["content"].splitlines()
    assert lines[0] == "Invalid arguments for tool 'charge' — the call was not executed."
    assert row.line in lines
    assert lines[-1] == "Fix the arguments and call the tool again."
    _strict_json(Recording.of(result).to_json())


async def test_an_argument_that_fits_the_schema_still_runs() -> None:
    """The checks refuse only what the schema refuses: 3 for a float, 2.0 for an int run."""
    seen: list[tuple[float, int | None]] = []

    @tool
    def charge(amount: float, count: int | None = None) -> str:
        """Charge an amount."""
        seen.append((amount, count))
        return "charged"

    provider = mock(script=[{"tool_calls": [{"name": "charge",
                                              "args": {"amount": 3, "count": 2.0}}]}, "done"])
    await Agent(provider=provider, model="m", tools=[charge]).run("go")
    assert seen == [(3.0, 2)]


async def test_every_recording_is_strict_json_and_keeps_what_it_can(tmp_path: Path) -> None:
    """Non-finite numbers and a lone surrogate in context are written in strict JSON forms,
    saved without losing the run, and read back ("NaN" as a string; the surrogate as itself)."""
    from agentfootprint import define_instruction

    odd = define_instruction(id="odd", prompt="caf\ud83d", slot="messages", role="assistant")
    chart = flow_chart("Measure", lambda s: s.__setitem__("score", [math.nan, -math.inf]))
    with RunStore(tmp_path / "runs.db") as store:
        flow = await chart.build().run()
        agent = await Agent(provider=mock(reply="ok"), model="m", context=[odd]).run("hi")
        for run in (flow, agent):
            text = Recording.of(run).to_json()
            _strict_json(text)
            store.save(run)
        assert store.load(flow.run_id).commit_log().value_at("score", 0) == ["NaN",
                                                                              "-Infinity"]
        loaded = json.dumps(store.load(agent.run_id).log, ensure_ascii=False)
        assert "caf\ud83d" in loaded


async def test_a_tool_that_raises_is_logged_and_the_model_reads_the_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """A raising tool is a WARNING naming it (type, never the message: it may hold a secret),
    and the model still reads the error text."""

    @tool
    def lookup(order: str) -> str:
        """Look up an order."""
        raise LookupError("no order sk-SECRET")

    provider = mock(script=[{"tool_calls": [{"name": "lookup", "args": {"order": "A1"}}]},
                            "done"])
    with caplog.at_level(logging.WARNING, logger="agentfootprint.tools"):
        result = await Agent(provider=provider, model="m", tools=[lookup]).run("go")
    (record,) = [r for r in caplog.records if r.name == "agentfootprint.tools"]
    assert record.levelno == logging.WARNING
    assert "tool 'lookup' raised LookupError" in record.getMessage()
    assert result.run_id in record.getMessage()
    assert "sk-SECRET" not in caplog.text
    (message,) = [m for m in result.history if m["role"] == "tool"]
    assert message["content"] == "Error: LookupError: no order sk-SECRET"
