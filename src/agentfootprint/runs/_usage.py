"""What a run's model calls used and cost, read from its recording (one pure reader).

The agent's ``CallLLM`` stage appends one row per call to ``llm_usage`` (model, provider,
tokens, cost, the prompt-cache breakpoints sent) and its wall-clock time to ``llm_latency_ms``
(a ``timing`` key, which comparisons of recordings drop). ``usage_of`` turns those into a
``RunUsage``: one ``CallUsage`` per call, nested agents of a composition included, and the sum.
``RunResult.usage``, the run store's ``llm_calls`` table and the HTML report all read it here,
so they cannot disagree.

Token counts follow ``providers.Usage``: ``input_tokens`` counts every prompt token, cached
ones included; ``cache_read_tokens`` / ``cache_write_tokens`` say how many of them were read
from / written to the provider's prompt cache. A call whose model has no price has
``cost_usd=None``; the run's ``cost_usd`` is then ``None`` too, and ``unpriced`` names the
models, so an unknown cost is never shown as free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..flow._commitlog import CommitLog, CommitRecord
from . import trace
from ._view import is_stage, llm_started

__all__ = ["CallUsage", "RunUsage", "budget_sentence", "usage_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallUsage:
    """One model call: who answered, how long it took, what it used and cost."""

    call: int
    """1-based, in the order the run made its calls (nested agents included)."""
    iteration: int | None
    model: str | None
    provider: str | None
    latency_ms: float | None
    """Wall-clock time of the call, retries included (``None`` in older recordings)."""
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    """``None``: the model has no price (see ``Budget(prices=...)``), never "free"."""
    scope: str = ""
    """The nested agent's mount path in a composition (``""`` at the top level)."""
    cache: Mapping[str, int] | None = None
    """The prompt-cache breakpoints sent: stable system characters, tools and messages."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunUsage:
    """Every call of a run, and their sum."""

    calls: tuple[CallUsage, ...] = ()
    budget: tuple[str, ...] = ()
    """One sentence per budget the run crossed (which, at which call, stopped or warned)."""

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.calls)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cache_read_tokens(self) -> int:
        return sum(c.cache_read_tokens for c in self.calls)

    @property
    def cache_write_tokens(self) -> int:
        return sum(c.cache_write_tokens for c in self.calls)

    @property
    def latency_ms(self) -> float:
        """The calls' time added up (the run also spent time outside them)."""
        return sum(c.latency_ms or 0.0 for c in self.calls)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Models of calls without a price, in first-use order."""
        return tuple(dict.fromkeys(str(c.model) for c in self.calls if c.cost_usd is None))

    @property
    def cost_usd(self) -> float | None:
        """USD of all calls; ``None`` when any call's model has no price (see ``unpriced``)."""
        if self.unpriced:
            return None
        return sum(c.cost_usd or 0.0 for c in self.calls)

    def __str__(self) -> str:
        lines = [f"{len(self.calls)} LLM call(s): {self.input_tokens} input tokens "
                 f"({self.cache_read_tokens} read from cache, {self.cache_write_tokens} written "
                 f"to it), {self.output_tokens} output tokens, cost {_usd(self.cost_usd)}"]
        for c in self.calls:
            where = f" [{c.scope}]" if c.scope else ""
            lines.append(
                f"  #{c.call}{where} {c.provider}/{c.model}: {_ms(c.latency_ms)}, "
                f"in {c.input_tokens} (cache read {c.cache_read_tokens}, written "
                f"{c.cache_write_tokens}), out {c.output_tokens}, {_usd(c.cost_usd)}")
        if self.unpriced:
            lines.append(f"  cost unknown: no price for {', '.join(map(repr, self.unpriced))} "
                         "(give one with Budget(prices={model: Price(...)}))")
        lines.extend(f"  budget: {sentence}" for sentence in self.budget)
        return "\n".join(lines)


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.6f}"


def _ms(value: float | None) -> str:
    return "? ms" if value is None else f"{value:.1f} ms"


def budget_sentence(crossed: Mapping[str, Any]) -> str:
    """One recorded budget crossing as a sentence naming the budget."""
    name, limit, spent = crossed.get("budget"), crossed.get("limit"), crossed.get("spent")
    shown = (f"${spent:.6f}" if name == "max_cost_usd" and isinstance(spent, int | float)
             else f"{spent}")
    action = ("the run stopped there" if crossed.get("action") == "stopped"
              else "the run went on (on_exceed='warn')")
    return (f"Budget({name}={limit}) was crossed at LLM call {crossed.get('call')} "
            f"({shown} used); {action}")


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _last(record: CommitRecord, key: str) -> Any:
    """The item a call's record added to ``key``'s list (None if it added none), read from
    the record's own change: replaying the list would cost the run's length per call."""
    for change in record.changes:
        if (change.key == key and change.op in ("set", "append")
                and isinstance(change.value, list) and change.value):
            return change.value[-1]
    return None


def usage_of(log: CommitLog) -> RunUsage:
    """The usage of every LLM call ``log`` recorded, nested agents' included.

    A recording made before ``llm_usage`` existed still gives its calls, with the tokens read
    from the running totals, no cache counts, and no cost or latency.
    """
    calls: list[CallUsage] = []
    spent: dict[str, tuple[int, int]] = {}
    crossed: list[str] = []
    last_idx: dict[str, int] = {}
    for record in log.records:
        if not is_stage(record, trace.CALL_LLM):
            continue
        ns, idx = record.ns, record.idx
        last_idx[ns] = idx
        totals = (_int(log.value_at(trace.INPUT_TOKENS, idx, ns=ns, default=0)),
                  _int(log.value_at(trace.OUTPUT_TOKENS, idx, ns=ns, default=0)))
        previous = spent.get(ns, (0, 0))
        spent[ns] = totals
        row = _last(record, trace.LLM_USAGE)
        row = row if isinstance(row, Mapping) else {}
        started = llm_started(record)
        latency = _last(record, trace.LLM_LATENCY)
        cost = row.get("cost_usd")
        cache = row.get("cache")
        calls.append(CallUsage(
            call=len(calls) + 1,
            iteration=_iteration(log, idx, ns),
            model=row.get("model", started.get("model")),
            provider=row.get("provider", started.get("provider")),
            latency_ms=float(latency) if isinstance(latency, int | float) else None,
            input_tokens=_int(row.get("input_tokens", totals[0] - previous[0])),
            output_tokens=_int(row.get("output_tokens", totals[1] - previous[1])),
            cache_read_tokens=_int(row.get("cache_read_tokens")),
            cache_write_tokens=_int(row.get("cache_write_tokens")),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            scope=ns, cache=dict(cache) if isinstance(cache, Mapping) else None))
    for ns, idx in last_idx.items():
        found = log.value_at(trace.BUDGET_CROSSED, idx, ns=ns, default=None)
        for item in found if isinstance(found, list) else ():
            if isinstance(item, Mapping):
                crossed.append(budget_sentence(item))
    return RunUsage(calls=tuple(calls), budget=tuple(crossed))


def _iteration(log: CommitLog, idx: int, ns: str) -> int | None:
    value = log.value_at(trace.ITERATION, idx - 1, ns=ns, default=None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
