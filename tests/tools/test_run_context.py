"""Dependencies in tools: ``run(..., deps=...)`` reaches ``ctx: RunContext[Deps]``, is never
recorded, and a ``@tool`` stays callable as the function it was made from."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import (
    Agent,
    ConfigurationError,
    ProviderError,
    RunContext,
    Tool,
    ToolContext,
    Tracing,
    check_in_approved,
    define_tool,
    tool,
)
from agentfootprint.compose import Sequence
from agentfootprint.explain._whatif import rerun_without_sources
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import RunStore

SECRET = "s3cr3t-dsn-postgres://admin:hunter2@db"


@dataclass
class Orders:
    """A tiny in-memory orders database standing in for a real session."""

    rows: dict[str, str] = field(default_factory=lambda: {"A-1001": "A-1001: shoes, 42 EUR"})
    dsn: str = SECRET
    reads: list[str] = field(default_factory=list)

    def describe(self, order_id: str) -> str:
        self.reads.append(order_id)
        return self.rows.get(order_id, f"{order_id}: no such order")


@dataclass
class Deps:
    orders: Orders


@tool
async def lookup_order(ctx: RunContext[Deps], order_id: str) -> str:
    """Look up an order by id."""
    return ctx.deps.orders.describe(order_id)


def _calls(*steps: tuple[str, dict[str, Any]], answer: str = "done") -> Any:
    """A model asking for one call per step, then answering."""
    return mock(script=[*({"tool_calls": [{"name": n, "args": a}]} for n, a in steps), answer])


def _agent(*steps: tuple[str, dict[str, Any]], tools: list[Tool] | None = None,
           **options: Any) -> Agent:
    return Agent(provider=_calls(*steps), model="mock", tools=tools or [lookup_order],
                 **options)


def _tool_results(result: Any) -> list[str]:
    return [str(m["content"]) for m in result.history if m["role"] == "tool"]


# -- the context parameter ---------------------------------------------------------------------


def test_the_context_parameter_is_not_in_the_schema() -> None:
    """``ctx: RunContext[Deps]`` is the tool's, not the model's: the schema shows order_id only."""
    assert lookup_order.input_schema["properties"].keys() == {"order_id"}
    assert lookup_order.input_schema["required"] == ["order_id"]


def test_tool_context_is_run_context() -> None:
    """One class, two names: the old ``ToolContext`` annotation and constructor keep working."""
    assert ToolContext is RunContext
    ctx = ToolContext("c1", 2, "r1")
    assert isinstance(ctx, RunContext)
    assert (ctx.tool_call_id, ctx.iteration, ctx.run_id, ctx.idempotency_key) == \
        ("c1", 2, "r1", "r1:c1")


async def test_deps_reach_the_tool_with_the_call_ids() -> None:
    seen: list[RunContext[Deps]] = []

    @tool
    def where(order_id: str, ctx: RunContext[Deps]) -> str:
        """Where an order is."""
        seen.append(ctx)
        return ctx.deps.orders.describe(order_id)

    orders = Orders()
    result = await _agent(("where", {"order_id": "A-1001"}), tools=[where]).run(
        "Where is A-1001?", deps=Deps(orders=orders))
    assert _tool_results(result) == ["A-1001: shoes, 42 EUR"]
    assert orders.reads == ["A-1001"]
    ctx = seen[0]
    assert ctx.deps.orders is orders
    assert (ctx.run_id, ctx.iteration, ctx.tool_name) == (result.run_id, 1, "where")
    assert ctx.idempotency_key == f"{result.run_id}:{ctx.tool_call_id}"


async def test_a_plain_tool_context_annotation_gets_the_deps_too() -> None:
    @tool
    def count(ctx: ToolContext) -> int:
        """How many orders there are."""
        return len(ctx.deps.orders.rows)

    result = await _agent(("count", {}), tools=[count]).run("How many?",
                                                            deps=Deps(orders=Orders()))
    assert _tool_results(result) == ["1"]


async def test_define_tool_execute_reads_deps() -> None:
    def execute(args: dict[str, Any], ctx: RunContext[Deps]) -> str:
        return ctx.deps.orders.describe(args["order_id"])

    raw = define_tool("raw_lookup", "Look up an order.",
                      {"type": "object", "properties": {"order_id": {"type": "string"}}},
                      execute)
    result = await _agent(("raw_lookup", {"order_id": "A-1001"}), tools=[raw]).run(
        "A-1001?", deps=Deps(orders=Orders()))
    assert _tool_results(result) == ["A-1001: shoes, 42 EUR"]
    assert raw.fn is execute


async def test_concurrent_runs_of_one_agent_each_see_their_own_deps() -> None:
    def respond(request: LLMRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]}
        return next(m["content"] for m in request.messages if m["role"] == "tool")

    agent = Agent(provider=mock(respond=respond), model="mock", tools=[lookup_order])
    first, second = Orders(), Orders(rows={"A-1001": "A-1001: a hat, 9 EUR"})
    one, two = await asyncio.gather(agent.run("?", deps=Deps(first)),
                                    agent.run("?", deps=Deps(second)))
    assert (one.content, two.content) == ("A-1001: shoes, 42 EUR", "A-1001: a hat, 9 EUR")
    assert first.reads == second.reads == ["A-1001"]


# -- callable as itself ------------------------------------------------------------------------


async def test_a_tool_is_callable_as_its_function() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert add(1, 2) == 3
    assert add.fn(a=2, b=3) == 5
    orders = Orders()
    assert await lookup_order.fn(RunContext(deps=Deps(orders)), "A-1001") == \
        "A-1001: shoes, 42 EUR"
    assert await lookup_order(RunContext(deps=Deps(orders)), order_id="B-2") == \
        "B-2: no such order"


def test_a_tool_not_made_from_a_function_says_so_when_called() -> None:
    bare = Tool("bare", "Nothing.", {"type": "object", "properties": {}},
                lambda args, ctx: None, lambda args: [])
    with pytest.raises(TypeError, match="'bare' was not made from a function"):
        bare()


# -- missing deps --------------------------------------------------------------------------------


async def test_a_tool_reading_deps_in_a_run_without_them_fails_the_run_naming_the_tool() -> None:
    agent = _agent(("lookup_order", {"order_id": "A-1001"}))
    with pytest.raises(ConfigurationError) as caught:
        await agent.run("Refund A-1001?")
    message = str(caught.value)
    assert "'lookup_order'" in message and "run(..., deps=...)" in message


def test_a_hand_built_context_without_deps_says_how_to_give_them() -> None:
    with pytest.raises(ConfigurationError, match=r"this tool reads ctx.deps.*deps=\.\.\."):
        RunContext().deps


async def test_a_context_tool_that_reads_no_deps_runs_without_them() -> None:
    @tool
    def whoami(ctx: RunContext[Deps]) -> str:
        """The run this call belongs to."""
        return ctx.run_id

    result = await _agent(("whoami", {}), tools=[whoami]).run("who?")
    assert _tool_results(result) == [result.run_id]


# -- follow-ups, resumes, compositions -----------------------------------------------------------


async def test_follow_up_takes_deps() -> None:
    agent = Agent(provider=mock(script=["hello", {"tool_calls": [{
        "name": "lookup_order", "args": {"order_id": "A-1001"}}]}, "done"]),
                  model="mock", tools=[lookup_order])
    await agent.run("hi")
    orders = Orders()
    result = await agent.follow_up("and A-1001?", deps=Deps(orders))
    assert orders.reads == ["A-1001"] and result.content == "done"


async def test_a_paused_run_resumes_with_deps_given_again() -> None:
    @tool(check_in=True)
    async def refund(ctx: RunContext[Deps], order_id: str) -> str:
        """Refund an order."""
        return f"refunded {ctx.deps.orders.describe(order_id)}"

    agent = _agent(("refund", {"order_id": "A-1001"}), tools=[refund])
    paused = await agent.run("Refund A-1001", deps=Deps(Orders()))
    assert paused.paused
    checkpoint = json.loads(json.dumps(paused.checkpoint))
    with pytest.raises(ConfigurationError, match=r"'refund' reads ctx\.deps"):
        await agent.resume(checkpoint, check_in_approved(by="ops"))
    orders = Orders()
    done = await agent.resume(checkpoint, check_in_approved(by="ops"), deps=Deps(orders))
    assert orders.reads == ["A-1001"]
    assert _tool_results(done) == ["refunded A-1001: shoes, 42 EUR"]


class Killed(BaseException):
    """The process dying mid-call: nothing of the agent sees it."""


async def test_a_killed_run_resumed_by_id_gets_the_deps_given_to_resume(tmp_path: Path) -> None:
    orders = Orders()
    kill = [True]

    @tool(side_effects=False)
    async def slow_lookup(ctx: RunContext[Deps], order_id: str) -> str:
        """Look up an order (safe to repeat)."""
        if kill.pop() if kill else False:
            raise Killed
        return ctx.deps.orders.describe(order_id)

    def respond(request: LLMRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "c1", "name": "slow_lookup",
                                    "args": {"order_id": "A-1001"}}]}
        return "found it"

    def build() -> Agent:
        return Agent(provider=mock(respond=respond), model="mock", tools=[slow_lookup],
                     tracing=Tracing(run_store=RunStore(tmp_path / "runs.db")))

    with pytest.raises(Killed):
        await build().run("A-1001?", run_id="killed-run", deps=Deps(Orders()))
    result = await build().resume("killed-run", deps=Deps(orders))
    assert result.content == "found it" and orders.reads == ["A-1001"]


async def test_a_failed_run_replayed_with_resume_on_error_gets_the_deps_given_to_it() -> None:
    failed = [False]

    def respond(request: LLMRequest) -> Any:
        if not failed[0]:
            failed[0] = True
            raise ProviderError("upstream 503", provider="mock", status=503, retryable=True)
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]}
        return "found it"

    agent = Agent(provider=mock(respond=respond), model="mock", tools=[lookup_order])
    with pytest.raises(ProviderError) as caught:
        await agent.run("A-1001?", deps=Deps(Orders()))
    orders = Orders()
    result = await agent.resume_on_error(caught.value, deps=Deps(orders))
    assert result.content == "found it" and orders.reads == ["A-1001"]


async def test_a_composition_passes_deps_to_its_member_agents() -> None:
    first_orders = Orders()
    first = _agent(("lookup_order", {"order_id": "A-1001"}), name="first")
    second = _agent(("lookup_order", {"order_id": "B-2"}), name="second")
    pipeline = Sequence(("first", first), ("second", second))
    result = await pipeline.run("check both", deps=Deps(first_orders))
    assert first_orders.reads == ["A-1001", "B-2"]
    assert result.content == "done"


async def test_an_agent_used_as_a_tool_sees_the_callers_deps() -> None:
    inner = _agent(("lookup_order", {"order_id": "A-1001"}), name="inner")
    outer = Agent(provider=_calls(("orders_desk", {"request": "A-1001?"}), answer="ok"),
                  model="mock", tools=[inner.as_tool(name="orders_desk",
                                                     description="Answers order questions.")])
    orders = Orders()
    await outer.run("ask the desk", deps=Deps(orders))
    assert orders.reads == ["A-1001"]


# -- never recorded ------------------------------------------------------------------------------


async def test_deps_are_never_recorded(tmp_path: Path) -> None:
    """No recording, checkpoint, event, run-store row or context repr holds the deps."""

    @tool(check_in=True)
    async def refund(ctx: RunContext[Deps], order_id: str) -> str:
        """Refund an order."""
        return f"refunded {len(ctx.deps.orders.describe(order_id))} chars"

    store_path = tmp_path / "runs.db"
    agent = Agent(provider=_calls(("lookup_order", {"order_id": "A-1001"}),
                                  ("refund", {"order_id": "A-1001"})),
                  model="mock", tools=[lookup_order, refund],
                  tracing=Tracing(run_store=RunStore(store_path)))
    events: list[Any] = []
    agent.on("*", events.append)
    seen: list[str] = []

    @tool
    def peek(ctx: RunContext[Deps]) -> str:
        """Not used by the agent: a repr of a context with deps."""
        return repr(ctx)

    orders = Orders()
    seen.append(peek(RunContext(deps=Deps(orders))))
    paused = await agent.run("Refund A-1001", deps=Deps(orders))
    checkpoint = json.dumps(paused.checkpoint)
    done = await agent.resume(json.loads(checkpoint), check_in_approved(by="ops"),
                              deps=Deps(orders))
    assert orders.reads == ["A-1001", "A-1001"]
    from agentfootprint.runs import Recording

    texts = [checkpoint, json.dumps(done.checkpoint),
             Recording.of(paused).model_dump_json(), Recording.of(done).model_dump_json(),
             json.dumps([repr(e) for e in events]), *seen]
    for text in texts:
        assert SECRET not in text and "hunter2" not in text
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"hunter2" not in stored
    assert len(events) > 5 and "Deps" in seen[0]  # the repr names the type, not the value


# -- explanations --------------------------------------------------------------------------------


async def test_an_explanation_re_run_that_needs_deps_is_inconclusive_not_a_crash() -> None:
    """Re-runs are started without deps (they are never recorded): a live call of a tool that
    reads them fails that re-run, which then counts as not completed — INCONCLUSIVE."""
    from agentfootprint import define_fact

    @tool(side_effects=False)
    def stock(ctx: RunContext[Deps], order_id: str) -> str:
        """Stock level for an order (safe to repeat)."""
        return ctx.deps.orders.describe(order_id)

    def respond(request: LLMRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            target = "A-1001" if "Be brief." in (request.system or "") else "B-2"
            return {"tool_calls": [{"name": "stock", "args": {"order_id": target}}]}
        return "IN STOCK"

    agent = Agent(provider=mock(respond=respond), model="m", tools=[stock],
                  context=[define_fact(id="style", data="Be brief.")])
    result = await agent.run("Stock?", deps=Deps(Orders()))
    probe = await rerun_without_sources(result, rebuild=agent.without, sources=["style"],
                                        is_wrong=lambda a: "IN STOCK" in a)
    assert probe.verdict == "INCONCLUSIVE" and probe.probe.incomplete == 3
    assert "'stock' reads ctx.deps" in probe.why
