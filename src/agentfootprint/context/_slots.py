"""The system and tools slots: fixed ordering, so the same inputs give the same bytes.

The system prompt is its pieces ordered by how stable they are for prompt caching, then
by declaration (the base prompt first among its equals): ``always`` pieces, then
``while_active`` ones, then ``never`` ones, joined by a blank line. So the prompt's stable
part is a prefix that stays byte-identical from call to call, which OpenAI's automatic prefix
cache and Anthropic's ``cache_control`` breakpoint both need; the rows record each piece
where it was sent. The tool list is the static tools, then
``read_skill`` (when skills exist), then the tools of skills that are always offered, then
the tools of active injections (auto-activated skills while active); the first tool of a
name wins. Each slot also returns one row per piece: where it landed (position and, for the
system prompt, the character span) and how cacheable it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..providers._base import ToolSchema
from ..tools._tool import Tool
from ._delivery import fnv1a
from ._injection import Injection

__all__ = ["CACHEABLE", "STABILITY", "compose_system", "compose_tools"]

SEPARATOR = "\n\n"
STABILITY = {"always": 0, "while_active": 1, "never": 2}
"""Cache policies, most stable first: the order of the system prompt's pieces."""
CACHEABLE = frozenset(("always", "while_active"))
"""Policies whose pieces may sit in the cached prefix (``while_active``: while it is active)."""


def compose_system(base: str, base_cache: str, active: Sequence[Injection]
                   ) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt text and one row per piece (stable pieces first, see above)."""
    pieces: list[tuple[str, str, str, str]] = []
    if base:
        pieces.append(("base", "base", base, base_cache))
    for injection in active:
        if injection.system:
            pieces.append((injection.id, injection.flavor, injection.system, injection.cache))
    pieces.sort(key=lambda piece: STABILITY.get(piece[3], len(STABILITY)))  # a stable sort
    rows: list[dict[str, Any]] = []
    offset = 0
    for position, (source, flavor, text, cache) in enumerate(pieces):
        if position:
            offset += len(SEPARATOR)
        rows.append({"source": source, "flavor": flavor, "slot": "system", "position": position,
                     "start": offset, "end": offset + len(text), "cache": cache,
                     "hash": fnv1a(f"sp:{flavor}:{source}:{text}")})
        offset += len(text)
    return SEPARATOR.join(p[2] for p in pieces), rows


def compose_tools(static: Sequence[Tool], read_skill: Tool | None,
                  skills: Sequence[Injection], active: Sequence[Injection]
                  ) -> tuple[list[ToolSchema], list[dict[str, Any]]]:
    """The tool list the model sees and one row per tool (where it came from)."""
    entries: list[tuple[Tool, str]] = [(t, "static") for t in static]
    if read_skill is not None:
        entries.append((read_skill, "read_skill"))
    for skill in skills:
        if not skill.tools_while_active:
            entries.extend((t, skill.id) for t in skill.tools)
    for injection in active:
        if injection.flavor != "skill" or injection.tools_while_active:
            entries.extend((t, injection.id) for t in injection.tools)
    schemas: list[ToolSchema] = []
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item, source in entries:
        if item.name in seen:
            continue
        seen.add(item.name)
        rows.append({"name": item.name, "source": source, "slot": "tools",
                     "position": len(schemas)})
        schemas.append(item.schema())
    return schemas, rows
