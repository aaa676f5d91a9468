"""A tool that asks a person first, and a scripted model that calls it once and then answers:
the paused-then-resumed run the resume tests of several packages share.

``refunds`` records each execution's idempotency key, so a test sees whether (and as which
call) the approved refund ran; clear it at the start of a test."""

from __future__ import annotations

from typing import Any

from agentfootprint import RunContext, tool

refunds: list[str] = []


@tool(check_in=True)
async def refund(ctx: RunContext, amount: int) -> str:
    """Refund an amount (a person consents first)."""
    refunds.append(ctx.idempotency_key)
    return f"refunded {amount}"


def respond_refund(request: Any) -> Any:
    """Ask for a refund of 50 until a tool result is in the request, then answer."""
    if not any(m["role"] == "tool" for m in request.messages):
        return {"tool_calls": [{"id": "r1", "name": "refund", "args": {"amount": 50}}]}
    return "refund done"
