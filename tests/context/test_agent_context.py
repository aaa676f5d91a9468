"""Agent(context=[...]): the per-call record, skills in a run, Classic vs Dynamic, determinism."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from system_prompt_script import request_hashes

from agentfootprint import (
    Agent,
    Limits,
    define_fact,
    define_instruction,
    define_skill,
    define_steering,
    define_tool,
    tool,
)
from agentfootprint.context import InjectionContext, context_report
from agentfootprint.events._dispatcher import AgentEvent
from agentfootprint.flow._commitlog import CommitLog
from agentfootprint.providers import MockProvider, mock

SCRIPT = Path(__file__).resolve().parent / "system_prompt_script.py"

# -- helpers ---------------------------------------------------------------------------------


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: 42.00 EUR, delivered"


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def calls(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def read(skill_id: str) -> dict[str, Any]:
    return calls("read_skill", id=skill_id)


def billing(**options: Any) -> Any:
    options.setdefault("tools", [refund])
    return define_skill(id="billing", description="Refunds, charges, billing questions.",
                        body="Confirm identity first, then refund at most the order total.",
                        **options)


def skill_agent(skill: Any, *replies: Any, **options: Any) -> tuple[Agent, MockProvider]:
    provider = mock(script=list(replies))
    options.setdefault("system", "You are a support agent.")
    agent = Agent(provider=provider, model="mock-model", context=[skill], **options)
    return agent, provider


def names(provider: MockProvider) -> list[list[str]]:
    return [[t["name"] for t in r.tools] for r in provider.requests]


def reloaded(result: Any) -> CommitLog:
    """The recording as a reader gets it: serialised to JSON text and parsed back."""
    return CommitLog.from_json(json.loads(json.dumps(result.recording.log.to_json())))


# -- the acceptance scenario: four answers for every injection of every call ------------------

PROFILE = "Name: Maya. Plan: Pro. Customer since 2022."
LATE = "You are past your second step; answer as soon as you can."
CITE = "Cite the order id you used."
BODY = "Confirm identity first, then refund at most the order total."
BASE = "You are a support agent."


def support_agent() -> tuple[Agent, MockProvider]:
    provider = mock(script=[
        calls("lookup_order", order_id="A-1001"),
        read("billing"),
        calls("refund", order_id="A-1001"),
        "Refunded order A-1001.",
    ])
    agent = Agent(
        provider=provider, model="mock-model", system=BASE, tools=[lookup_order],
        context=[
            define_fact(id="user-profile", data=PROFILE),
            define_instruction(id="late-turn", prompt=LATE,
                               active_when=lambda ctx: ctx.iteration >= 3),
            define_instruction(id="cite-orders", prompt=CITE, on_tool_return="lookup_order"),
            billing(tools_while_active=True),
        ],
    )
    return agent, provider


NOT_READ = "the model has not called read_skill for it"
ON_LOOKUP = "on_tool_return(lookup_order)"
# per call: id -> (fired, reason, first fired iteration, [(slot, position, cache, text)]);
# system pieces are sent stable first (always, while_active, never), so the skill's body
# comes before the late-turn instruction although it was declared after it
EXPECTED: list[dict[str, Any]] = [
    {"iteration": 1, "batch": [], "rows": {
        "user-profile": (True, "always on", 1, [("system", 1, "always", PROFILE)]),
        "late-turn": (False, "its rule did not hold", None, []),
        "cite-orders": (False, "no tool has returned yet", None, []),
        "billing": (False, NOT_READ, None, []),
    }},
    {"iteration": 2, "batch": ["lookup_order"], "rows": {
        "user-profile": (True, "always on", 1, [("system", 1, "always", PROFILE)]),
        "late-turn": (False, "its rule did not hold", None, []),
        "cite-orders": (True, "tool 'lookup_order' returned in the previous batch", 2,
                        [("system", 2, "never", CITE)]),
        "billing": (False, NOT_READ, None, []),
    }},
    {"iteration": 3, "batch": ["read_skill"], "rows": {
        "user-profile": (True, "always on", 1, [("system", 1, "always", PROFILE)]),
        "late-turn": (True, "its rule held", 3, [("system", 3, "never", LATE)]),
        "cite-orders": (False, f"the previous batch ran read_skill, not {ON_LOOKUP}", 2, []),
        "billing": (True, "the model activated it with read_skill", 3,
                    [("system", 2, "while_active", BODY), ("tools", [2], None, ["refund"])]),
    }},
    {"iteration": 4, "batch": ["refund"], "rows": {
        "user-profile": (True, "always on", 1, [("system", 1, "always", PROFILE)]),
        "late-turn": (True, "its rule held", 3, [("system", 3, "never", LATE)]),
        "cite-orders": (False, f"the previous batch ran refund, not {ON_LOOKUP}", 2, []),
        "billing": (True, "the model activated it with read_skill", 3,
                    [("system", 2, "while_active", BODY), ("tools", [2], None, ["refund"])]),
    }},
]
TRIGGERS = {"user-profile": "always", "late-turn": "rule", "cite-orders": ON_LOOKUP,
            "billing": "llm_activated(read_skill)"}


async def test_every_injection_of_every_call_answers_what_who_when_how() -> None:
    """From the recording reloaded from JSON, each injection of each call has its four answers."""
    agent, provider = support_agent()
    result = await agent.run("Please refund order A-1001.")
    assert result.content == "Refunded order A-1001."
    report = context_report(reloaded(result))
    assert [c["iteration"] for c in report] == [1, 2, 3, 4]
    assert report == context_report(result.recording)  # the live and reloaded views agree
    for call, expected, request in zip(report, EXPECTED, provider.requests, strict=True):
        assert call["system_prompt"] == request.system  # the record is what was sent
        assert call["runtime_stage_id"].startswith("call_llm#")
        assert [r["id"] for r in call["injections"]] == list(TRIGGERS)
        for row in call["injections"]:
            fired, reason, first, landed = expected["rows"][row["id"]]
            # who: the trigger, whether it fired, and why (also when it did not)
            assert row["who"] == {"trigger": TRIGGERS[row["id"]], "fired": fired,
                                  "reason": reason}
            # when: the iteration, the tool batch judged against, the first firing
            assert row["when"] == {"iteration": expected["iteration"],
                                   "tool_batch": expected["batch"],
                                   "first_fired_iteration": first}
            # how: the slot, the position, the cache policy
            how = [(p["slot"], p["position"], p["cache"], p["text"]) if p["slot"] == "system"
                   else (p["slot"], p["positions"], None, p["tools"]) for p in row["how"]]
            assert how == landed
            # what: the exact span of the system prompt is the declared text
            for piece in row["how"]:
                if piece["slot"] == "system":
                    start, end = piece["span"]
                    assert call["system_prompt"][start:end] == piece["text"]
            assert row["what"] == [text for *_, text in landed]


async def test_base_prompt_and_injections_are_joined_stable_first_then_in_declaration_order(
        ) -> None:
    """The system prompt is its pieces, blank-line separated: cache policy 'always' first (the
    base, the fact), then 'while_active' (the skill's body), then 'never' (the instructions),
    each group in declaration order, so the cacheable part is a prefix."""
    agent, provider = support_agent()
    await agent.run("Please refund order A-1001.")
    assert [r.system for r in provider.requests] == [
        f"{BASE}\n\n{PROFILE}",
        f"{BASE}\n\n{PROFILE}\n\n{CITE}",
        f"{BASE}\n\n{PROFILE}\n\n{BODY}\n\n{LATE}",
        f"{BASE}\n\n{PROFILE}\n\n{BODY}\n\n{LATE}",
    ]
    assert names(provider) == [["lookup_order", "read_skill"], ["lookup_order", "read_skill"],
                               ["lookup_order", "read_skill", "refund"],
                               ["lookup_order", "read_skill", "refund"]]


async def test_skill_body_absent_before_read_skill_says_why() -> None:
    """Before read_skill the skill's body is not in the prompt, and the record says why."""
    agent, _ = support_agent()
    result = await agent.run("Please refund order A-1001.")
    report = context_report(reloaded(result))
    before = [c for c in report if c["iteration"] < 3]
    for call in before:
        assert BODY not in call["system_prompt"]
        row = next(r for r in call["injections"] if r["id"] == "billing")
        assert row["who"]["reason"] == "the model has not called read_skill for it"
        assert row["how"] == [] and row["what"] == []


async def test_context_rows_are_committed_steps_of_the_recording() -> None:
    """The evaluation and slot rows are written by the Injections and slot stages, with ids."""
    agent, _ = support_agent()
    result = await agent.run("Please refund order A-1001.")
    log = reloaded(result)
    writers = {key: sorted({r.stage_id for r in log.records
                            for ch in r.changes if ch.key == key})
               for key in ("context_evaluation", "system_slot", "tools_slot", "system_prompt")}
    assert writers == {"context_evaluation": ["injections"], "system_slot": ["system_slot"],
                       "tools_slot": ["tools_slot"], "system_prompt": ["system_slot"]}
    injections_steps = [r.runtime_stage_id for r in log.records if r.stage_id == "injections"]
    assert len(injections_steps) == 4 and len(set(injections_steps)) == 4


# -- Classic vs Dynamic ----------------------------------------------------------------------


def report_tool(name: str) -> Any:
    schema = {"type": "object", "properties": {"quarter": {"type": "string"}},
              "required": ["quarter"]}
    return define_tool(name, f"The {name} report.", schema,
                       lambda args: f"{name} for {args['quarter']}")


def reports_skill() -> Any:
    """A skill gating four tools: nothing but read_skill is offered until it is read."""
    tools = [report_tool(name) for name in ("sales", "costs", "margin", "forecast")]
    return define_skill(id="reports", description="Quarterly reports.",
                        body="Always state the quarter.", tools=tools, tools_while_active=True)


async def run_reports(mode: str) -> tuple[Any, MockProvider]:
    agent, provider = skill_agent(
        reports_skill(), read("reports"), calls("sales", quarter="Q1"), "Q1 sales are up.",
        system="You run reports.", react_mode=mode)
    return await agent.run("How were Q1 sales?"), provider


async def test_dynamic_recomposes_the_tool_list_each_iteration() -> None:
    """Dynamic: iterations 1-3 offer 1 tool, then 5, then 5 (read_skill + the 4 skill tools)."""
    result, provider = await run_reports("dynamic")
    assert result.content == "Q1 sales are up."
    assert [len(r.tools) for r in provider.requests] == [1, 5, 5]
    assert names(provider)[1] == ["read_skill", "sales", "costs", "margin", "forecast"]
    assert [r.system for r in provider.requests] == [
        "You run reports.", "You run reports.\n\nAlways state the quarter.",
        "You run reports.\n\nAlways state the quarter."]


async def test_classic_freezes_the_tool_list_and_prompt_after_iteration_1() -> None:
    """Classic: iterations 2 and 3 get iteration 1's tool list and system prompt, unchanged."""
    result, provider = await run_reports("classic")
    assert result.content == "Q1 sales are up."
    assert names(provider) == [["read_skill"]] * 3
    assert [r.system for r in provider.requests] == ["You run reports."] * 3
    assert result.history[-1]["content"] == "sales for Q1"  # still dispatchable by name
    report = context_report(reloaded(result))
    assert [c["injections"][0]["who"]["fired"] for c in report] == [False, True, True]
    assert [c["injections"][0]["how"] for c in report] == [[], [], []]  # fired, never landed


# -- identical bytes for identical inputs ----------------------------------------------------


def test_system_prompt_and_tools_are_byte_identical_across_processes() -> None:
    """Two fresh interpreters with different hash seeds send the same system and tool bytes."""
    outputs = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0] == request_hashes()  # and the same as in this process
    assert len(outputs[0]) == 4
    assert len({entry["system"] for entry in outputs[0]}) == 3  # it did change over the run


