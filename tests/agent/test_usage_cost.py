"""Usage, cost and budgets: per-call usage and cost in the recording, the sum on the result,
budgets that stop or warn at the call that crosses them, and prices users override."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentfootprint import Agent, Budget, ConfigurationError, LLMCall, tool
from agentfootprint.agent._usage import UsageMeter, counting_together
from agentfootprint.events._catalogue import payload_model
from agentfootprint.flow._commitlog import CommitLog
from agentfootprint.providers import PRICES, Price, mock
from agentfootprint.providers._pricing import PRICES_AS_OF, call_cost, price_for
from agentfootprint.runs import trace
from agentfootprint.runs._usage import usage_of

# $1 per million input tokens, $2 per million output: a call of 1000 in / 100 out is $0.0012
PRICE = Price(input=1.0, output=2.0, cache_read=0.1, cache_write=1.25)
PRICES_ = {"house-model": PRICE}
CALL_USD = (1000 * 1.0 + 100 * 2.0) / 1_000_000


def looked() -> tuple[Any, list[str]]:
    seen: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        seen.append(q)
        return f"found {q}"

    return lookup, seen


def asks(n: int, *, usage: dict[str, int] | None = None) -> list[Any]:
    """``n`` replies asking for a lookup, then the answer; each reply reports ``usage``."""
    used = usage or {"input": 1000, "output": 100}
    return [{"content": f"step {k}", "tool_calls": [{"name": "lookup", "args": {"q": f"q{k}"}}],
             "usage": used} for k in range(n)] + [{"content": "done", "usage": used}]


def agent(script: list[Any], budget: Budget | None = None, **options: Any) -> tuple[Agent, Any]:
    lookup, seen = looked()
    return Agent(provider=mock(script=script), model="house-model", tools=[lookup],
                 budget=budget if budget is not None else Budget(prices=PRICES_),
                 **options), seen


def events(ag: Agent, name: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    ag.on(name, lambda event: got.append(dict(event.payload)))
    return got


# -- the recording and the result --------------------------------------------------------------


async def test_each_call_has_its_cost_in_the_recording_and_the_result_sums_them() -> None:
    """Per call: model, provider, tokens, cached tokens and cost in ``llm_usage`` (and the
    latency in ``llm_latency_ms``), read back from the JSON log; the result sums them."""
    cached = {"input": 1000, "output": 100, "cache_read": 600, "cache_write": 0}
    ag, seen = agent(asks(2, usage=cached))
    result = await ag.run("go")
    assert seen == ["q0", "q1"]
    rows = result.recording.state[trace.LLM_USAGE]
    one = call_cost(PRICE, input=1000, output=100, cache_read=600)
    assert one is not None and one == pytest.approx((400 * 1.0 + 600 * 0.1 + 100 * 2.0) / 1_000_000)
    assert [(r["model"], r["provider"], r["input_tokens"], r["output_tokens"],
             r.get("cache_read_tokens", 0), r["cost_usd"]) for r in rows] == [
        ("house-model", "mock", 1000, 100, 600, pytest.approx(one))] * 3
    latencies = result.recording.state[trace.LLM_LATENCY]
    assert len(latencies) == 3 and all(isinstance(x, float) and x >= 0 for x in latencies)
    log = CommitLog.from_json(json.loads(json.dumps(result.recording.log.to_json())))
    usage = usage_of(log)  # another process reads the same from the stored recording
    assert [c.cost_usd for c in usage.calls] == [pytest.approx(one)] * 3
    assert [c.iteration for c in usage.calls] == [1, 2, 3]
    assert result.usage.cost_usd == pytest.approx(3 * one)
    assert (result.usage.input_tokens, result.usage.output_tokens,
            result.usage.cache_read_tokens, result.usage.total_tokens) == (3000, 300, 1800, 3300)
    assert result.usage.input_tokens == result.input_tokens
    shown = str(result.usage)
    assert "3 LLM call(s)" in shown and "#3 mock/house-model" in shown and "ms" in shown


async def test_cost_tick_carries_each_calls_cost_and_the_running_total() -> None:
    """``cost.tick`` per call, right after its ``stream.llm_end``, validating against its
    declared payload model."""
    ag, _ = agent(asks(1))
    ticks = events(ag, "cost.tick")
    order: list[str] = []
    ag.on("*", lambda event: order.append(event.type.removeprefix("agentfootprint.")))
    await ag.run("go")
    ends = [i for i, name in enumerate(order) if name == "stream.llm_end"]
    assert [order[i + 1] for i in ends] == ["cost.tick", "cost.tick"]
    model = payload_model("cost.tick")
    for tick in ticks:
        model.model_validate(tick)
    assert [(t["call"], t["cost_usd"], t["total_cost_usd"]) for t in ticks] == [
        (1, pytest.approx(CALL_USD), pytest.approx(CALL_USD)),
        (2, pytest.approx(CALL_USD), pytest.approx(2 * CALL_USD))]


async def test_an_unknown_model_costs_none_not_zero_and_says_so() -> None:
    """No price: cost None per call and in the sum, and the text says why; no cost.tick
    (the call's tokens are in stream.llm_end)."""
    ag = Agent(provider=mock(script=["hi"]), model="nobody-prices-me")
    ticks = events(ag, "cost.tick")
    result = await ag.run("go")
    assert result.usage.calls[0].cost_usd is None
    assert result.usage.cost_usd is None and result.usage.unpriced == ("nobody-prices-me",)
    assert "cost unknown: no price for 'nobody-prices-me'" in str(result.usage)
    assert ticks == []


def test_prices_match_dated_snapshots_never_a_longer_name() -> None:
    """A dated snapshot takes its model's price; a longer name never a shorter one's."""
    assert price_for("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert price_for("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert price_for("gpt-4o-mini") != price_for("gpt-4o")
    assert price_for("gpt-5-pro") is None and price_for("gpt-4o-realtime") is None
    assert price_for("gpt-4o", {"gpt-4o": PRICE}) == PRICE  # the agent's table wins
    assert PRICES_AS_OF[:4].isdigit()


async def test_the_built_in_table_prices_an_agent_without_a_budget() -> None:
    """No Budget: calls of a listed model are priced from the built-in table."""
    ag = Agent(provider=mock(script=[{"content": "hi", "usage": {"input": 1_000_000,
                                                                 "output": 0}}]),
               model="gpt-4o-mini")
    result = await ag.run("go")
    assert result.usage.cost_usd == pytest.approx(PRICES["gpt-4o-mini"].input)


# -- budgets -----------------------------------------------------------------------------------


async def test_a_cost_budget_stops_the_run_at_the_call_that_crosses_it() -> None:
    """$0.0030 allows two calls of $0.0012; the third crosses it: the run ends there, its
    tool never runs, and the result names the budget."""
    ag, seen = agent(asks(5), Budget(max_cost_usd=0.003, prices=PRICES_))
    hits = events(ag, "cost.limit_hit")
    result = await ag.run("go")
    assert len(result.usage.calls) == 3
    assert seen == ["q0", "q1"]  # the third call's lookup never ran
    assert result.stopped_early == "budget:max_cost_usd"
    assert result.content == "step 2"  # what the model said at the crossing call
    assert result.usage.budget == (
        "Budget(max_cost_usd=0.003) was crossed at LLM call 3 ($0.003600 used); "
        "the run stopped there",)
    assert [(h["budget"], h["call"], h["action"]) for h in hits] == [
        ("max_cost_usd", 3, "stopped")]
    assert "max_cost_usd" in result.narrative()  # the route says why it finished


@pytest.mark.parametrize(("budget", "calls"), [
    (Budget(max_input_tokens=1500, prices=PRICES_), 2),
    (Budget(max_output_tokens=100, prices=PRICES_), 2),
    (Budget(max_total_tokens=3299, prices=PRICES_), 3),  # 3300 would be reached, not crossed
])
async def test_token_budgets_stop_at_the_crossing_call(budget: Budget, calls: int) -> None:
    """Input, output and total token limits each end the run at the call past them."""
    ag, _ = agent(asks(5), budget)
    result = await ag.run("go")
    assert len(result.usage.calls) == calls
    assert result.stopped_early is not None and result.stopped_early.startswith("budget:max_")


async def test_warn_mode_records_emits_and_logs_once_and_the_run_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """on_exceed='warn': every call happens; the crossing is an event and a WARNING, once."""
    ag, seen = agent(asks(4), Budget(max_cost_usd=0.002, on_exceed="warn", prices=PRICES_))
    hits = events(ag, "cost.limit_hit")
    with caplog.at_level(logging.WARNING, logger="agentfootprint.usage"):
        result = await ag.run("go")
    assert result.content == "done" and result.stopped_early is None
    assert seen == ["q0", "q1", "q2", "q3"] and len(result.usage.calls) == 5
    assert [(h["call"], h["action"]) for h in hits] == [(2, "warned")]
    warned = [r.getMessage() for r in caplog.records if r.name == "agentfootprint.usage"]
    assert len(warned) == 1 and "Budget(max_cost_usd=0.002) was crossed at LLM call 2" in warned[0]
    assert "went on" in result.usage.budget[0]


async def test_runs_counted_together_share_one_budget() -> None:
    """Inside counting_together (an explanation's re-runs), a budget judges the sum."""
    meter = UsageMeter()
    with counting_together(meter):
        first, _ = agent(asks(1), Budget(max_cost_usd=0.004, prices=PRICES_))
        done = await first.run("go")
        second, _ = agent(asks(5), Budget(max_cost_usd=0.004, prices=PRICES_))
        cut = await second.run("go")
    assert done.stopped_early is None and len(done.usage.calls) == 2
    assert cut.stopped_early == "budget:max_cost_usd" and len(cut.usage.calls) == 2
    assert meter.calls == 4 and meter.cost_usd == pytest.approx(4 * CALL_USD)


async def test_a_single_call_is_priced_and_judged_too() -> None:
    """LLMCall takes a budget: its one call is priced and a crossing is recorded."""
    call = LLMCall(provider=mock(script=[{"content": "hi", "usage": {"input": 1000,
                                                                     "output": 100}}]),
                   model="house-model", budget=Budget(max_total_tokens=10, prices=PRICES_))
    result = await call.run("go")
    assert result.usage.cost_usd == pytest.approx(CALL_USD)
    assert "max_total_tokens" in result.usage.budget[0]


def test_a_cost_budget_needs_a_price_for_the_model() -> None:
    """A cost limit for a model no table prices is refused when the agent is built."""
    with pytest.raises(ConfigurationError, match=r"needs a price for model 'house-model'.*"
                                                 r"prices=\{'house-model': Price"):
        Agent(provider=mock(script=["x"]), model="house-model", budget=Budget(max_cost_usd=1))


@pytest.mark.parametrize(("options", "message"), [
    ({"max_cost_usd": 0}, "max_cost_usd=0"),
    ({"max_input_tokens": 0}, "max_input_tokens=0"),
    ({"max_total_tokens": 1.5}, "max_total_tokens=1.5"),
    ({"on_exceed": "halt"}, "on_exceed='halt'"),
    ({"prices": {"m": 1.0}}, r"prices\['m'\]=1.0"),
])
def test_bad_budgets_are_refused_naming_the_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Budget(**options)


def test_bad_prices_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"Price\(output=-1\)"):
        Price(input=1, output=-1)
    with pytest.raises(ConfigurationError, match=r"budget=0\.5 must be a Budget"):
        Agent(provider=mock(script=["x"]), model="m", budget=0.5)  # type: ignore[arg-type]


# -- timings -----------------------------------------------------------------------------------


async def test_latency_is_a_timing_that_comparisons_drop() -> None:
    """Latency is declared of kind 'timing'; two runs of the same script agree once timings
    are dropped (trace.without_timings), whatever their latencies were."""
    assert trace.declared_key(trace.LLM_LATENCY).kinds == frozenset({"timing"})  # type: ignore[union-attr]
    assert trace.LLM_LATENCY in trace.keys_of_kinds({"timing"})[0]
    one, _ = agent(asks(1))
    two, _ = agent(asks(1))
    a, b = await one.run("go"), await two.run("go")
    assert trace.LLM_LATENCY in a.recording.state
    assert trace.LLM_LATENCY not in trace.without_timings(a.recording.state)
    assert trace.without_timings(a.recording.state) == trace.without_timings(b.recording.state)


async def test_a_compositions_usage_has_every_member_call() -> None:
    """A Sequence of two agents: both calls, each with its member's scope, and the sum."""
    from agentfootprint.compose import Sequence

    def member(reply: str, used: int) -> Agent:
        return Agent(provider=mock(script=[{"content": reply, "usage": {"input": used,
                                                                        "output": 5}}]),
                     model="house-model", budget=Budget(prices=PRICES_))

    result = await Sequence(("draft", member("one", 10)), ("polish", member("two", 20))).run("go")
    usage = result.usage
    assert [(c.scope.split("#")[0], c.input_tokens) for c in usage.calls] == [
        ("draft", 10), ("polish", 20)]
    assert usage.cost_usd == pytest.approx((30 * 1.0 + 10 * 2.0) / 1_000_000)
