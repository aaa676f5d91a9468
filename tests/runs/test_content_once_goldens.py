"""Content stored once, seen by every reader: the goldens (backtrack, ``runs list``,
``explain``, ``report`` and its HTML, the audit chain check they print) come out byte for byte
the same when nearly every string of the stored runs is kept apart and referenced."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from agentfootprint.runs import _content as content

GOLDENS = Path(__file__).resolve().parents[1] / "goldens" / "test_goldens.py"


def _goldens() -> ModuleType:
    spec = importlib.util.spec_from_file_location("goldens_by_reference", GOLDENS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.REGEN:
        pytest.skip("the goldens are being regenerated; compare them afterwards")
    return module


@pytest.mark.parametrize("case", ["demo", "audit_bundle.py", "conversation_memory.py",
                                  "context_support_agent.py", "flow_loan.py"])
def test_goldens_are_unchanged_with_every_string_over_16_bytes_referenced(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LARGE at 16 bytes: ids, prompts, messages, tool results and events are all references."""
    goldens = _goldens()
    monkeypatch.setattr(content, "LARGE", 16)
    if case == "demo":
        goldens.test_demo(tmp_path)
    else:
        goldens.test_example(case, tmp_path, monkeypatch)
    db = sqlite3.connect(tmp_path / "runs.db")
    kept = db.execute("SELECT count(*) FROM contents").fetchone()[0]
    inline = db.execute("SELECT count(*) FROM runs WHERE body NOT LIKE '{\"$refs\":%'").fetchone()
    db.close()
    assert kept > 0 and inline == (0,)  # every run was read back through its references