# -- skills in a run -------------------------------------------------------------------------


def evaluation(result: Any, injection_id: str) -> list[bool]:
    return [next(r for r in c["injections"] if r["id"] == injection_id)["who"]["fired"]
            for c in context_report(result.recording)]


async def test_activation_applies_from_the_next_iteration_and_lasts_the_turn() -> None:
    """read_skill at iteration 1 activates from 2 on, through later tool batches, to the end."""
    agent, provider = skill_agent(
        billing(tools_while_active=True), read("billing"), calls("refund", order_id="A-1"),
        calls("refund", order_id="A-2"), "Both refunded.")
    result = await agent.run("Refund A-1 and A-2.")
    assert evaluation(result, "billing") == [False, True, True, True]
    assert [BODY in (r.system or "") for r in provider.requests] == [False, True, True, True]
    assert result.recording.state["activated_skills"] == ["billing"]


async def test_activation_does_not_carry_into_the_next_turn() -> None:
    """A follow_up starts with no skill active: no body, no gated tools, reason restated."""
    agent, provider = skill_agent(
        billing(tools_while_active=True), read("billing"), "Ready.", "Sure, which order?")
    await agent.run("I need a refund.")
    second = await agent.follow_up("Another one, please.")
    last = provider.requests[-1]
    assert last.system == BASE
    assert [t["name"] for t in last.tools] == ["read_skill"]
    assert second.recording.state["activated_skills"] == []
    row = context_report(second.recording)[0]["injections"][0]
    assert row["who"]["reason"] == "the model has not called read_skill for it"


