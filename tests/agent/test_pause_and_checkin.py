"""Pause and resume: check-in before a consequential tool, ask_human, and resume_on_error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkin_agent import CALLS, build, confirm_address, note

from agentfootprint import Agent, check_in_approved, check_in_declined, define_instruction
from agentfootprint.errors import ConfigurationError, ProviderError
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest

HERE = Path(__file__).parent


def resume_in_fresh_process(checkpoint: dict[str, Any], answer: Any,
                            tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps(checkpoint))
    done = subprocess.run(
        [sys.executable, str(HERE / "checkin_agent.py"), "resume", str(path),
         json.dumps(answer)],
        capture_output=True, text=True, timeout=120, cwd=HERE)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(autouse=True)
def fresh_calls() -> None:
    CALLS.clear()


async def test_check_in_pauses_before_the_tool_with_an_evidence_pack() -> None:
    """The run stops before refund runs; the pack says what, with what, and what drove it."""
    result = await build().run("Please refund order A-7 for this VIP customer.")
    assert result.paused and CALLS == []
    pause = result.pause
    assert pause is not None and pause["kind"] == "check_in"
    pack = pause["data"]
    assert pack["will_do"] == {"tool": "refund", "description": "Refund an order.",
                               "args": {"order": "A-7", "amount": 250.0}}
    assert {c["id"] for c in pack["context_consumed"]} >= {"vip-policy", "user"}
    assert pack["drivers"][0]["id"] in ("vip-policy", "user")
    assert "vip-policy" in [d["id"] for d in pack["drivers"]]
    assert all(d["tier"] == "proxy" for d in pack["drivers"])
    json.dumps(result.checkpoint)  # plain JSON


async def test_check_in_approved_in_a_fresh_process(tmp_path: Path) -> None:
    """Approve: the tool runs on resume (another interpreter), then its sibling, in order."""
    paused = await build().run("Please refund order A-7 for this VIP customer.")
    out = resume_in_fresh_process(paused.checkpoint, check_in_approved(by="ops@acme"),
                                  tmp_path)
    assert out["status"] == "done"
    assert out["calls"] == ["refund A-7 250.0", "note refund requested"]
    assert out["content"] == "Done: refunded 250.0 on A-7 | noted"


async def test_check_in_declined_in_a_fresh_process(tmp_path: Path) -> None:
    """Decline: the tool never runs; the model reads who declined and the note."""
    paused = await build().run("Please refund order A-7 for this VIP customer.")
    answer = check_in_declined(by="ops@acme", note="over the desk limit, escalate instead")
    out = resume_in_fresh_process(paused.checkpoint, answer, tmp_path)
    assert out["status"] == "done"
    assert out["calls"] == ["note refund requested"]
    assert out["content"].startswith("Done: ops@acme declined this call, so it did not run: "
                                     "over the desk limit, escalate instead.")


async def test_check_in_predicate_false_runs_without_asking() -> None:
    """``check_in=fn(args)`` asks only when it says so."""

    def small(request: LLMRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "c1", "name": "refund",
                                    "args": {"order": "B-1", "amount": 20.0}}]}
        return "ok"

    agent = build()
    agent.spec.provider = mock(respond=small)
    result = await agent.run("refund B-1")
    assert not result.paused and CALLS == ["refund B-1 20.0"]


async def test_ask_human_pauses_and_the_answer_is_the_tool_result() -> None:
    """A tool calling ask_human pauses the run; the person's reply is what the model reads."""
    script = mock(script=[
        {"tool_calls": [{"id": "a1", "name": "confirm_address", "args": {}},
                        {"id": "a2", "name": "note", "args": {"text": "asked"}}]},
        "Shipping to the confirmed address."])
    agent = Agent(provider=script, model="m", tools=[confirm_address, note])
    paused = await agent.run("ship my order")
    assert paused.paused and paused.pause is not None
    assert paused.pause["data"] == {"question": "Which address should we ship to?"}
    assert CALLS == []  # the sibling after the paused call has not run
    done = await agent.resume(json.loads(json.dumps(paused.checkpoint)), "9 New Road")
    assert done.content == "Shipping to the confirmed address."
    sent = script.requests[-1].messages
    results = [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"]
    assert results == [("a1", "9 New Road"), ("a2", "noted")]


async def test_resume_refuses_a_finished_checkpoint() -> None:
    """Only a paused run's checkpoint can be resumed; the message says what to do instead."""
    agent = Agent(provider=mock(reply="hi"), model="m")
    done = await agent.run("hello")
    with pytest.raises(ConfigurationError, match="continue_from"):
        await agent.resume(done.checkpoint, "x")


@pytest.mark.parametrize("answer", [True, "yes", {"approved": True}, None])
async def test_a_check_in_accepts_only_a_verdict(answer: Any) -> None:
    """Anything but check_in_approved/declined is refused before the run moves: a stray True
    must not be read as a silent 'declined'."""
    paused = await build().run("Please refund order A-7 for this VIP customer.")
    with pytest.raises(ConfigurationError, match="check_in_approved"):
        await build().resume(paused.checkpoint, answer)
    assert CALLS == []
    done = await build().resume(paused.checkpoint, check_in_declined(by="ops", note="no"))
    assert not done.paused and CALLS == ["note refund requested"]  # the sibling, not refund


async def test_resume_refuses_an_agent_without_the_paused_tool() -> None:
    """The paused call must be dispatchable here; otherwise the model would read 'unknown
    tool' and the consent would have been for nothing."""
    paused = await build().run("Please refund order A-7 for this VIP customer.")
    other = Agent(provider=mock(reply="hi"), model="m")
    with pytest.raises(ConfigurationError, match="'refund', which this agent does not have"):
        await other.resume(paused.checkpoint, check_in_approved(by="ops"))


async def test_resume_and_continue_from_say_how_to_pass_the_checkpoint() -> None:
    """The two near-misses (the RunResult itself, the saved JSON text) name the fix."""
    agent = Agent(provider=mock(reply="hi"), model="m")
    done = await agent.run("hello")
    with pytest.raises(ConfigurationError, match=r"result\.checkpoint, not the RunResult"):
        await agent.run("again", continue_from=done)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"json\.loads the saved text first"):
        await agent.resume(json.dumps(done.checkpoint))  # type: ignore[arg-type]


