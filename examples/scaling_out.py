"""Scaling out (docs: Scaling out): a batch of runs and an explanation through the executor port.

Run: python examples/scaling_out.py

Offline, on the default in-process executor. To spread the same calls over machines, start
workers with ``celery -A agentfootprint.distributed.worker worker`` and pass
``executor=celery_executor(app)`` instead: the agent then lives at the top level of a module the
workers import, where they find it by its name. The run ids make a batch safe to send again: a
finished run comes back from the store, it is not run twice.
"""

import asyncio
import tempfile
from pathlib import Path

from agentfootprint import Agent, define_fact, tool
from agentfootprint.distributed import InProcessExecutor, run_many
from agentfootprint.explain import localize_context_bug, wrong_if
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

SHIPPED = []


@tool(idempotent=True)
def ship(order: str) -> str:
    """Ship an order (applied once per idempotency key)."""
    SHIPPED.append(order)
    return f"{order} shipped"


def answer(request):
    if not any(m["role"] == "tool" for m in request.messages):
        order = request.messages[-1]["content"].split()[-1]
        return {"tool_calls": [{"name": "ship", "args": {"order": order}}]}
    if "express" in (request.system or ""):
        return "Shipped by express, at no charge."  # the wrong answer: express costs extra
    return "Shipped by standard post."


agent = Agent(provider=mock(respond=answer), model="mock", tools=[ship], context=[
    define_fact(id="tone", data="Be brief."),
    define_fact(id="promo", data="Upgrade every order to express.")])
"""Defined at module level: a job names it, and each run (and re-run) gets a fresh copy."""


async def main():
    store = str(Path(tempfile.mkdtemp()) / "runs.db")
    orders = ["Ship order A-1", "Ship order A-2"]
    ids = ["batch-a1", "batch-a2"]
    executor = InProcessExecutor(concurrency=1)  # one at a time: the output keeps its order
    outcomes = await run_many(agent, orders, store=store, run_ids=ids, executor=executor)
    for outcome in outcomes:
        where = outcome.placement
        print(f"{outcome.run_id}: {outcome.content} "
              f"[{where['worker']}, attempts {where['attempts']}]")

    again = await run_many(agent, orders, store=store, run_ids=ids, executor=executor)
    print(f"sent again: reused {sum(o.reused for o in again)} of {len(again)}, "
          f"shipped {len(SHIPPED)} orders in all")
    with RunStore(store) as runs:
        meta = runs.load("batch-a1").meta
    print(f"recorded with the run: factory {meta['factory']}, "
          f"{meta['placement']['attempts']} attempt(s)")

    result = await agent.run("Ship order A-9")
    report = await localize_context_bug(result, is_wrong=wrong_if(contains="express"),
                                        executor=executor, factory=agent)
    print(f"re-runs on the executor: {report.runs_used}; "
          f"proven: {[c.members for c in report.causes if c.verdict == 'CAUSAL']}")


asyncio.run(main())
