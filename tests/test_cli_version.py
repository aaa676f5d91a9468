"""``agentfootprint --version``, the LICENSE file and the changelog."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentfootprint.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the distribution's version (no subcommand needed) and exits 0."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    expected = importlib.metadata.version("agentfootprint")
    assert capsys.readouterr().out.strip() == f"agentfootprint {expected}"


def test_version_as_a_command() -> None:
    """The installed command answers --version like the function does."""
    done = subprocess.run([sys.executable, "-m", "agentfootprint.cli", "--version"],
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip().startswith("agentfootprint ")
    assert done.stdout.split()[1] == importlib.metadata.version("agentfootprint")


def test_version_without_an_installed_distribution(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """From a bare source tree (no distribution metadata) it says so instead of failing."""

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "unknown" in capsys.readouterr().out


def test_the_license_file_matches_pyproject() -> None:
    """pyproject says MIT, and a LICENSE file with the MIT text ships beside it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_the_changelog_has_an_unreleased_section() -> None:
    """CHANGELOG.md follows Keep a Changelog: an Unreleased section with Added entries."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "keepachangelog.com" in text
    unreleased = text.split("## [Unreleased]", 1)[1]
    assert "### Added" in unreleased and "--version" in unreleased
