"""How a ``RunResult`` shows itself: a one-line repr of fixed size and a notebook summary.

Both show the answer masked as the run recorded it (``RunSecrets``): a repr ends up in logs
and tracebacks, where the run's secrets must not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..flow._display import html_summary, short_repr

if TYPE_CHECKING:
    from ._result import RunResult

__all__ = ["result_html", "result_repr"]


def _shown(result: RunResult, text: str) -> str:
    recording = result.recording
    secrets = getattr(recording, "secrets", None)
    return secrets.text(text) if secrets is not None and secrets.active else text


def _fields(result: RunResult) -> list[tuple[str, object]]:
    fields: list[tuple[str, object]] = [
        ("run_id", result.run_id), ("status", result.status), ("turn", result.turn),
        ("iterations", result.iterations)]
    if result.stopped_early:
        fields.append(("stopped_early", result.stopped_early))
    if result.pause is not None:
        fields.append(("pause", f"{result.pause.get('kind')} {result.pause.get('tool_name')}"))
    else:
        fields.append(("content", _shown(result, result.content)))
    return fields


def result_repr(result: RunResult) -> str:
    """``RunResult(run_id=..., status=..., turn=..., iterations=..., content='...')`` within
    120 characters however long the run."""
    return short_repr("RunResult", _fields(result), whole=("run_id",))


def result_html(result: RunResult) -> str:
    """The repr's fields plus token counts, with the run's narrative folded below."""
    fields = [*_fields(result), ("input_tokens", result.input_tokens),
              ("output_tokens", result.output_tokens)]
    try:
        narrative = result.narrative()
    except Exception:  # a display must never raise; the table alone still says enough
        narrative = None
    return html_summary("RunResult", fields, detail=narrative)
