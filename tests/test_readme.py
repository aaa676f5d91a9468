"""The README's Python snippets run as written (they are the first code a user copies)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_snippets() -> None:
    """A README without snippets would make the parametrised test below vacuous."""
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(index: int, tmp_path: Path) -> None:
    """Snippet ``index`` exits 0 in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", SNIPPETS[index]], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
