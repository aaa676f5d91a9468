"""The HTML report: one self-contained file that shows why a run answered what it did.

People would rather look than read. ``render_html_report(recording)`` turns a recording into a
single HTML document — inline CSS, script and SVG, no network, no CDN, no external font — with
four parts: the run's chart with the executed path lit, an iteration timeline, what the model
saw at each LLM call (each injected piece marked by its source), and the backtrack board
(suspects with their proxy scores, ablation stamps when a localization report is given, and
the culprit sentence highlighted in the exact prompt).

Contract: the page is built from the recording alone (plus the ids, scores and verdicts of the
explanation objects), so a value redacted at the source never appears; every run value is
escaped; a Content-Security-Policy forbids every network source. Without ``backtrack`` the
board follows the best-ranked removable suspect; without ``localization`` every claim on it is
labelled a proxy.
"""

from __future__ import annotations

from pathlib import Path

from ...runs.recording import Recording
from ..backtrack import Backtrack
from ..localize import ContextBugReport
from .data import build_report_data
from .page import render_page

__all__ = ["render_html_report", "write_html_report"]


def render_html_report(recording: Recording, *, backtrack: Backtrack | None = None,
                       localization: ContextBugReport | None = None) -> str:
    """The report of ``recording`` as one HTML document (a string).

    ``backtrack`` and ``localization`` should explain this same run (pass the results of
    ``backtrack(...)`` and ``localize_context_bug(...)``).
    """
    if not isinstance(recording, Recording):
        raise TypeError(f"render_html_report needs a Recording, not {type(recording).__name__}; "
                        "use Recording.of(result) or RunStore(...).load(run_id)")
    data = build_report_data(recording, backtrack=backtrack, localization=localization)
    return render_page(data)


def write_html_report(recording: Recording, path: str | Path, *,
                      backtrack: Backtrack | None = None,
                      localization: ContextBugReport | None = None) -> Path:
    """Write the report of ``recording`` to ``path`` (parents created); return the path."""
    target = Path(path)
    html = render_html_report(recording, backtrack=backtrack, localization=localization)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
