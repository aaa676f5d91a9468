"""A run killed mid-way is in its run store and ``agent.resume(run_id)`` finishes it.

The crash is simulated in-process by a tool raising a ``BaseException`` the agent does not
catch (nothing after it runs: no save, no status change, exactly what ``kill -9`` leaves); the
real ``kill -9`` battery is ``tests/agent/test_kill.py``. The model is a function of the
conversation, so a fresh agent in the resuming process asks for the same calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, ToolContext, Tracing, check_in_approved, tool
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.providers._base import LLMRequest
from agentfootprint.runs import RedactionPolicy, RunStore, trace


class Killed(BaseException):
    """The process dying: no handler of the agent sees it."""


def _script(steps: list[list[tuple[str, dict[str, Any]]]]) -> Any:
    """A model that asks for ``steps[n]`` after n tool batches, then answers."""

    def respond(request: LLMRequest) -> Any:
        done = sum(1 for m in request.messages if m["role"] == "assistant")
        if done < len(steps):
            return {"tool_calls": [{"id": f"s{done}-{j}", "name": name, "args": args}
                                   for j, (name, args) in enumerate(steps[done])]}
        return "all done"
    return respond


class World:
    """What the tools did, and where the next one should 'kill the process'."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.kill_at: str | None = None
        self.paid: set[str] = set()

    def enter(self, name: str, key: str) -> None:
        self.calls.append((name, key))
        if self.kill_at == name:
            self.kill_at = None
            raise Killed


def _agent(world: World, store: RunStore, steps: Any, **options: Any) -> Agent:
    @tool(side_effects=False)
    async def lookup(key: str) -> str:
        """Look a key up."""
        world.enter("lookup", key)
        return f"value of {key}"

    @tool(idempotent=True)
    async def pay(amount: float, ctx: ToolContext) -> str:
        """Pay once per idempotency key."""
        world.enter("pay", ctx.idempotency_key)
        if ctx.idempotency_key in world.paid:
            return "already paid"
        world.paid.add(ctx.idempotency_key)
        return f"paid {amount}"

    @tool
    async def email(to: str, ctx: ToolContext) -> str:
        """Send an email (no idempotency)."""
        world.enter("email", ctx.idempotency_key)
        return f"sent to {to}"

    return Agent(provider=mock(respond=_script(steps)), model="m",
                 tools=[lookup, pay, email], tracing=Tracing(run_store=store, **options))


STEPS = [[("lookup", {"key": "a"}), ("email", {"to": "x@y"}), ("lookup", {"key": "b"})],
         [("pay", {"amount": 5.0}), ("lookup", {"key": "c"})]]


def _statuses(result: Any) -> dict[str, str]:
    """Each call's status as the recording's tool-batch rows hold it."""
    found: dict[str, str] = {}
    for record in result.recording.log.records:
        for change in record.changes:
            if change.key == trace.TOOL_RESULTS and change.op == "set":
                found.update({r["tool_call_id"]: r["status"] for r in change.value})
    return found


def _tool_messages(result: Any) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in result.history if m["role"] == "tool"}


async def test_a_killed_run_is_listed_running_and_resumes_without_repeating(
        tmp_path: Path) -> None:
    """Completed calls are replayed, an interrupted unsafe call is 'outcome unknown', the
    calls not yet started run, and the run ends done under its own id."""
    world = World()
    store = RunStore(tmp_path / "runs.db")
    world.kill_at = "email"
    with pytest.raises(Killed):
        await _agent(world, store, STEPS).run("go", run_id="run-1")
    assert [(r.run_id, r.status) for r in store.list()] == [("run-1", "running")]
    assert store.load("run-1").status == "running"  # explainable up to its last entry
    before = list(world.calls)
    result = await _agent(world, store, STEPS).resume("run-1")
    assert (result.run_id, result.status, result.content) == ("run-1", "done", "all done")
    assert world.calls[len(before):] == [("lookup", "b"), ("pay", "run-1:s1-0"),
                                         ("lookup", "c")]
    tools = _tool_messages(result)
    assert tools["s0-0"] == "value of a"  # replayed from the store, not called again
    assert tools["s0-1"].startswith("Outcome unknown: the run stopped")
    assert _statuses(result)["s0-1"] == "outcome-unknown"  # in the recording too
    assert [(r.run_id, r.status) for r in store.list()] == [("run-1", "done")]
    assert "Outcome unknown" in store.load("run-1").to_json()


async def test_an_interrupted_idempotent_call_runs_again_with_the_same_key(
        tmp_path: Path) -> None:
    world = World()
    store = RunStore(tmp_path / "runs.db")
    world.kill_at = "pay"
    with pytest.raises(Killed):
        await _agent(world, store, STEPS).run("go", run_id="run-2")
    result = await _agent(world, store, STEPS).resume("run-2")
    pays = [key for name, key in world.calls if name == "pay"]
    assert pays == ["run-2:s1-0", "run-2:s1-0"]  # the same key both times: the tool dedupes
    assert _tool_messages(result)["s1-0"] == "paid 5.0"
    assert [n for n, _ in world.calls].count("email") == 1