async def test_resume_on_error_keeps_tool_results_and_delivers_nothing_twice() -> None:
    """A provider that fails once on iteration 3: the replay finishes, no tool runs twice,
    and the messages-slot instruction is in the conversation exactly once."""
    runs: list[str] = []

    @__import__("agentfootprint").tool
    def lookup(n: int) -> str:
        """Look a number up."""
        runs.append(f"lookup {n}")
        return f"value {n}"

    failed_once = False

    def respond(request: LLMRequest) -> Any:
        nonlocal failed_once
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done == 2 and not failed_once:
            failed_once = True
            raise ProviderError("upstream 503", provider="mock", status=503, retryable=True)
        if done < 2:
            return {"tool_calls": [{"id": f"t{done}", "name": "lookup", "args": {"n": done}}]}
        return "both looked up"

    hint = define_instruction(id="cite", prompt="Cite the lookups.", slot="messages",
                              role="system")
    agent = Agent(provider=mock(respond=respond), model="m", tools=[lookup], context=[hint])
    with pytest.raises(ProviderError) as caught:
        await agent.run("look up 0 and 1")
    assert runs == ["lookup 0", "lookup 1"]
    result = await agent.resume_on_error(caught.value)
    assert result.content == "both looked up"
    assert runs == ["lookup 0", "lookup 1"]  # nothing re-ran
    tool_results = [m["content"] for m in result.history if m["role"] == "tool"]
    assert tool_results == ["value 0", "value 1"]
    assert sum(1 for m in result.history if m.get("injected_by") == "cite") == 1
    assert result.iterations == 3


async def test_a_paused_agent_with_memory_resumes_and_remembers() -> None:
    """The checkpoint of an agent with memory is plain JSON; the turn is written on resume."""
    from agentfootprint.memory import InMemoryStore, MemoryIdentity, define_memory, window

    store = InMemoryStore()
    chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"id": "a", "name": "confirm_address", "args": {}}]}, "shipped"]),
        model="m", tools=[confirm_address], memory=[chat], identity=MemoryIdentity("c"))
    paused = await agent.run("ship it")
    assert paused.paused and (await store.list(MemoryIdentity("c"))).entries == []
    done = await agent.resume(json.loads(json.dumps(paused.checkpoint)), "home")
    assert done.content == "shipped" and done.turn == 1
    page = await store.list(MemoryIdentity("c"))
    assert sorted(e.id for e in page.entries) == ["msg-1-0", "msg-1-1"]
