"""The loop's per-iteration shortcuts give what the long way gives, and keep the recording."""

from __future__ import annotations

import json

from agentfootprint import Agent, define_fact, tool
from agentfootprint.agent._memo import NO_INJECTIONS, SystemMemo
from agentfootprint.context._injection import Injection, Trigger
from agentfootprint.context._slots import compose_system
from agentfootprint.flow._values import FrozenList
from agentfootprint.providers import mock
from agentfootprint.runs import trace
from agentfootprint.tools._registry import result_text


def _fact(id: str, text: str, cache: str = "always") -> Injection:
    return Injection(id=id, flavor="fact", trigger=Trigger("always"), system=text, cache=cache)


def test_the_system_memo_answers_what_compose_system_computes() -> None:
    memo = SystemMemo("Base prompt.", "always")
    cases = [[], [_fact("a", "A.")], [_fact("a", "A."), _fact("b", "B.", "never")],
             [_fact("b", "B.", "never"), _fact("a", "A.")], [_fact("a", "changed")]]
    for active in cases * 2:  # the second round is answered from the memo
        text, rows = memo(active)
        assert (text, rows) == compose_system("Base prompt.", "always", active)
        assert type(rows) is FrozenList
    assert memo([_fact("a", "A.")])[1] is memo([_fact("a", "A.")])[1]  # same pieces: same rows


def test_no_injections_is_one_frozen_empty_list() -> None:
    assert NO_INJECTIONS == [] and type(NO_INJECTIONS) is FrozenList


def test_result_text_of_ints_and_bools_is_their_json() -> None:
    for value in (0, 7, -3, 10**30, True, False):
        assert result_text(value) == json.dumps(value)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _run(agent: Agent) -> str:
    result = agent.run_sync("Add them up.")
    log = result.recording.log.to_json()
    for record in log["records"]:
        for change in record["changes"]:
            if change["key"] == trace.LLM_LATENCY:
                change["value"] = "<latency>"
    return json.dumps(log)


def test_an_agent_run_twice_records_the_same_log() -> None:
    """The memos are shared by runs of one agent: a second run records what the first did
    (the unchanged system prompt is written, and committed once per run, as before)."""
    script = [{"tool_calls": [{"id": "c1", "name": "add", "args": {"a": 1, "b": 2}}]}, "3"]
    agent = Agent(provider=mock(script=script * 2), model="mock", tools=[add],
                  system="Be exact.", context=[define_fact(id="unit", data="Numbers are ints.")])
    first, second = _run(agent), _run(agent)
    assert first == second
    records = json.loads(first)["records"]
    prompts = [c for r in records for c in r["changes"] if c["key"] == trace.SYSTEM_PROMPT]
    assert len(prompts) == 1  # written every iteration, changed once
    assert prompts[0]["value"] == "Be exact.\n\nNumbers are ints."