async def test_an_interrupted_side_effect_free_call_runs_again(tmp_path: Path) -> None:
    world = World()
    store = RunStore(tmp_path / "runs.db")
    world.kill_at = "lookup"
    with pytest.raises(Killed):
        await _agent(world, store, STEPS).run("go", run_id="run-3")
    result = await _agent(world, store, STEPS).resume("run-3")
    assert _tool_messages(result)["s0-0"] == "value of a"
    assert world.calls[:2] == [("lookup", "a"), ("lookup", "a")]


async def test_a_run_killed_before_any_tool_starts_again_under_its_id(tmp_path: Path) -> None:
    world = World()
    store = RunStore(tmp_path / "runs.db")

    def respond(request: LLMRequest) -> Any:
        raise Killed
    agent = Agent(provider=mock(respond=respond), model="m",
                  tracing=Tracing(run_store=store))
    with pytest.raises(Killed):
        await agent.run("hello there", run_id="run-4")
    assert store.load("run-4").meta["start"][trace.MESSAGE] == "hello there"
    result = await _agent(world, store, []).resume("run-4")
    assert (result.run_id, result.content) == ("run-4", "all done")
    assert result.recording.state[trace.USER_MESSAGE] == "hello there"


async def test_progress_only_appends_what_changed(tmp_path: Path) -> None:
    """Each commit record reaches the store once, in order, never the history rewritten."""
    store = RunStore(tmp_path / "runs.db")
    result = await _agent(World(), store, STEPS).run("go", run_id="run-5")
    entries = store.progress("run-5")
    sent = [r["idx"] for e in entries for r in e.get("records", ())]
    assert sent == list(range(len(sent)))  # every record once, in order
    assert 0 < len(sent) < len(result.recording.log)
    assert [e["phase"] for e in entries].count("started") == 5
    assert [e["phase"] for e in entries].count("done") == 5


async def test_a_finished_run_cannot_be_resumed_or_its_id_reused(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    await _agent(World(), store, []).run("first", run_id="same")
    with pytest.raises(ConfigurationError, match="already ended"):
        await _agent(World(), store, []).resume("same")
    with pytest.raises(ConfigurationError, match="already taken"):
        await _agent(World(), store, []).run("second", run_id="same")
    assert store.load("same").meta == {} and store.list()[0].preview == "all done"
    with pytest.raises(KeyError, match="no run 'other'"):
        await _agent(World(), store, []).resume("other")


async def test_resume_by_id_needs_a_run_store() -> None:
    agent = Agent(provider=mock(reply="x"), model="m")
    with pytest.raises(ConfigurationError, match="has none; build it with tracing"):
        await agent.resume("some-run")
    with pytest.raises(ConfigurationError, match=r"json\.loads"):
        await agent.resume('{"status": "paused"}')


async def test_a_redacted_conversation_is_not_resumed_from_masked_values(
        tmp_path: Path) -> None:
    world = World()
    store = RunStore(tmp_path / "runs.db")
    world.kill_at = "email"
    policy = RedactionPolicy(keys=[trace.HISTORY])
    with pytest.raises(Killed):
        await _agent(world, store, STEPS, redaction=policy).run("go", run_id="run-6")
    with pytest.raises(ConfigurationError, match="cannot be resumed from the store"):
        await _agent(world, store, STEPS, redaction=policy).resume("run-6")


async def test_a_paused_run_resumed_then_killed_resumes_again_from_the_store(
        tmp_path: Path) -> None:
    """Check-in pause → approved → killed inside the approved tool: the call is not repeated."""
    store = RunStore(tmp_path / "runs.db")
    ran: list[str] = []

    @tool(check_in=True)
    async def refund(order: str, ctx: ToolContext) -> str:
        """Refund an order."""
        ran.append(ctx.idempotency_key)
        if len(ran) == 1:
            raise Killed
        return "refunded"

    def build() -> Agent:
        return Agent(provider=mock(respond=_script([[("refund", {"order": "A-1"})]])),
                     model="m", tools=[refund], tracing=Tracing(run_store=store))

    paused = await build().run("refund it", run_id="run-7")
    assert paused.paused and store.list()[0].status == "paused"
    with pytest.raises(ConfigurationError, match="is paused, waiting for a person"):
        await build().resume("run-7")
    with pytest.raises(Killed):
        await build().resume(paused.checkpoint, check_in_approved(by="ops"))
    assert store.list()[0].status == "running"
    with pytest.raises(ConfigurationError, match="resumed already and is under way, or was"):
        await build().resume(paused.checkpoint, check_in_approved(by="ops"))  # not twice
    result = await build().resume("run-7")
    assert ran == ["run-7:s0-0"]
    assert _tool_messages(result)["s0-0"].startswith("Outcome unknown")
    with pytest.raises(ConfigurationError, match="'done', so it cannot be resumed"):
        await build().resume(paused.checkpoint, check_in_approved(by="ops"))
