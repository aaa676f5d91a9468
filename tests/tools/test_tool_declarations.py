"""What a tool declares about repeating it, and the idempotency key every call is given.

A tool that declares nothing is treated as having side effects and as not deduplicating, so a
crash can never make the runtime repeat it blindly; ``side_effects=False`` and
``idempotent=True`` are declared on ``@tool`` and ``define_tool`` alike.
"""

from __future__ import annotations

import dataclasses

import pytest

from agentfootprint import ToolContext, define_tool, tool


def test_a_tool_that_declares_nothing_is_unsafe_to_repeat() -> None:
    @tool
    def charge(amount: float) -> str:
        """Charge the card."""
        return "ok"

    plain = define_tool("send", "Send it.", None, lambda args: "sent")
    for item in (charge, plain):
        assert item.side_effects is True
        assert item.idempotent is False


def test_declarations_are_taken_by_tool_and_define_tool() -> None:
    @tool(side_effects=False)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    @tool(idempotent=True)
    async def pay(amount: float, ctx: ToolContext) -> str:
        """Pay once per key."""
        return ctx.idempotency_key

    raw = define_tool("mail", "Mail it.", None, lambda args, ctx: ctx.idempotency_key,
                      idempotent=True, side_effects=True)
    assert (lookup.side_effects, lookup.idempotent) == (False, False)
    assert (pay.side_effects, pay.idempotent) == (True, True)
    assert (raw.side_effects, raw.idempotent) == (True, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lookup.side_effects = True  # type: ignore[misc]


def test_the_idempotency_key_is_the_run_id_and_the_call_id() -> None:
    ctx = ToolContext("call_7", 2, "run-1")
    assert ctx.idempotency_key == "run-1:call_7"
    assert ToolContext("c", 1, "r", idempotency_key="given").idempotency_key == "given"
    mail = define_tool("mail", "Mail it.", None, lambda args, ctx: ctx.idempotency_key)
    assert mail.execute({}, ToolContext("c9", 1, "r9")) == "r9:c9"
