"""Our agent (and a flowchart) served over MCP by ``serve_mcp``, for the serve tests.

Run: ``python mcp_agent_server.py agent stdio``, ``... agent http PORT`` or
``... chart stdio``. The agent's model is the mock provider: asked a question, it looks the
order up with its tool, then answers from the tool's result.
"""

from __future__ import annotations

import sys

from agentfootprint import Agent, tool
from agentfootprint.flow import flow_chart
from agentfootprint.providers import mock
from agentfootprint.serve import serve_mcp


@tool(side_effects=False)
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: delivered, 42.00 EUR, refundable within 30 days"


def respond(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return f"Yes: {last['content']}."
    order = last["content"].split()[-1].rstrip("?")
    return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": order}}]}


agent = Agent(provider=mock(respond=respond), name="support", tools=[lookup_order],
              system="You answer refund questions with lookup_order.")


def score(scope):
    scope["score"] = 700 if scope.args["applicant"] == "Ada" else 580


def route(scope):
    return "approved" if scope["score"] >= 620 else "rejected"


chart = (flow_chart("Score", score)
         .then("Route", route)
         .build(description="Score a loan applicant and decide.",
                input_schema={"type": "object", "required": ["applicant"],
                              "properties": {"applicant": {"type": "string"}}}))


if __name__ == "__main__":
    target, options = (chart, {"tool_name": "loan_decision"}) if sys.argv[1] == "chart" \
        else (agent, {})
    if sys.argv[2] == "http":
        serve_mcp(target, transport="streamable-http", port=int(sys.argv[3]), **options)
    else:
        serve_mcp(target, **options)
