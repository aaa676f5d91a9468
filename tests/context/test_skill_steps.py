"""Skill steps: one step's tool offered at a time with a banner, skip_step recorded, one nudge."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, define_skill, tool
from agentfootprint.providers import mock


@tool
def verify(user: str) -> str:
    """Verify the customer's identity."""
    return "verified"


@tool
def refund(amount: float) -> str:
    """Issue a refund."""
    return "refunded"


@tool
def notify(text: str) -> str:
    """Tell the customer."""
    return "sent"


def billing(**options: Any) -> Any:
    return define_skill(
        id="billing", description="Refunds and charges.", body="Follow the billing procedure.",
        tools=[verify, refund, notify], tools_while_active=True,
        steps=[("verify", "confirm identity"), ("refund", "issue the refund"),
               ("notify", "tell the customer")], **options)


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


SCRIPT = [
    call("read_skill", id="billing"),
    call("verify", user="maya"),
    "All done.",                                 # premature: nudged once
    call("skip_step", reason="no refund owed"),
    call("notify", text="done"),
    "Finished.",
]


async def test_only_the_current_step_tool_is_offered_with_a_banner() -> None:
    """During the procedure the other step tools are held out and the current one is bannered."""
    provider = mock(script=SCRIPT)
    await Agent(provider=provider, model="m", context=[billing()]).run("refund please")
    offered = [[t["name"] for t in r.tools] for r in provider.requests]
    assert offered[0] == ["read_skill"]
    assert offered[1] == ["read_skill", "verify", "skip_step"]
    assert offered[2] == ["read_skill", "refund", "skip_step"]
    assert offered[4] == ["read_skill", "notify", "skip_step"]
    assert offered[5] == ["read_skill", "verify", "refund", "notify"]
    banner = next(t for t in provider.requests[1].tools if t["name"] == "verify")
    assert banner["description"].startswith("[Step 1 of 3 — confirm identity] ")


async def test_results_say_where_the_procedure_stands_and_skips_are_recorded() -> None:
    """Tool results announce step progress; skip_step's reason lands on the record."""
    result = await Agent(provider=mock(script=SCRIPT), model="m",
                         context=[billing()]).run("refund please")
    tools = [m["content"] for m in result.history if m["role"] == "tool"]
    assert tools[0].endswith("You are on step 1 of 3: verify — confirm identity.")
    assert tools[1] == "verified\nStep 1 of 3 done. Now on step 2 of 3: refund — issue the refund."
    assert tools[2].startswith("Skipped step 2 of 3 (no refund owed).")
    assert tools[3].endswith("Step 3 of 3 done. All 3 steps complete.")
    pointer = result.recording.state["skill_steps"]
    assert pointer["skipped"] == [{"step": 2, "reason": "no refund owed"}]
    assert pointer["step"] == 4 and pointer["nudged"] is True
    assert result.content == "Finished."


async def test_a_premature_answer_is_nudged_once() -> None:
    """The model stopping with steps left gets one reminder; a second stop is accepted."""
    provider = mock(script=[call("read_skill", id="billing"), "Done.", "Really done."])
    events: list[Any] = []
    agent = Agent(provider=provider, model="m", context=[billing()])
    agent.on("skill.steps_unfinished", events.append)
    result = await agent.run("refund please")
    assert result.content == "Really done."
    nudges = [m for m in result.history if m.get("injected_by") == "step-nudge"]
    assert len(nudges) == 1 and "step 1 of 3: verify" in nudges[0]["content"]
    assert [e.payload["remaining"] for e in events] == [3]
    assert all("injected_by" not in m for r in provider.requests for m in r.messages)


async def test_skip_step_needs_a_reason_and_an_active_procedure() -> None:
    """skip_step without a reason, or with no procedure running, teaches instead of skipping."""
    provider = mock(script=[call("skip_step", reason="x"), call("read_skill", id="billing"),
                            call("skip_step", reason="  "), "ok", "ok"])
    result = await Agent(provider=provider, model="m", context=[billing()]).run("go")
    tools = [m["content"] for m in result.history if m["role"] == "tool"]
    assert tools[0].startswith("No step procedure is in progress")
    assert tools[2].startswith("Say why you skip step 1")


def test_steps_are_checked_at_definition_and_refused_in_classic_mode() -> None:
    """A step tool must be one of the skill's tools; classic mode cannot run a procedure."""
    with pytest.raises(ConfigurationError, match="not one of the skill's tools"):
        define_skill(id="s", description="d", body="b", tools=[verify], steps=[("refund", "n")])
    with pytest.raises(ConfigurationError, match="react_mode='dynamic'"):
        Agent(provider=mock(reply="x"), model="m", context=[billing()], react_mode="classic")
