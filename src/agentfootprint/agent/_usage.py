"""Token and cost budgets, and the per-call usage the ``CallLLM`` stage records.

``Agent(..., budget=Budget(max_cost_usd=0.50))`` bounds a run: after every model call the
run's input, output and total tokens and its cost (priced with ``Budget.prices`` over the
built-in ``providers.PRICES``) are compared with each limit given. At the call that crosses one:

* ``on_exceed="stop"`` (the default): the run ends there. The answer is what the model said at
  that call (often nothing, when it had asked for tools); no tool it asked for runs, no wrap-up
  call is made; ``result.stopped_early`` is ``"budget:<limit name>"`` (``"budget:max_cost_usd"``)
  and ``result.usage.budget`` says which limit, at which call, and how much was used. A stopped
  run is a result, not an error: what it did is kept and can be explained.
* ``on_exceed="warn"``: the run goes on.

Either way the crossing is recorded (``budget_crossed``), emitted (``cost.limit_hit``) and logged
at WARNING under ``agentfootprint.usage``, once per limit. An explanation whose re-run was cut by
a budget should treat it as out of budget, not as a changed answer (``stopped_early`` starts with
``"budget:"``).

Every call counts, including the one that crosses (a budget cannot know a call's size before
it answers), the calls ``with_retry`` repeated inside it (their time is in its latency; a failed
attempt reports no tokens to count), and calls made by nested agents of the same run. Runs made
inside ``counting_together(meter)`` (an explanation's re-runs) add up in ``meter`` and are
judged on that sum, so a budget bounds them all together.

A cost limit needs a price for the agent's model: one without is refused when the agent is
built, naming the fix. A call answered by a model with no price (a fallback) costs ``None``
and cannot move the cost total. ``cost.tick`` is emitted for every priced call (after
``stream.llm_end``), with the call's and the running cost.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from .._record import Value, assign, record_class
from ..errors import ConfigurationError
from ..providers._base import CachePrefix, LLMResponse
from ..providers._pricing import Price, built_in_price, call_cost, check_prices, price_for
from ..runs import trace
from ._spec import emit

if TYPE_CHECKING:
    from ..flow import Scope
    from ._spec import AgentSpec

__all__ = ["Budget", "UsageMeter", "budget_stop", "check_budget", "counting_together",
           "record_call"]

log = logging.getLogger("agentfootprint.usage")

_LIMITS = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost_usd")


@record_class(kw_only=True)
class Budget(Value):
    """Token and cost limits for one run, and the prices its cost is computed with.

    ``prices`` maps model names to ``Price(...)`` (USD per million tokens) and is merged over
    the built-in table, so ``Budget(prices={...})`` alone, with no limit, prices a run's calls.
    (A frozen dataclass with its methods written once: ``_record.py``, for cold start.)
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    on_exceed: Literal["stop", "warn"] = "stop"
    prices: Mapping[str, Price] = field(default_factory=dict)

    def __init__(self, *, max_input_tokens: int | None = None,
                 max_output_tokens: int | None = None, max_total_tokens: int | None = None,
                 max_cost_usd: float | None = None, on_exceed: Literal["stop", "warn"] = "stop",
                 prices: Mapping[str, Price] | None = None) -> None:
        assign(self, max_input_tokens=max_input_tokens, max_output_tokens=max_output_tokens,
               max_total_tokens=max_total_tokens, max_cost_usd=max_cost_usd,
               on_exceed=on_exceed, prices={} if prices is None else prices)
        self._check()

    def _check(self) -> None:
        for name in _LIMITS[:3]:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ConfigurationError(f"Budget({name}={value!r}) must be an int >= 1 or None")
        cost = self.max_cost_usd
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                                 or not math.isfinite(cost) or cost <= 0):
            raise ConfigurationError(
                f"Budget(max_cost_usd={cost!r}) must be a number of US dollars > 0 or None")
        if self.on_exceed not in ("stop", "warn"):
            raise ConfigurationError(
                f"Budget(on_exceed={self.on_exceed!r}) must be 'stop' or 'warn'")
        object.__setattr__(self, "prices", check_prices(self.prices))

    def limits(self) -> Iterator[tuple[str, float]]:
        """Each limit given, by name."""
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None:
                yield name, value


def check_budget(budget: object, model: str) -> Budget | None:
    """``budget`` checked for an agent of ``model``: a ``Budget`` or None; a cost limit
    without a price for ``model`` is refused (its cost could never be counted)."""
    if budget is None:
        return None
    if not isinstance(budget, Budget):
        raise ConfigurationError(
            f"budget={budget!r} must be a Budget(...) from agentfootprint, e.g. "
            "Budget(max_cost_usd=0.50)")
    if budget.max_cost_usd is not None and price_for(model, budget.prices) is None:
        raise ConfigurationError(
            f"Budget(max_cost_usd={budget.max_cost_usd}) needs a price for model {model!r}, "
            "which the built-in table does not have; pass Budget(..., prices={"
            f"{model!r}: Price(input=..., output=...)}}) in USD per million tokens")
    return budget


