"""Durable runs: the seam (``flow/_durable.py``) and DBOS (``distributed/_dbos.py``) in-process.

The seam: without a runner a run calls its steps directly; with one, every effectful step of
an agent run (model calls, tool calls, the turn claim, memory reads and writes) goes through
it, and a replay that answers every step from a record rebuilds the same recording without
calling the model, the tools or the stores. DBOS: a run is a workflow whose steps DBOS
records; what DBOS keeps is sealed when the executor has a key, and an agent that redacts is
refused without one (the leak test greps the system database for the planted secret).
Killed processes and recovery are ``tests/e2e/test_dbos_kill.py``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _consent_refund import refund, refunds, respond_refund
from agentfootprint import Agent, RunContext, Tracing, define_fact, tool
from agentfootprint.distributed import RunJob, normal_form, run_many
from agentfootprint.errors import ConfigurationError
from agentfootprint.flow._durable import durable_step, step_runner
from agentfootprint.memory import MemoryIdentity, SQLiteStore, define_memory
from agentfootprint.providers import mock
from agentfootprint.runs import RedactionPolicy, RunStore

SECRET = "sk-live-DBOS-SECRET-0123456789"


class Recorder:
    """A step runner that runs every step and keeps (kind, result)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []

    async def step(self, kind: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        value = await fn()
        self.steps.append((kind, value))
        return value


class Replayer:
    """A step runner that runs nothing: each step answers with the recorded result."""

    def __init__(self, steps: list[tuple[str, Any]]) -> None:
        self.steps = list(steps)

    async def step(self, kind: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        recorded_kind, value = self.steps.pop(0)
        assert recorded_kind == kind, (recorded_kind, kind)
        return value


calls: list[str] = []


@tool
async def pay(ctx: RunContext, amount: int) -> str:
    """Pay an amount."""
    calls.append(ctx.idempotency_key)
    return f"paid {amount}"


def _respond(request: Any) -> Any:
    done = sum(1 for m in request.messages if m["role"] == "tool")
    if done < 2:
        return {"tool_calls": [{"id": f"c{done}", "name": "pay", "args": {"amount": done}}]}
    return "paid twice"


def make_agent(**tracing: Any) -> Agent:
    return Agent(provider=mock(respond=_respond), model="mock", system="Pay.", tools=[pay],
                 context=[define_fact(id="rule", data="Pay in two parts.")],
                 tracing=Tracing(**tracing))


def make_secret_agent() -> Agent:
    """An agent that records under a redaction policy (user text and tool arguments)."""
    return make_agent(redaction=RedactionPolicy(kinds={"user_text", "tool_args"}))


def test_without_a_runner_a_step_is_a_direct_call() -> None:
    async def main() -> int:
        return await durable_step("tool", lambda: asyncio.sleep(0, result=7))

    assert step_runner.get() is None
    assert asyncio.run(main()) == 7


def test_every_effect_of_a_run_goes_through_the_runner_and_a_replay_repeats_none() -> None:
    """Recorded once, a run replayed from its step results alone has the same recording
    (timings included: the latency clock is read inside the model-call step)."""
    calls.clear()
    recorder = Recorder()

    async def run(runner: Any, agent: Agent) -> Any:
        token = step_runner.set(runner)
        try:
            return await agent.run("pay it", run_id="run-a")
        finally:
            step_runner.reset(token)

    first = asyncio.run(run(recorder, make_agent()))
    assert [kind for kind, _ in recorder.steps] == ["llm", "tool", "llm", "tool", "llm"]
    assert calls == ["run-a:c0", "run-a:c1"]

    def refuse(_request: Any) -> Any:
        raise AssertionError("a replay called the model")

    replay_agent = make_agent()
    replay_agent.spec.provider = mock(respond=refuse)
    calls.clear()
    again = asyncio.run(run(Replayer(recorder.steps), replay_agent))
    assert calls == []  # no tool ran
    assert again.content == first.content == "paid twice"
    assert again.recording.log.to_json() == first.recording.log.to_json()


def test_memory_claims_reads_and_writes_are_steps(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "memory.sqlite"))
    agent = Agent(provider=mock(reply="noted"), model="mock",
                  memory=[define_memory(type="episodic", strategy="window", store=store,
                                        keep_turns=5)],
                  identity=MemoryIdentity(conversation_id="c1", principal="p1"))
    recorder = Recorder()

    async def main() -> None:
        token = step_runner.set(recorder)
        try:
            await agent.run("remember this")
        finally:
            step_runner.reset(token)

    asyncio.run(main())
    kinds = [kind for kind, _ in recorder.steps]
    assert kinds[0] == "turn-claim" and "memory-read" in kinds
    assert kinds.index("memory-read") < kinds.index("llm") < kinds.index("memory-write")


# -- DBOS in this process ------------------------------------------------------------------

dbos = pytest.importorskip("dbos")


def _forms(secret: str) -> list[bytes]:
    raw = secret.encode()
    found = [raw]
    for shift in range(3):  # base64 (DBOS's default pickles are base64) at each alignment
        encoded = base64.b64encode(b"\0" * shift + raw)
        start = (shift * 4 + 2) // 3 + 1
        found.append(encoded[start:start + len(raw) * 4 // 3 - 6])
    return found


def _system_db_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


@pytest.fixture
def executor_factory(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    from agentfootprint.distributed._dbos import dbos_executor

    made: list[Any] = []

    def make(**options: Any) -> Any:
        for old in made:  # DBOS is one per process
            old.close()
        path = tmp_path / f"dbos-{len(made)}.sqlite"
        executor = dbos_executor(system_database=f"sqlite:///{path}", **options)
        executor.path = path
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close()


def test_a_run_is_a_workflow_whose_steps_dbos_records(tmp_path: Path,
                                                      executor_factory: Any) -> None:
    from dbos import DBOS

    executor = executor_factory()
    store = str(tmp_path / "runs.sqlite")
    outcomes = asyncio.run(run_many(f"{__name__}:make_agent", ["pay it"], executor=executor,
                                    store=store, run_ids=["dbos-run-1"]))
    assert outcomes[0].status == "done" and outcomes[0].content == "paid twice"
    assert outcomes[0].placement["attempts"] == 1
    assert outcomes[0].placement["worker"].startswith("dbos")
    steps = [s["function_name"] for s in DBOS.list_workflow_steps("dbos-run-1")]
    assert steps == ["llm", "tool", "llm", "tool", "llm"]
    recording = RunStore(store).load("dbos-run-1")
    reference = asyncio.run(make_agent().run("pay it", run_id="other-run"))
    assert normal_form(recording) == normal_form(
        RunStore(store).save(reference))  # the same work, recorded the same way

    again = asyncio.run(executor.run_jobs([RunJob(factory=f"{__name__}:make_agent",
                                                  message="pay it", run_id="dbos-run-1",
                                                  store=store)]))
    assert again[0].content == "paid twice"  # the workflow's recorded outcome: nothing reran


def test_an_agent_that_redacts_is_refused_without_a_seal_key(tmp_path: Path,
                                                             executor_factory: Any) -> None:
    executor = executor_factory()
    with pytest.raises(ConfigurationError, match="seal_key"):
        asyncio.run(run_many(f"{__name__}:make_secret_agent", [f"pay {SECRET}"],
                             executor=executor, store=str(tmp_path / "runs.sqlite")))


def test_the_system_database_holds_no_secret_the_run_store_masks(
        tmp_path: Path, executor_factory: Any) -> None:
    """The leak test's planted secret (in the user's message and a tool's arguments) is in
    neither the run store nor DBOS's system database, in any encoding; unsealed, the same
    scanner finds it in the system database (the control)."""
    from cryptography.fernet import Fernet

    sealed = executor_factory(seal_key=Fernet.generate_key())
    store = tmp_path / "runs.sqlite"
    done = asyncio.run(run_many(f"{__name__}:make_secret_agent", [f"pay {SECRET} now"],
                                executor=sealed, store=str(store), run_ids=["leak-1"]))
    assert done[0].status == "done", done[0].error
    sealed.close()
    leaked = [f for f in _forms(SECRET) if f in _system_db_bytes(sealed.path)]
    assert not leaked, f"DBOS's system database holds the secret ({leaked})"
    assert not [f for f in _forms(SECRET) if f in _system_db_bytes(store)]  # the run store

    control = executor_factory()
    asyncio.run(run_many(f"{__name__}:make_agent", [f"pay {SECRET} now"], executor=control,
                         store=str(tmp_path / "plain.sqlite"), run_ids=["leak-2"]))
    control.close()
    assert [f for f in _forms(SECRET) if f in _system_db_bytes(control.path)]


def make_refund_agent() -> Agent:
    return Agent(provider=mock(respond=respond_refund), model="mock", tools=[refund])


def test_a_check_in_pause_waits_in_dbos_and_the_resume_is_durable_too(
        tmp_path: Path, executor_factory: Any) -> None:
    """A run that pauses for consent ends its workflow paused with its checkpoint kept in
    DBOS; ``executor.resume`` continues it in a workflow of its own, and the run store keeps
    one recording of the whole run, equal to an in-process pause and resume's."""
    from agentfootprint import check_in_approved

    executor = executor_factory()
    store = str(tmp_path / "runs.sqlite")
    job = RunJob(factory=f"{__name__}:make_refund_agent", message="refund 50",
                 run_id="dbos-pause-1", store=store)
    refunds.clear()
    (paused,) = asyncio.run(executor.run_jobs([job]))
    assert paused.status == "paused" and refunds == []
    assert RunStore(store).load("dbos-pause-1").status == "paused"
    done = asyncio.run(executor.resume(job, check_in_approved(by="alice@ops")))
    assert done.status == "done" and done.content == "refund done", done.error
    assert refunds == ["dbos-pause-1:r1"]
    again = asyncio.run(executor.resume(job, check_in_approved(by="alice@ops")))
    assert again.status == "done" and again.reused and refunds == ["dbos-pause-1:r1"]

    async def in_process() -> Any:
        agent = make_refund_agent()
        first = await agent.run("refund 50", run_id="plain-pause-1")
        return await agent.resume(first.checkpoint, check_in_approved(by="alice@ops"))

    reference = RunStore(tmp_path / "plain.sqlite").save(asyncio.run(in_process()))
    assert normal_form(RunStore(store).load("dbos-pause-1")) == normal_form(reference)
