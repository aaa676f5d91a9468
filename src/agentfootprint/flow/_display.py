"""Short reprs and small notebook HTML for result objects (a run, an explanation).

A result can hold a whole run's history; its ``repr`` must not. ``short_repr`` renders
``Kind(name=value, ...)`` within a fixed width, clipping text fields (the longest first), so a
repr's size never depends on how much the run did. ``html_summary`` renders the same fields as
a small table for Jupyter's ``_repr_html_``, every value escaped.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ["REPR_WIDTH", "clip", "html_summary", "short_repr", "terminal_text"]

REPR_WIDTH = 120
"""The longest a result's repr gets."""

Fields = Sequence[tuple[str, object]]


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"


def clip_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs made one space), clipped to ``limit``."""
    return clip(" ".join(text.split()), limit)


def terminal_text(text: str) -> str:
    """``text`` with every control character shown escaped (``\\x1b``, ``\\n``): what a
    recording holds (a run id, a name, an answer) never drives the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def short_repr(kind: str, fields: Fields, *, width: int = REPR_WIDTH,
               whole: Collection[str] = ()) -> str:
    """``kind(name=value, ...)`` in at most ``width`` characters.

    Text values are clipped, the longest first, until the whole fits (none below 8
    characters); the fields named in ``whole`` (an id to copy) never are. Values of other
    types are shown with ``repr``; text is too, so a control character or a newline never
    breaks the line.
    """
    limits = {name: len(value) if name in whole else 60
              for name, value in fields if isinstance(value, str)}
    clippable = [name for name in limits if name not in whole]

    def render() -> str:
        parts = [f"{name}={clip(value, limits[name])!r}" if isinstance(value, str)
                 else f"{name}={value!r}" for name, value in fields]
        return f"{kind}({', '.join(parts)})"

    shown = render()
    while len(shown) > width:
        longest = max(clippable, key=lambda name: limits[name], default=None)
        if longest is None or limits[longest] <= 8:
            return shown[:width - 2] + "…)"
        limits[longest] = max(8, limits[longest] - (len(shown) - width))
        shown = render()
    return shown


def html_summary(kind: str, fields: Fields, *, detail: str | None = None,
                 detail_limit: int = 4000) -> str:
    """A small table of ``fields`` under ``kind``, and ``detail`` (clipped) folded below it.

    Every name and value is HTML-escaped: a result's text is model or user text and may hold
    markup.
    """
    import html  # html.entities costs ~9 ms at import; a notebook summary is rare

    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(name)}</th>"
        f"<td style='text-align:left'>{html.escape(_text(value))}</td></tr>"
        for name, value in fields)
    out = f"<div><strong>{html.escape(kind)}</strong><table>{rows}</table>"
    if detail:
        out += (f"<details><summary>details</summary><pre>"
                f"{html.escape(clip(detail, detail_limit))}</pre></details>")
    return out + "</div>"


def _text(value: object) -> str:
    if isinstance(value, str):
        return clip(value, 500)
    return "—" if value is None else str(value)
