"""``agentfootprint lint-tools``: exit 0 clean, 1 findings, 2 bad input (one line, no
traceback); ``--format json`` is the report's JSON; ``--threshold`` reaches the twin rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.cli import main
from agentfootprint.errors import ConfigurationError
from agentfootprint.memory.embedding import _minilm as minilm_module

CLEAN = [{"type": "function", "function": {
    "name": "get_weather",
    "description": "Look up the weather in a city right now: temperature, wind and sky. Use it "
                   "when the user asks what the weather is like.",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "City name."}}}}}]
FINDINGS = [{"name": "lookup", "description": "Look up.",
             "input_schema": {"type": "object", "properties": {
                 "order": {"type": "string", "description": "Either asc or desc."}}}}]


@pytest.fixture(autouse=True)
def _no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin the command, not the model: the twin rule reads as not installed."""
    def missing(**_: Any) -> Any:
        raise ConfigurationError("minilm_embedder needs numpy")

    monkeypatch.setattr(minilm_module, "minilm_embedder", missing)


def _write(tmp_path: Path, document: Any, name: str = "tools.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_a_clean_catalog_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-tools", _write(tmp_path, CLEAN)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 tools checked: no findings")
    assert "not run near-duplicate" in out and "agentfootprint[embed]" in out


def test_findings_exit_1_with_a_line_each(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-tools", _write(tmp_path, FINDINGS)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "1 tools checked: 2 warnings"
    assert any("thin-description" in line and "lookup" in line for line in lines)
    assert any("enum-in-prose" in line and "lookup.order" in line and 'Fix: Add "enum"' in line
               for line in lines)


def test_json_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-tools", _write(tmp_path, FINDINGS), "--format", "json",
                 "--threshold", "0.7"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["tools_checked"] == 1 and report["threshold"] == 0.7
    assert {f["rule"] for f in report["findings"]} == {"thin-description", "enum-in-prose"}
    assert all(set(f) >= {"rule", "severity", "tools", "message", "fix"}
               for f in report["findings"])
    assert "near-duplicate" in report["not_run"] and report["model"] is None


@pytest.mark.parametrize(("args", "needle"), [
    (["missing.json"], "no tool catalog at"),
    (["bad.json"], "is not valid JSON"),
    (["empty.json"], "lists no tools"),
    (["clean.json", "--threshold", "abc"], "--threshold 'abc' is not a number"),
    (["clean.json", "--threshold", "1.5"], "--threshold 1.5 is not a cosine"),
])
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad.json").write_text("{nope", encoding="utf-8")
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    _write(tmp_path, CLEAN, "clean.json")
    monkeypatch.chdir(tmp_path)
    assert main(["lint-tools", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and needle in captured.err
    assert captured.err.startswith("agentfootprint lint-tools: ")


def test_standard_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"tools": CLEAN})))
    assert main(["lint-tools", "-"]) == 0


def test_the_installed_command_never_shows_a_traceback(tmp_path: Path) -> None:
    """Through a real process: a directory as the catalog is one line and exit 2."""
    done = subprocess.run([sys.executable, "-m", "agentfootprint.cli", "lint-tools",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert "cannot read the tool catalog" in done.stderr
