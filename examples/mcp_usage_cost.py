"""Tools from an MCP server, usage and cost (USAGE.md §9), offline.

Run: python examples/mcp_usage_cost.py
The MCP server is this very file, started as a subprocess over stdio (``... serve``), built
with the official ``mcp`` SDK — in place of ``uvx my-orders-mcp``; ``url="http://.../mcp"``
reaches one over streamable HTTP instead. The model is the scripted mock in place of
``anthropic(model="claude-sonnet-4-5")``, reporting the token counts a real call would (the
stable prefix written to the prompt cache once, then read from it); the run is priced with
the built-in table for that model and bounded by a cost budget.
Needs ``pip install 'agentfootprint[mcp]'``.
"""

import asyncio
import sys

from agentfootprint import Agent, Budget
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock
from agentfootprint.tools import mcp_server


def serve() -> None:
    """The local MCP server: an order lookup (read-only) and a refund."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("orders", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup_order(order_id: str) -> str:
        """Look up an order by its id."""
        return f"order {order_id}: delivered 3 days ago, 42.00 EUR, refundable within 30 days"

    @server.tool()
    def refund(order_id: str, amount: float) -> str:
        """Refund an amount on an order."""
        return f"refunded {amount:.2f} EUR on {order_id}"

    server.run("stdio")


async def main() -> None:
    async with mcp_server(command=[sys.executable, __file__, "serve"]) as orders:
        for t in orders.tools:
            print(f"tool {t.name} from MCP server {orders.name!r} "
                  f"(safe to repeat: {not t.side_effects})")
        agent = Agent(
            provider=mock(script=[
                {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}],
                 "usage": {"input": 1200, "output": 30, "cache_write": 1000}},
                {"tool_calls": [{"name": "refund",
                                 "args": {"order_id": "A-1001", "amount": 42.0}}],
                 "usage": {"input": 1300, "output": 35, "cache_read": 1000}},
                {"content": "Refunded 42.00 EUR on order A-1001: it was delivered 3 days ago, "
                            "within the 30-day window.",
                 "usage": {"input": 1400, "output": 28, "cache_read": 1000}},
            ]),
            model="claude-sonnet-4-5",
            tools=[*orders.tools],
            budget=Budget(max_cost_usd=0.50),
        )
        result = await agent.run("Refund A-1001?")
    print(result.content)
    print()
    print(result.usage)  # per call: model, latency, input/output/cached tokens, cost; the sum
    print()
    print(backtrack(result))


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        asyncio.run(main())