class UsageMeter:
    """Tokens and cost added up across the runs made inside ``counting_together``.

    A plain class, not a dataclass: its module loads on every cold start."""

    __slots__ = ("calls", "cost_usd", "input_tokens", "output_tokens")

    def __init__(self, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
                 calls: int = 0) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cost_usd = cost_usd
        self.calls = calls

    def __repr__(self) -> str:
        return (f"UsageMeter(input_tokens={self.input_tokens}, output_tokens="
                f"{self.output_tokens}, cost_usd={self.cost_usd}, calls={self.calls})")

    def add(self, row: Mapping[str, Any]) -> None:
        self.input_tokens += int(row["input_tokens"])
        self.output_tokens += int(row["output_tokens"])
        self.cost_usd += float(row["cost_usd"] or 0.0)
        self.calls += 1

    def used(self) -> dict[str, float]:
        """What is spent, by the name of the ``Budget`` limit that bounds it."""
        return {"max_input_tokens": self.input_tokens, "max_output_tokens": self.output_tokens,
                "max_total_tokens": self.input_tokens + self.output_tokens,
                "max_cost_usd": self.cost_usd}


_shared: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar(
    "agentfootprint_usage_meter", default=None)


@contextlib.contextmanager
def counting_together(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Runs made inside count their calls into ``meter`` and are judged on its totals."""
    token = _shared.set(meter)
    try:
        yield meter
    finally:
        _shared.reset(token)


def record_call(scope: Scope, spec: AgentSpec, response: LLMResponse, *, seconds: float,
                iteration: int, cache: CachePrefix | None) -> None:
    """Record one call's usage, latency (``seconds`` it took) and cost; emit ``cost.tick``;
    judge the budget."""
    # milliseconds to the microsecond, like ``round(seconds * 1000, 3)`` but without its
    # decimal conversion (a few thousand instructions a call); a timing, never compared
    latency = round(seconds * 1_000_000) / 1000
    budget = spec.budget
    model = response.model or spec.model
    if budget is None or not budget.prices:
        price = built_in_price(model)
        if price is None and model != spec.model:  # (the same name would find nothing again)
            price = built_in_price(spec.model)
    else:
        price = price_for(model, budget.prices)
        if price is None and model != spec.model:
            price = price_for(spec.model, budget.prices)
    usage = response.usage
    cost = None if price is None else call_cost(
        price, input=usage.input, output=usage.output, cache_read=usage.cache_read,
        cache_write=usage.cache_write)
    row: dict[str, Any] = {  # one a call, so kept small: zero cache counts are left out
        "model": model, "provider": spec.provider.name, "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cost_usd": None if cost is None else round(cost, 10)}
    if usage.cache_read:
        row["cache_read_tokens"] = usage.cache_read
    if usage.cache_write:
        row["cache_write_tokens"] = usage.cache_write
    if cache:
        row["cache"] = cache  # (the commit freezes a copy of the row: state never shares it)
    # read, appended and written back as one step that neither copies nor walks the list:
    # the commit records and freezes only the new row, whatever the run's length
    scope.append(trace.LLM_USAGE, row)
    scope.append(trace.LLM_LATENCY, latency)
    meter = _shared.get()
    if meter is not None:
        meter.add(row)
    if cost is None and budget is None:
        return  # nothing to tick or judge: no walk over the run's earlier calls
    rows: list[dict[str, Any]] = scope[trace.LLM_USAGE]  # this call's row last
    total_cost = (meter.cost_usd if meter is not None
                  else sum(r["cost_usd"] or 0.0 for r in rows))
    if cost is not None:  # an unpriced call's tokens are in stream.llm_end; its cost unknown
        emit(scope, "cost.tick", {
            "iteration": iteration, "call": len(rows), "model": model,
            "provider": spec.provider.name, "input_tokens": usage.input,
            "output_tokens": usage.output, "cache_read_tokens": usage.cache_read,
            "cache_write_tokens": usage.cache_write, "cost_usd": cost,
            "total_cost_usd": round(total_cost, 10)})
    if budget is not None:
        _judge(scope, budget, rows, meter, total_cost)


def _judge(scope: Scope, budget: Budget, rows: list[dict[str, Any]],
           meter: UsageMeter | None, total_cost: float) -> None:
    if meter is None:  # this run alone: its own calls so far
        meter = UsageMeter()
        for row in rows:
            meter.add(row)
    used = {**meter.used(), "max_cost_usd": total_cost}
    crossed: list[dict[str, Any]] = list(scope.get(trace.BUDGET_CROSSED) or ())
    named = {c["budget"] for c in crossed}
    fresh = []
    for name, limit in budget.limits():
        if name in named or used[name] <= limit:
            continue
        fresh.append({"budget": name, "limit": limit, "spent": used[name], "call": len(rows),
                      "action": "stopped" if budget.on_exceed == "stop" else "warned"})
    if not fresh:
        return
    scope[trace.BUDGET_CROSSED] = [*crossed, *fresh]
    from ..runs._usage import budget_sentence  # (loads the run readers: only on a crossing)

    for item in fresh:
        sentence = budget_sentence(item)
        emit(scope, "cost.limit_hit", {**item, "message": sentence})
        log.warning("run %s: %s", scope.run_id, sentence)


def budget_stop(scope: Scope) -> tuple[str, str] | None:
    """``(stopped_early, rationale)`` when a crossed budget stops the run, else None."""
    for item in scope.get(trace.BUDGET_CROSSED) or ():
        if item.get("action") == "stopped":
            name = item["budget"]
            return f"budget:{name}", f"the {name} budget was crossed"
    return None
