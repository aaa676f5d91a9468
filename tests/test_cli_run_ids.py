"""The CLI and hostile run ids: nothing written outside the working directory, nothing raw on the
terminal.

New run ids are checked at every store, but a store written before that (or by hand) may hold
any text as a run id or a name; the CLI still writes a report's default file in the working
directory and shows control characters escaped, never raw.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentfootprint import Agent, Tracing
from agentfootprint.cli import main
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

HOSTILE = "../../escaped\x1b[2J\nFAKE"


def _store_with_hostile_row(path: Path) -> None:
    """A run stored under ``HOSTILE`` (written around the store's own check, as an older
    release could have)."""
    with RunStore(path) as store:
        result = Agent(provider=mock(reply="hi \x1b[31mred\x1b[0m"), model="m",
                       name="Bot\x1b]0;title\x07", tracing=Tracing(run_store=store)
                       ).run_sync("hello", run_id="plain")
    body = json.loads(RunStore(path).load(result.run_id).to_json())
    body["run_id"] = HOSTILE
    db = sqlite3.connect(path)
    db.execute("INSERT INTO runs (run_id, name, kind, status, created_at, preview, body) "
               "VALUES (?, ?, 'agent', 'done', 1.0, ?, ?)",
               (HOSTILE, "Bot\x1b]0;title\x07", "hi \x1b[31mred", json.dumps(body)))
    db.commit()
    db.close()


def test_runs_list_never_prints_a_control_character(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.db"
    _store_with_hostile_row(store)
    assert main(["runs", "list", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "../../escaped\\x1b[2J\\nFAKE" in out  # shown, escaped, on one line
    assert len(out.splitlines()) == 2


def test_report_of_a_hostile_id_writes_in_the_working_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    _store_with_hostile_row(work / "runs.db")
    monkeypatch.chdir(work)
    assert main(["report", HOSTILE, "--store", "runs.db"]) == 0
    out = capsys.readouterr().out
    written = sorted(p.name for p in work.glob("*.html"))
    assert written == ["_.._escaped__2J_FAKE.html"]  # one plain file name, here
    assert not list(tmp_path.glob("*.html")) and not list((tmp_path / "a").glob("*.html"))
    assert "\x1b" not in out


def test_explain_of_a_hostile_run_never_prints_a_control_character(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.db"
    _store_with_hostile_row(store)
    main(["explain", HOSTILE, "--store", str(store)])
    main(["explain", "no\x1bsuch", "--store", str(store)])
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err
    assert "\x07" not in captured.out + captured.err
