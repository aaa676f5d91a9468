"""A small real MCP server (the ``mcp`` SDK's MCPServer) for the MCP client tests.

Run: ``python mcp_orders_server.py stdio`` or ``python mcp_orders_server.py http PORT``
(streamable HTTP on 127.0.0.1:PORT, endpoint ``/mcp``). Its tools: ``lookup_order``
(read-only), ``refund`` (has an effect), ``broken`` (reports an error), ``crash`` (the
process dies mid-call) and ``dotted.name`` (a name our tools cannot carry as it is).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("orders", log_level="WARNING")

ORDERS = {"A-1001": {"status": "delivered", "amount": 42.0, "currency": "EUR"}}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    order = ORDERS.get(order_id)
    if order is None:
        return f"no order {order_id}"
    return (f"order {order_id}: {order['status']}, {order['amount']:.2f} "
            f"{order['currency']}, refundable within 30 days")


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def refund(order_id: str, amount: float) -> str:
    """Refund an amount on an order."""
    return f"refunded {amount:.2f} EUR on {order_id}"


@server.tool()
def broken(order_id: str) -> str:
    """Always fails (for error mapping)."""
    raise ToolError(f"order store offline while reading {order_id}")


@server.tool()
def crash() -> str:
    """The server process dies while running this call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose MCP name has a dot."""
    return "dotted ok"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
