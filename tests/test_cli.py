"""The README's main job: ``agentfootprint demo`` runs offline and explains its decision."""

from __future__ import annotations

import subprocess
import sys

from agentfootprint.cli import main


def test_demo_prints_decision_narrative_and_cause(capsys: object) -> None:
    """The demo rejects Bob and traces the rejection back to the credit-score write."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "Decision: rejected: Bob is high risk" in out
    assert '[Condition]: It evaluated "Low credit": credit_score 580 lt 620 ✓' in out
    assert "Route (Route#2) ← [control: Low credit]" in out
    assert "ReceiveApplication (ReceiveApplication#0) ← via" in out


def test_demo_runs_as_installed_command() -> None:
    """``python -m agentfootprint.cli demo`` works in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-m", "agentfootprint.cli", "demo"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "Why (causal slice of the decision):" in done.stdout
