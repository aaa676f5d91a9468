"""Which runs the browser lists: filters read from a query string, and a page of matching runs.

``RunFilter.parse(params)`` turns the list page's query string (status, agent, since, until,
min_cost, max_cost, page) into a checked filter; a value it cannot read raises ``BadFilter``
naming the field and the fix, which the page shows as a 400. ``list_runs`` answers one page,
newest first: over a SQLite run store with SQL on its ``runs`` table (a read-only connection of
its own: the store's belongs to one thread), over a PostgreSQL one with the same SQL through its
connection, over any other store by scanning its most recent runs (cost read from each
recording's usage).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from ...runs._sqlite import RunStore
from ...runs._store import RunStorePort, RunSummary
from ...runs._usage import usage_of

__all__ = ["PAGE_SIZE", "BadFilter", "RunFilter", "RunPage", "RunRow", "list_runs"]

PAGE_SIZE: Final = 25
SCAN_LIMIT: Final = 500
"""A store without SQL is filtered over at most this many of its most recent runs."""
_TEXT_LIMIT: Final = 200
_FIELDS: Final = ("status", "agent", "since", "until", "min_cost", "max_cost", "page")


class BadFilter(ValueError):
    """A list filter that cannot be read; its message is the sentence the page shows."""


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What the runs list shows: every given field must match; ``None`` matches anything."""

    status: str | None = None
    agent: str | None = None
    """The agent's (or flowchart's) name, exactly."""
    since: float | None = None
    """Created at or after this Unix time."""
    until: float | None = None
    """Created before this Unix time."""
    min_cost: float | None = None
    """At least this many US dollars (runs without a price never match a cost bound)."""
    max_cost: float | None = None
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

    def matches(self, row: RunRow) -> bool:
        """Whether ``row`` passes every field (pages aside)."""
        cost_bound = self.min_cost is not None or self.max_cost is not None
        return ((self.status is None or row.status == self.status)
                and (self.agent is None or row.name == self.agent)
                and (self.since is None or row.created_at >= self.since)
                and (self.until is None or row.created_at < self.until)
                and (not cost_bound or row.cost_usd is not None)
                and (self.min_cost is None or (row.cost_usd or 0.0) >= self.min_cost)
                and (self.max_cost is None or (row.cost_usd or 0.0) <= self.max_cost))


@dataclass(frozen=True, slots=True)
class RunRow:
    """One line of the runs list."""

    run_id: str
    name: str
    kind: str
    status: str
    created_at: float
    preview: str
    """The start of the answer as the store keeps it (masked when the run was redacted)."""
    cost_usd: float | None
    """``None``: a model without a price, or a store that keeps no cost."""
    proofs: int


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of the runs list and what the filter form offers."""

    rows: tuple[RunRow, ...]
    total: int
    page: int
    pages: int
    statuses: tuple[str, ...]
    agents: tuple[str, ...]


def list_runs(store: RunStorePort, wanted: RunFilter, *, page_size: int = PAGE_SIZE) -> RunPage:
    """One page of the runs ``wanted`` selects, newest first."""
    if isinstance(store, RunStore):
        with _read_only(store.path) as db:
            return _sql_page(lambda text, args: db.execute(text.format(
                runs="runs", proofs="proofs").replace("%s", "?"), args).fetchall(),
                wanted, page_size)
    if type(store).__name__ == "PostgresRunStore" and hasattr(store, "_execute"):
        return _sql_page(_postgres_query(store), wanted, page_size)
    return _scanned_page(store, wanted, page_size)


Query = Callable[[str, list[Any]], list[tuple[Any, ...]]]
"""Run one SELECT (``{runs}``/``{proofs}`` name the tables, ``%s`` the parameters)."""


def _postgres_query(store: Any) -> Query:
    """SELECTs on a ``PostgresRunStore``'s own tables, through its connection and its error
    translation (driver errors become ``RunError`` naming the store)."""
    sql = store._psycopg.sql

    def query(text: str, args: list[Any]) -> list[tuple[Any, ...]]:
        statement = sql.SQL(text.replace("{runs}", "{0}").replace("{proofs}", "{1}")).format(
            store._table, store._named("proofs"))
        return list(store._execute("list runs", statement, tuple(args)))

    return query


def _sql_page(query: Query, wanted: RunFilter, page_size: int) -> RunPage:
    where: list[str] = []
    args: list[Any] = []
    for column, op, value in (("status", "=", wanted.status), ("name", "=", wanted.agent),
                              ("created_at", ">=", wanted.since),
                              ("created_at", "<", wanted.until),
                              ("cost_usd", ">=", wanted.min_cost),
                              ("cost_usd", "<=", wanted.max_cost)):
        if value is not None:  # column and operator from the list above, the value bound
            where.append(f"{column} {op} %s")
            args.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    total = int(query(f"SELECT count(*) FROM {{runs}}{clause}", args)[0][0])  # noqa: S608
    pages = max(1, math.ceil(total / page_size))
    page = min(wanted.page, pages)
    rows = query(
        "SELECT run_id, name, kind, status, created_at, preview, cost_usd, "  # noqa: S608
        "(SELECT count(*) FROM {proofs} p WHERE p.run_id = r.run_id) FROM {runs} r"
        f"{clause} ORDER BY created_at DESC, run_id DESC LIMIT %s OFFSET %s",
        [*args, page_size, (page - 1) * page_size])
    statuses = tuple(r[0] for r in query("SELECT DISTINCT status FROM {runs} ORDER BY 1", []))
    agents = tuple(r[0] for r in query("SELECT DISTINCT name FROM {runs} ORDER BY 1", []))
    return RunPage(tuple(RunRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4]),
                                str(r[5]), None if r[6] is None else float(r[6]), int(r[7]))
                         for r in rows), total, page, pages, statuses, agents)


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the store's file, closed on leaving."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        yield db
    finally:
        db.close()


def _scanned_page(store: RunStorePort, wanted: RunFilter, page_size: int) -> RunPage:
    recent = store.list(limit=SCAN_LIMIT)
    costly = wanted.min_cost is not None or wanted.max_cost is not None
    rows = [_row(store, summary, costly) for summary in recent]
    found = [row for row in rows if wanted.matches(row)]
    pages = max(1, math.ceil(len(found) / page_size))
    page = min(wanted.page, pages)
    shown = found[(page - 1) * page_size: page * page_size]
    if not costly:  # the page's own rows get their cost and proofs
        shown = [_row(store, RunSummary(r.run_id, r.name, r.kind, r.status, r.created_at,
                                        r.preview), True) for r in shown]
    return RunPage(tuple(shown), len(found), page, pages,
                   tuple(sorted({r.status for r in rows})), tuple(sorted({r.name for r in rows})))


def _row(store: RunStorePort, summary: RunSummary, full: bool) -> RunRow:
    cost, proofs = None, 0
    if full:
        cost = usage_of(store.load(summary.run_id).commit_log()).cost_usd
        proofs = len(store.proofs(summary.run_id))
    return RunRow(summary.run_id, summary.name, summary.kind, summary.status,
                  summary.created_at, summary.preview, cost, proofs)


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
