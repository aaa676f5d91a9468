"""Which runs the browser lists: filters read from a query string, and a page of matching runs.

``RunFilter.parse(params)`` turns the list page's query string (status, agent, since, until,
min_cost, max_cost, page) into a checked filter; a value it cannot read raises ``BadFilter``
naming the field and the fix, which the page shows as a 400. ``page_of_runs`` answers one page,
newest first, through the run store's own listing (``RunStorePort.list_runs``, ``count_runs``,
``run_values``: SQL on the SQLite and PostgreSQL stores' query tables, a scan elsewhere; see
``runs/_listing.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Final

from ...runs._listing import RunQuery
from ...runs._store import RunStorePort, RunSummary

__all__ = ["PAGE_SIZE", "BadFilter", "RunFilter", "RunPage", "page_of_runs"]

PAGE_SIZE: Final = 25
_TEXT_LIMIT: Final = 200
_FIELDS: Final = ("status", "agent", "since", "until", "min_cost", "max_cost", "page")


class BadFilter(ValueError):
    """A list filter that cannot be read; its message is the sentence the page shows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFilter(RunQuery):
    """What the runs list shows: the run store's filters (``RunQuery``: every given field must
    match, ``None`` matches anything) and the page."""

    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RunFilter:
        """The filter of a query string; blank fields are unset; a bad value raises BadFilter."""
        given = {k: v.strip() for k, v in params.items() if k in _FIELDS and v.strip()}
        for key, value in given.items():
            if len(value) > _TEXT_LIMIT or any(ord(c) < 32 for c in value):
                raise BadFilter(f"the {key} filter is too long or holds control characters; "
                                f"give at most {_TEXT_LIMIT} plain characters")
        found = cls(status=given.get("status"), agent=given.get("agent"),
                    since=_when("since", given.get("since")),
                    until=_when("until", given.get("until"), end=True),
                    min_cost=_cost("min_cost", given.get("min_cost")),
                    max_cost=_cost("max_cost", given.get("max_cost")),
                    page=_page(given.get("page")))
        if found.since is not None and found.until is not None and found.since >= found.until:
            raise BadFilter("the since filter is not before until; give an earlier since or a "
                            "later until")
        if found.min_cost is not None and found.max_cost is not None and \
                found.min_cost > found.max_cost:
            raise BadFilter("min_cost is above max_cost; swap them or leave one empty")
        return found

    def query(self, **changes: Any) -> dict[str, str]:
        """The query string of this filter (with ``changes``), unset fields left out."""
        shown = replace(self, **changes)
        out = {"status": shown.status, "agent": shown.agent,
               "since": _shown_time(shown.since), "until": _shown_time(shown.until),
               "min_cost": _shown_cost(shown.min_cost), "max_cost": _shown_cost(shown.max_cost),
               "page": str(shown.page) if shown.page != 1 else None}
        return {k: v for k, v in out.items() if v is not None}

    def filters(self) -> dict[str, Any]:
        """The run store's ``list_runs``/``count_runs`` filters of this filter."""
        return {f.name: getattr(self, f.name) for f in fields(RunQuery)}


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of the runs list and what the filter form offers."""

    rows: tuple[RunSummary, ...]
    """The page's runs, each with its cost and kept proofs (``RunStorePort.list_runs``)."""
    total: int
    page: int
    pages: int
    statuses: tuple[str, ...]
    agents: tuple[str, ...]


def page_of_runs(store: RunStorePort, wanted: RunFilter, *, page_size: int = PAGE_SIZE
              ) -> RunPage:
    """One page of the runs ``wanted`` selects, newest first, from the store's own listing."""
    filters = wanted.filters()
    total = store.count_runs(**filters)
    pages = max(1, math.ceil(total / page_size))
    page = min(wanted.page, pages)
    rows = store.list_runs(**filters, limit=page_size, offset=(page - 1) * page_size)
    return RunPage(tuple(rows), total, page, pages, tuple(store.run_values("status")),
                   tuple(store.run_values("agent")))


def _when(field: str, text: str | None, *, end: bool = False) -> float | None:
    """``2026-12-01`` (local midnight; as ``until``, the day is included) or
    ``2026-12-01T14:30`` / ``2026-12-01 14:30:00`` (local time)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadFilter(f"the {field} filter {text!r} is not a date; write it as 2026-12-01 "
                        "or 2026-12-01T14:30") from None
    stamp = moment.timestamp()
    if end and len(text) == 10:
        stamp += 86_400.0
    return stamp


def _cost(field: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise BadFilter(f"the {field} filter {text!r} is not an amount of US dollars; write a "
                        "number of 0 or more, e.g. 0.05")
    return value


def _page(text: str | None) -> int:
    if text is None:
        return 1
    if not text.isdigit() or not 1 <= int(text) <= 1_000_000:
        raise BadFilter(f"page {text!r} is not a page number; give a whole number from 1")
    return int(text)


def _shown_time(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(stamp))


def _shown_cost(value: float | None) -> str | None:
    return None if value is None else f"{value:g}"