async def test_reading_a_skill_twice_activates_it_once() -> None:
    """A second read_skill of an active skill adds nothing and emits no second activation."""
    agent, _ = skill_agent(billing(), read("billing"), read("billing"), "Done.")
    seen: list[AgentEvent] = []
    agent.on("skill.activated", seen.append)
    result = await agent.run("Refund please.")
    assert result.recording.state["activated_skills"] == ["billing"]
    assert [(e.payload["skill_id"], e.payload["iteration"]) for e in seen] == [("billing", 1)]


async def test_surface_tool_puts_the_body_in_the_read_skill_result_only() -> None:
    """surface='tool': the body is read_skill's result and never enters the system prompt."""
    agent, provider = skill_agent(billing(surface="tool"), read("billing"), "Done.")
    result = await agent.run("Refund please.")
    assert result.history[2] == {"role": "tool", "content": BODY, "tool_call_id": "call_1",
                                 "tool_name": "read_skill"}
    assert all(BODY not in (r.system or "") for r in provider.requests)
    assert evaluation(result, "billing") == [False, True]  # active all the same


async def test_surface_both_puts_the_body_in_both_places() -> None:
    """surface='both': read_skill returns the body and the next prompt carries it too."""
    agent, provider = skill_agent(billing(surface="both"), read("billing"), "Done.")
    result = await agent.run("Refund please.")
    assert result.history[2]["content"] == BODY
    assert [r.system for r in provider.requests] == [BASE, f"{BASE}\n\n{BODY}"]


