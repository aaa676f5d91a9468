"""Runs-level listing: which runs ``list_runs``/``count_runs`` select, and how a store answers.

A ``RunQuery`` holds the filters every run store takes — ``status``, ``agent`` (the run's
name, exactly), ``since``/``until`` (Unix times, since inclusive, until exclusive),
``min_cost``/``max_cost`` (US dollars; a run without a price never matches a cost bound) —
checked once, here. The SQLite and PostgreSQL stores run its SQL on their query tables
(``runs``, ``proofs``); ``ScannedListing`` gives any other store the same three methods by
scanning its most recent runs (``list()``), the cost read from each recording's usage.
Listings are newest first (ties: run id descending); each ``RunSummary`` carries its cost and
how many proofs are kept with the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConfigurationError
from ._store import RunField, RunSummary

if TYPE_CHECKING:
    from ._store import RunStorePort

__all__ = ["SCAN_LIMIT", "RunQuery", "SQLListing", "ScannedListing", "check_page"]

SCAN_LIMIT: Final = 500
"""A store without query tables is listed over at most this many of its most recent runs."""

_COLUMNS: Final = {"status": "status", "agent": "name"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """The filters of a listing; ``None`` matches anything (see the module docstring)."""

    status: str | None = None
    agent: str | None = None
    """The run's (agent's, composition's or flowchart's) name, exactly."""
    since: float | None = None
    """Created at or after this Unix time."""
    until: float | None = None
    """Created before this Unix time."""
    min_cost: float | None = None
    """At least this many US dollars (a run without a price never matches a cost bound)."""
    max_cost: float | None = None

    @classmethod
    def of(cls, **filters: Any) -> RunQuery:
        """The checked query of ``list_runs``' keyword filters; a bad one is refused."""
        known = {f.name for f in fields(cls)}
        for name, value in filters.items():
            if name not in known:
                raise ConfigurationError(
                    f"list_runs() has no filter {name!r}; filter by {', '.join(sorted(known))}")
            if value is None:
                continue
            if name in ("status", "agent"):
                if not isinstance(value, str):
                    raise ConfigurationError(f"{name}={value!r} must be a str (or None)")
            elif (isinstance(value, bool) or not isinstance(value, int | float)
                  or not math.isfinite(value)):
                raise ConfigurationError(f"{name}={value!r} must be a finite number (or None)")
        return replace(cls(), **filters)

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition (`` WHERE ...`` or ``""``, ``%s`` parameters) and its values."""
        parts: list[str] = []
        args: list[Any] = []
        for column, op, value in (("status", "=", self.status), ("name", "=", self.agent),
                                  ("created_at", ">=", self.since),
                                  ("created_at", "<", self.until),
                                  ("cost_usd", ">=", self.min_cost),
                                  ("cost_usd", "<=", self.max_cost)):
            if value is not None:  # column and operator from the list above, the value bound
                parts.append(f"r.{column} {op} %s")
                args.append(value)
        return (f" WHERE {' AND '.join(parts)}" if parts else ""), args

    def select(self, limit: int, offset: int, *, order_id: str = "r.run_id"
               ) -> tuple[str, list[Any]]:
        """A page of the matching runs as SQL (``{runs}``/``{proofs}`` name the tables; the
        text holds fixed column names only, every value is a ``%s`` parameter)."""
        clause, args = self.where()
        text = ("SELECT r.run_id, r.name, r.kind, r.status, r.created_at, r.preview, "  # noqa: S608
                "r.cost_usd, (SELECT count(*) FROM {proofs} p WHERE p.run_id = r.run_id) "
                f"FROM {{runs}} r{clause} ORDER BY r.created_at DESC, {order_id} DESC "
                "LIMIT %s OFFSET %s")
        return text, [*args, limit, offset]

    def count(self) -> tuple[str, list[Any]]:
        """How many runs match, as SQL."""
        clause, args = self.where()
        return f"SELECT count(*) FROM {{runs}} r{clause}", args  # noqa: S608

    def matches(self, run: RunSummary) -> bool:
        """Whether ``run`` (its cost filled in when a cost bound is set) passes every filter."""
        cost_bound = self.min_cost is not None or self.max_cost is not None
        return ((self.status is None or run.status == self.status)
                and (self.agent is None or run.name == self.agent)
                and (self.since is None or run.created_at >= self.since)
                and (self.until is None or run.created_at < self.until)
                and (not cost_bound or run.cost_usd is not None)
                and (self.min_cost is None or (run.cost_usd or 0.0) >= self.min_cost)
                and (self.max_cost is None or (run.cost_usd or 0.0) <= self.max_cost))


def values_sql(field: object) -> str:
    """The SQL of ``run_values(field)``: the distinct values, sorted (the column is one of
    two fixed names, never the caller's text)."""
    column = _COLUMNS.get(field) if isinstance(field, str) else None
    if column is None:
        raise ConfigurationError(f"run_values({field!r}) lists 'status' or 'agent'")
    return f"SELECT DISTINCT {column} FROM {{runs}} ORDER BY 1"  # noqa: S608


def check_page(limit: object, offset: object) -> tuple[int, int]:
    """``limit`` (1 to 10,000) and ``offset`` (0 or more) as ints, else a ConfigurationError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ConfigurationError(f"limit={limit!r} must be an int from 1 to 10000")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ConfigurationError(f"offset={offset!r} must be an int of 0 or more")
    return limit, offset


def summary_of(row: tuple[Any, ...]) -> RunSummary:
    """A ``RunSummary`` of a row of ``RunQuery.select``."""
    return RunSummary(str(row[0]), str(row[1]), str(row[2]), str(row[3]), float(row[4]),
                      str(row[5]), cost_usd=None if row[6] is None else float(row[6]),
                      proofs=int(row[7]))


class SQLListing:
    """``list_runs``, ``count_runs`` and ``run_values`` for a store with the query tables: the
    store gives ``_select(doing, text, args)`` (one SELECT; ``{runs}``/``{proofs}`` name its
    tables, ``%s`` its parameters) and, if its collation needs it, ``_order_id``."""

    _order_id = "r.run_id"
    """How ties on ``created_at`` are ordered (descending): by run id, byte order."""

    def _select(self, doing: str, text: str, args: list[Any]) -> list[Any]:
        raise NotImplementedError  # pragma: no cover

    def list_runs(self, *, limit: int = 20, offset: int = 0, **filters: Any
                  ) -> list[RunSummary]:
        """The runs matching every filter given, newest first, from ``offset``; at most
        ``limit`` (see the module docstring)."""
        text, args = RunQuery.of(**filters).select(*check_page(limit, offset),
                                                   order_id=self._order_id)
        return [summary_of(row) for row in self._select("list runs", text, args)]

    def count_runs(self, **filters: Any) -> int:
        """How many runs match every filter given."""
        return int(self._select("count runs", *RunQuery.of(**filters).count())[0][0])

    def run_values(self, field: RunField) -> list[str]:
        """The distinct ``status`` or ``agent`` (run name) values, sorted."""
        return [str(row[0]) for row in self._select("list run values", values_sql(field), [])]


class ScannedListing:
    """``list_runs``, ``count_runs`` and ``run_values`` for a run store without query tables:
    a store class that inherits this (and has ``list``, ``load``, ``proofs``) gets them by
    scanning its ``SCAN_LIMIT`` most recent runs."""

    def _scan(self, query: RunQuery) -> list[RunSummary]:
        store: RunStorePort = self  # type: ignore[assignment]
        costly = query.min_cost is not None or query.max_cost is not None
        found = []
        for run in store.list(limit=SCAN_LIMIT):
            if costly:
                run = _priced(store, run)
            if query.matches(run):
                found.append(run)
        return found

    def list_runs(self, *, limit: int = 20, offset: int = 0, **filters: Any
                  ) -> list[RunSummary]:
        """The runs matching ``filters``, newest first, from ``offset``; at most ``limit``."""
        limit, offset = check_page(limit, offset)
        query = RunQuery.of(**filters)
        costly = query.min_cost is not None or query.max_cost is not None
        page = self._scan(query)[offset:offset + limit]
        if costly:
            return page
        store: RunStorePort = self  # type: ignore[assignment]
        return [_priced(store, run) for run in page]

    def count_runs(self, **filters: Any) -> int:
        """How many runs match ``filters``."""
        return len(self._scan(RunQuery.of(**filters)))

    def run_values(self, field: RunField) -> list[str]:
        """The distinct ``status`` or ``agent`` (run name) values, sorted."""
        values_sql(field)
        store: RunStorePort = self  # type: ignore[assignment]
        return sorted({run.status if field == "status" else run.name
                       for run in store.list(limit=SCAN_LIMIT)})


def _priced(store: RunStorePort, run: RunSummary) -> RunSummary:
    """``run`` with its cost (from its recording's usage) and its proofs counted."""
    from ._usage import usage_of

    cost = usage_of(store.load(run.run_id).commit_log()).cost_usd
    return replace(run, cost_usd=cost, proofs=len(store.proofs(run.run_id)))
