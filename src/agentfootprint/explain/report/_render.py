"""The two entry points of the report: render the page, or write it to a file."""

from __future__ import annotations

from pathlib import Path

from ...runs._recording import Recording
from ...runs._usage import usage_of
from .._backtrack import Backtrack
from .._integrity import find_context_errors
from ._data import Localization, build_report_data
from ._page import render_page
from ._sections import audit_status

__all__ = ["render_html_report", "write_html_report"]


def render_html_report(recording: Recording, *, backtrack: Backtrack | None = None,
                       localization: Localization = None,
                       chain_head: str | None = None) -> str:
    """The report of ``recording`` as one HTML document (a string).

    ``backtrack`` and ``localization`` should explain this same run: the results of
    ``backtrack(...)`` and ``localize_context_bug(...)``, or the proofs the run store keeps
    (``store.proofs(run_id)``, the latest localization is shown). ``chain_head`` is the audit
    chain head the run store kept (``store.chain_head(run_id)``): the page says whether the
    run still matches it; without one it says the run has no chain to check.
    """
    if not isinstance(recording, Recording):
        raise TypeError(f"render_html_report needs a Recording, not {type(recording).__name__}; "
                        "use Recording.of(result) or RunStore(...).load(run_id)")
    data = build_report_data(recording, backtrack=backtrack, localization=localization)
    return render_page(data, usage=usage_of(recording.commit_log()),
                       integrity=find_context_errors(recording) if data.calls else None,
                       audit=audit_status(recording, chain_head))


def write_html_report(recording: Recording, path: str | Path, *,
                      backtrack: Backtrack | None = None,
                      localization: Localization = None,
                      chain_head: str | None = None) -> Path:
    """Write the report of ``recording`` to ``path`` (parents created); return the path."""
    target = Path(path)
    html = render_html_report(recording, backtrack=backtrack, localization=localization,
                              chain_head=chain_head)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