async def test_surface_system_read_skill_says_activated() -> None:
    """The default surface answers read_skill with an activation sentence, not the body."""
    agent, _ = skill_agent(billing(), read("billing"), "Done.")
    result = await agent.run("Refund please.")
    assert result.history[2]["content"] == "Skill 'billing' activated for the next step."


async def test_ungated_skill_tools_are_offered_from_iteration_1() -> None:
    """Without tools_while_active a skill's tools are in the list before it is read."""
    agent, provider = skill_agent(billing(), calls("refund", order_id="A-1"), "Refunded.",
                                  tools=[lookup_order])
    await agent.run("Refund A-1.")
    assert names(provider) == [["lookup_order", "read_skill", "refund"]] * 2


async def test_tools_while_active_wait_for_read_skill() -> None:
    """With tools_while_active a skill's tools appear only once the skill is active."""
    agent, provider = skill_agent(billing(tools_while_active=True), read("billing"), "Done.")
    await agent.run("Refund please.")
    assert names(provider) == [["read_skill"], ["read_skill", "refund"]]


async def test_unknown_skill_id_gets_a_readable_result_and_the_run_continues() -> None:
    """An unknown id to read_skill is refused by the enum, readably; nothing activates."""
    agent, provider = skill_agent(billing(), read("shipping"), read("billing"), "Done.")
    seen: list[AgentEvent] = []
    agent.on("skill.activated", seen.append)
    result = await agent.run("Refund please.")
    assert result.content == "Done."
    refused = result.history[2]
    assert refused["role"] == "tool" and refused["tool_call_id"] == "call_1"
    assert refused["content"].startswith("Invalid arguments for tool 'read_skill'")
    assert "'billing'" in refused["content"]  # it names what is allowed
    assert provider.requests[1].messages[2]["content"] == refused["content"]
    assert [e.payload["iteration"] for e in seen] == [2]  # only the valid read activated
    assert evaluation(result, "billing") == [False, False, True]


# -- rules in a run --------------------------------------------------------------------------


async def test_raising_rule_is_skipped_and_the_run_continues() -> None:
    """A predicate that raises skips its injection with the exception named; the run goes on."""
    def broken(ctx: InjectionContext) -> bool:
        return ctx.history[99] is not None

    steering = define_steering(id="tone", prompt="Be brief.")
    fragile = define_instruction(id="fragile", prompt="Never shown.", active_when=broken)
    provider = mock(script=["Fine."])
    agent = Agent(provider=provider, model="mock-model", context=[steering, fragile])
    evaluated: list[AgentEvent] = []
    agent.on("context.evaluated", evaluated.append)
    result = await agent.run("Hello?")
    assert result.content == "Fine."
    assert provider.requests[0].system == "Be brief."
    reason = "its rule raised IndexError: list index out of range; skipped"
    row = context_report(result.recording)[0]["injections"][1]
    assert row["who"] == {"trigger": "rule", "fired": False, "reason": reason}
    assert evaluated[0].payload["skipped"] == [{"id": "fragile", "reason": reason}]


