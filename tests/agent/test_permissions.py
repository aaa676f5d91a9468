"""Permissions: allow / deny / halt per tool and argument predicate, fail closed, events."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, Governance, tool
from agentfootprint.agent._moments import LEDGER, ToolCallContext, Verdict, act, allow
from agentfootprint.agent._permissions import (
    PermissionDecision,
    PermissionPolicy,
    PermissionRequest,
    PermissionRule,
)
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.providers import MockProvider, mock

ran: list[str] = []


@tool
def lookup(query: str) -> str:
    """Look something up."""
    ran.append(f"lookup {query}")
    return f"found {query}"


@tool
def delete_account(user: str) -> str:
    """Delete a user's account."""
    ran.append(f"delete {user}")
    return f"deleted {user}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def calls(*pairs: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in pairs]}


def build(permissions: Any, script: list[Any], **options: Any
          ) -> tuple[Agent, MockProvider, list[AgentEvent]]:
    provider = mock(script=script)
    act = options.pop("act", ())
    agent = Agent(provider=provider, model="m", tools=[lookup, delete_account],
                  **options, governance=Governance(permissions=permissions, act=act))
    events: list[AgentEvent] = []
    agent.on("permission.*", events.append)
    return agent, provider, events


def tool_text(provider: MockProvider, request: int, call_id: str) -> str:
    return next(m["content"] for m in provider.requests[request].messages
                if m["role"] == "tool" and m.get("tool_call_id") == call_id)


POLICY = PermissionPolicy(rules=[
    PermissionRule(id="no-secret-lookups", tool="lookup", result="deny",
                   when=lambda args: "secret" in args.get("query", ""),
                   rationale="secrets are off limits"),
    PermissionRule(id="never-delete", tool="delete_account", result="halt"),
])


async def test_allow_runs_the_tool_and_emits_a_check() -> None:
    agent, provider, events = build(POLICY, [calls(("c1", "lookup", {"query": "cats"})),
                                             "done"])
    result = await agent.run("x")
    assert ran == ["lookup cats"]
    assert tool_text(provider, 1, "c1") == "found cats"
    assert result.content == "done"
    assert [e.type.removeprefix("agentfootprint.") for e in events] == ["permission.check"]
    payload = events[0].payload
    assert (payload["result"], payload["target"], payload["policy_rule_id"]) == (
        "allow", "lookup", None)
    events[0].model()


async def test_deny_by_argument_predicate_shows_a_refusal_and_the_run_goes_on() -> None:
    agent, provider, events = build(POLICY, [
        calls(("c1", "lookup", {"query": "secret plans"})), "I may not look that up."])
    result = await agent.run("x")
    assert ran == []
    assert tool_text(provider, 1, "c1") == "[permission denied: secrets are off limits]"
    assert result.content == "I may not look that up."
    assert result.stopped_early is None
    assert (events[0].payload["result"], events[0].payload["policy_rule_id"]) == (
        "deny", "no-secret-lookups")


async def test_halt_stops_cleanly_and_the_model_never_sees_the_tools_output() -> None:
    agent, provider, events = build(POLICY, [
        calls(("c1", "lookup", {"query": "a"}), ("c2", "delete_account", {"user": "bob"}),
              ("c3", "lookup", {"query": "b"})), "never asked"])
    result = await agent.run("x")
    assert ran == ["lookup a"]  # the halted call and its later siblings never ran
    assert len(provider.requests) == 1
    assert result.stopped_early == "permission-halt"
    assert result.content == ""
    tools = {m["tool_call_id"]: m["content"] for m in result.history if m["role"] == "tool"}
    assert tools["c2"] == "Tool 'delete_account' is not available in this context."
    assert tools["c3"].startswith("Not run:")
    assert "deleted" not in " ".join(tools.values())
    names = [e.type.removeprefix("agentfootprint.") for e in events]
    assert names == ["permission.check", "permission.check", "permission.halt"]
    halt = events[-1].payload
    assert (halt["target"], halt["rule_id"], halt["tool_call_id"]) == (
        "delete_account", "never-delete", "c2")
    for event in events:
        event.model()


async def test_a_halted_turn_still_ends_with_agent_turn_end() -> None:
    """A listener counting turns sees the halted one too, with why it stopped."""
    agent, _, _ = build(POLICY, [calls(("c2", "delete_account", {"user": "bob"})), "never"])
    ends: list[AgentEvent] = []
    agent.on("agent.turn_end", ends.append)
    await agent.run("x")
    assert [(e.payload["stopped_early"], e.payload["content"]) for e in ends] == [
        ("permission-halt", "")]
    ends[0].model()


async def test_halt_text_never_carries_the_telemetry_reason() -> None:
    class Checker:
        name = "custom"

        async def check(self, request: PermissionRequest) -> PermissionDecision:
            return PermissionDecision(result="halt", reason="fraud-score-97")

    agent, _, events = build(Checker(), [calls(("c1", "lookup", {"query": "a"})), "x"])
    result = await agent.run("x")
    assert "fraud" not in result.history[-1]["content"]
    assert events[0].payload["reason"] == "fraud-score-97"


async def test_a_raising_checker_fails_closed_with_a_terminal_sentence() -> None:
    class Broken:
        name = "broken"

        def check(self, request: PermissionRequest) -> PermissionDecision:
            raise ConnectionError("policy server down at 10.0.0.7")

    agent, provider, events = build(Broken(), [calls(("c1", "lookup", {"query": "a"})),
                                               "ok"])
    await agent.run("x")
    assert ran == []
    text = tool_text(provider, 1, "c1")
    assert "could not be authorized" in text and "Do not call it again" in text
    assert "10.0.0.7" not in text
    assert events[0].payload["result"] == "deny"
    assert events[0].payload["rationale"] == "ConnectionError: policy server down at 10.0.0.7"


async def test_a_raising_predicate_fails_closed_too() -> None:
    policy = PermissionPolicy(rules=[PermissionRule(
        id="picky", tool="lookup", result="allow", when=lambda args: args["missing"] > 1)])
    agent, provider, _ = build(policy, [calls(("c1", "lookup", {"query": "a"})), "ok"])
    await agent.run("x")
    assert ran == []
    assert "could not be authorized" in tool_text(provider, 1, "c1")


async def test_default_deny_and_the_gate_runs_before_before_tool_rules() -> None:
    seen: list[str] = []

    def see(ctx: ToolCallContext) -> Verdict:
        seen.append(ctx.tool_name)
        return allow()

    policy = PermissionPolicy(rules=[PermissionRule(id="ok", tool="lookup", result="allow")],
                              default="deny")
    agent, provider, _ = build(
        policy, [calls(("c1", "delete_account", {"user": "x"}), ("c2", "lookup",
                                                                  {"query": "q"})), "ok"],
        act=[act("before_tool", see, id="see")])
    result = await agent.run("x")
    assert seen == ["lookup"]  # a denied call never reaches the act rules
    assert tool_text(provider, 1, "c1") == "[permission denied: no rule matched]"
    assert [r["tool_call_id"] for r in result.recording.state[LEDGER]] == ["c2"]


def test_policy_refuses_bad_configuration() -> None:
    with pytest.raises(ConfigurationError, match="'allow', 'deny'"):
        PermissionRule(id="x", result="maybe")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unique"):
        PermissionPolicy(rules=[PermissionRule(id="a", result="allow"),
                                PermissionRule(id="a", result="deny")])
    with pytest.raises(ConfigurationError, match="permission checker"):
        Agent(provider=mock(reply="x"), model="m", governance=Governance(permissions="nope"))  # type: ignore[arg-type]
