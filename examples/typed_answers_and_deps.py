"""Typed answers, a live event stream, your own dependencies (USAGE.md §8), offline.

Run: python examples/typed_answers_and_deps.py

A refund agent answers with a typed ``RefundDecision`` (``output_type=``); its ``lookup_order``
tool reads the orders database the caller hands each run (``agent.run(..., deps=Deps(...))``)
through ``ctx: RunContext[Deps]`` — a parameter the model never sees. ``run_stream`` yields the
same run as typed events, what an SSE endpoint forwards; and the tool is still the function it
was made from, so a unit test calls it with a hand-built ``RunContext`` and no agent. Deps are
live objects: they reach the tool and are never recorded (not in the recording, a checkpoint,
an event or the run store). The model is the scripted mock in place of
``openai(model="gpt-4o-mini")``; ``OrdersDB`` stands in for your database session.
"""

import asyncio
import json
from dataclasses import dataclass

from pydantic import BaseModel

from agentfootprint import Agent, RunContext, tool
from agentfootprint.events import RunFinished, TextDelta, ToolCalled, ToolReturned
from agentfootprint.explain import backtrack
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs import Recording


class OrdersDB:
    """A tiny in-memory orders database standing in for a real session."""

    dsn = "postgresql://refunds:s3cret@db.internal/orders"  # must never reach a recording

    def __init__(self, orders: dict[str, tuple[str, int]]) -> None:
        self.orders = orders

    async def describe(self, order_id: str) -> str:
        item, days = self.orders[order_id]
        return f"{order_id}: {item}, delivered {days} days ago"


class RefundDecision(BaseModel):
    approved: bool
    reason: str


@dataclass
class Deps:
    orders: OrdersDB  # whatever your app has: a DB session, an HTTP client, the user


@tool
async def lookup_order(ctx: RunContext[Deps], order_id: str) -> str:
    """Look up an order by id."""
    return await ctx.deps.orders.describe(order_id)


def model(request: LLMRequest) -> object:
    """The scripted model: look the order up, then decide by the 30-day window, as JSON."""
    looked_up = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
    if not looked_up:
        return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]}
    days = int(looked_up[-1].split("delivered ")[1].split(" ")[0])
    within = days <= 30
    return json.dumps({"approved": within, "reason": f"delivered {days} days ago, "
                       f"{'within' if within else 'outside'} the 30-day window"})


agent = Agent(provider=mock(respond=model), tools=[lookup_order], output_type=RefundDecision)
db = OrdersDB({"A-1001": ("running shoes", 12)})


async def main() -> None:
    result = await agent.run("Refund A-1001?", deps=Deps(orders=db))
    decision = result.output  # a RefundDecision, validated
    print(f"approved: {decision.approved} ({decision.reason})")
    print(backtrack(result, field="approved"))

    print("\nThe same run as a stream of events (what an SSE endpoint forwards):")
    async with agent.run_stream("Refund A-1001?", deps=Deps(orders=db)) as run:
        async for event in run:  # in an endpoint: yield event.sse()
            match event:
                case ToolCalled():
                    print(f"[tool call]   {event.tool_name} {event.args}")
                case ToolReturned():
                    print(f"[tool result] {event.result}")
                case TextDelta():
                    pass  # the answer's text, piece by piece
                case RunFinished():
                    print(f"[result]      {event.output}")
    print(f"run.result.output.approved: {run.result.output.approved}")

    ctx = RunContext(deps=Deps(orders=OrdersDB({"A-1001": ("a test pair", 45)})))
    print(f"\nunit test, no agent: {await lookup_order.fn(ctx, 'A-1001')}")

    kept = Recording.of(result).model_dump_json() + json.dumps(result.checkpoint)
    print(f"deps in the recording or checkpoint: {'s3cret' in kept}")


asyncio.run(main())