async def test_on_tool_return_regex_fires_after_a_matching_tool() -> None:
    """on_tool_return with a compiled regex fires on the iteration after a matching tool ran."""
    cite = define_instruction(id="cite", prompt=CITE, on_tool_return=re.compile(r"^lookup_"))
    provider = mock(script=[calls("lookup_order", order_id="A-1"), "Delivered."])
    agent = Agent(provider=provider, model="mock-model", tools=[lookup_order], context=[cite])
    result = await agent.run("Where is A-1?")
    assert [r.system for r in provider.requests] == [None, CITE]
    assert context_report(result.recording)[1]["injections"][0]["who"] == {
        "trigger": "on_tool_return(^lookup_)", "fired": True,
        "reason": "tool 'lookup_order' returned in the previous batch"}


# -- events ----------------------------------------------------------------------------------


async def test_context_events_fire_and_validate_against_the_catalogue() -> None:
    """context.evaluated, context.injected and skill.activated fire with valid payloads."""
    agent, _ = support_agent()
    seen: list[AgentEvent] = []
    agent.on("context.*", seen.append)
    agent.on("skill.*", seen.append)
    await agent.run("Please refund order A-1001.")
    for event in seen:
        event.model()  # raises when the payload does not fit its catalogue model
    kinds = [e.type.removeprefix("agentfootprint.") for e in seen]
    assert kinds.count("context.evaluated") == 4
    assert kinds.count("skill.activated") == 1
    evaluated = [e.payload for e in seen if e.type.endswith("context.evaluated")]
    assert [p["active"] for p in evaluated] == [
        ["user-profile"], ["user-profile", "cite-orders"],
        ["user-profile", "late-turn", "billing"], ["user-profile", "late-turn", "billing"]]
    assert evaluated[0]["skipped"] == [
        {"id": "late-turn", "reason": "its rule did not hold"},
        {"id": "cite-orders", "reason": "no tool has returned yet"},
        {"id": "billing", "reason": NOT_READ}]
    injected = [(p["injection_id"], p["slot"], p["trigger"], p["iteration"])
                for e in seen if e.type.endswith("context.injected") for p in [e.payload]]
    assert injected[:3] == [("user-profile", "system", "always", 1),
                            ("user-profile", "system", "always", 2),
                            ("cite-orders", "system", ON_LOOKUP, 2)]
    assert ("billing", "system", "llm_activated(read_skill)", 3) in injected
    activated = next(e for e in seen if e.type.endswith("skill.activated"))
    assert activated.payload == {"skill_id": "billing", "iteration": 2}


# -- the wrap-up call ------------------------------------------------------------------------


async def test_wrap_up_call_records_no_tools_offered() -> None:
    """On the wrap-up call the provider gets no tools, so the record must not claim any landed."""
    agent, provider = skill_agent(
        billing(tools_while_active=True), read("billing"), calls("refund", order_id="A-1"),
        "Refund started; confirm identity next.", limits=Limits(max_iterations=2))
    result = await agent.run("Refund A-1.")
    assert result.stopped_early == "max-iterations"
    assert provider.requests[-1].tools == []
    last = context_report(reloaded(result))[-1]
    row = next(r for r in last["injections"] if r["id"] == "billing")
    assert [p for p in row["how"] if p["slot"] == "tools"] == []


@pytest.mark.parametrize("mode", ["dynamic", "classic"])
async def test_static_agent_answers_the_same_in_both_modes(
        mode: Literal["dynamic", "classic"]) -> None:
    """With only always-on context, Classic and Dynamic send the same requests."""
    provider = mock(script=[calls("lookup_order", order_id="A-1"), "Delivered."])
    agent = Agent(provider=provider, model="mock-model", system=BASE, tools=[lookup_order],
                  context=[define_fact(id="user-profile", data=PROFILE)], react_mode=mode)
    result = await agent.run("Where is A-1?")
    assert result.content == "Delivered."
    assert [r.system for r in provider.requests] == [f"{BASE}\n\n{PROFILE}"] * 2
    assert names(provider) == [["lookup_order"]] * 2
