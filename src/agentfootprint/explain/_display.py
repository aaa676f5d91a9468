"""How explanation results show themselves: a fixed-size repr and a notebook summary.

An explanation can hold every re-run's answers; its ``repr`` names the verdict and the counts
instead (``short_repr``, at most 120 characters), and ``_repr_html_`` shows the same fields as
an escaped table with the full text report (``str(result)``) folded below. Each result class
binds ``__repr__ = explanation_repr`` and ``_repr_html_ = explanation_html``; the fields of
each are chosen here, by class name, so this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..flow._display import html_summary, short_repr

__all__ = ["explanation_html", "explanation_repr"]

Fields = list[tuple[str, object]]


def _label(item: Any) -> str | None:
    return None if item is None else str(item.label)


def _backtrack(b: Any) -> Fields:
    fields: Fields = [("answer", b.answer), ("hops", len(b.hops)),
                      ("suspect", _label(b.suspect)), ("candidates", len(b.ranked))]
    if b.failure is not None:
        fields.insert(0, ("failed", True))
    if getattr(b, "pause", None) is not None:
        fields.insert(0, ("paused", b.pause.runtime_stage_id))
    if getattr(b, "no_overlap", False):
        fields.append(("overlap", "none"))
    return fields


def _localized(r: Any) -> Fields:
    proven = [s.label for s in r.causal]
    return [("answer", r.answer), ("proven", ", ".join(proven) if proven else None),
            ("suspects", len(r.suspects)), ("reruns", r.runs_used)]


def _dropped(r: Any) -> Fields:
    return [("answer", r.answer), ("candidates", len(r.candidates)),
            ("confirmed", len(r.confirmed))]


def _rerun(r: Any) -> Fields:
    return [("verdict", r.verdict), ("without", ", ".join(r.labels)),
            ("flipped", r.probe.fraction), ("baseline", r.baseline.fraction)]


def _bisection(r: Any) -> Fields:
    return [("verdict", r.verdict), ("culprits", len(r.culprits)), ("probes", len(r.probes)),
            ("reruns", r.runs_used)]


def _turn_reason(r: Any) -> Fields:
    return [("turn", r.turn), ("suspect", _label(r.suspect)), ("reply", r.reply)]


def _turn_rerun(r: Any) -> Fields:
    return [("turn", r.turn), ("verdict", r.verdict), ("without", ", ".join(r.labels)),
            ("changed", r.probe.fraction)]


_FIELDS: dict[str, Callable[[Any], Fields]] = {
    "Backtrack": _backtrack,
    "ContextBugReport": _localized,
    "DroppedContextReport": _dropped,
    "RerunResult": _rerun,
    "BisectionResult": _bisection,
    "TurnReason": _turn_reason,
    "TurnRerun": _turn_rerun,
}


def _fields(result: object) -> Fields:
    for cls in type(result).__mro__:
        chosen = _FIELDS.get(cls.__name__)
        if chosen is not None:
            return chosen(result)
    return []


def explanation_repr(result: object) -> str:
    """``Kind(verdict/answer, counts...)`` in at most 120 characters."""
    return short_repr(type(result).__name__, _fields(result))


def explanation_html(result: object) -> str:
    """The repr's fields as an escaped table, the text report folded below."""
    return html_summary(type(result).__name__, _fields(result), detail=str(result))
