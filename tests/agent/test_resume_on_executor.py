"""``agent.resume(...)`` of an agent built with ``executor=`` is the executor's job, as ``run`` is:
the checkpoint and the answer travel in the job as JSON, the resumed part runs where the
executor runs jobs, an answer that is not JSON is refused in one sentence before anything is
sent, an executor that cannot resume is refused (nothing runs locally instead), and an agent
another process could not import gets the same fix as ``run``. DBOS and Celery:
``tests/distributed/test_dbos_resume.py``, ``test_celery_resume.py``,
``tests/e2e/test_dbos_resume_kill.py``."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from _consent_refund import refund, refunds, respond_refund
from agentfootprint import Agent, RunContext, RunResult, Tracing, check_in_approved, tool
from agentfootprint.distributed import InProcessExecutor, RunJob, RunOutcome
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

FIX = "define the agent in an importable module or pass a factory 'module:make_agent'"
def _agent(executor: Any = None, **options: Any) -> Agent:
    return Agent(provider=mock(respond=respond_refund), model="mock", tools=[refund],
                 executor=executor, **options)


class Watched(InProcessExecutor):
    """The in-process executor, keeping every job it was given (as JSON, as it would travel)."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[dict[str, Any]] = []

    async def run_jobs(self, jobs: Sequence[RunJob]) -> list[RunOutcome]:
        self.jobs += [json.loads(job.model_dump_json()) for job in jobs]
        return await super().run_jobs(jobs)


@pytest.fixture(autouse=True)
def _clear() -> None:
    refunds.clear()


async def _paused_checkpoint(run_id: str = "paused-1") -> dict[str, Any]:
    """A checkpoint of a run paused for consent, made by an agent without an executor."""
    paused = await _agent().run("refund 50", run_id=run_id)
    assert paused.paused
    return paused.checkpoint


async def test_resume_is_a_job_of_the_executor_carrying_checkpoint_and_answer() -> None:
    executor = Watched()
    agent = _agent(executor)
    paused = await agent.run("refund 50", run_id="through-1")
    assert paused.paused and refunds == []
    done = await agent.resume(paused.checkpoint, check_in_approved(by="alice@ops"))
    assert isinstance(done, RunResult) and done.content == "refund done"
    assert done.run_id == "through-1" and refunds == ["through-1:r1"]
    assert agent.last is done and done.source.executor is None  # a copy ran, as for run()
    resumed = executor.jobs[-1]
    assert resumed["run_id"] == "through-1" and resumed["resume"] == {
        "checkpoint": paused.checkpoint, "answer": check_in_approved(by="alice@ops")}
    assert len(executor.jobs) == 2  # the run and its resume, nothing run beside the executor


def test_resume_sync_goes_through_the_executor_too() -> None:
    import asyncio

    executor = Watched()
    agent = _agent(executor)
    checkpoint = asyncio.run(_paused_checkpoint("sync-1"))
    done = agent.resume_sync(checkpoint, check_in_approved(by="alice@ops"), timeout=30)
    assert done.content == "refund done" and refunds == ["sync-1:r1"]
    [job] = executor.jobs
    assert job["resume"]["checkpoint"] == checkpoint and job["options"] == {"timeout": 30}


async def test_an_answer_that_is_not_json_is_refused_before_anything_is_sent() -> None:
    executor = Watched()
    agent = _agent(executor)
    checkpoint = await _paused_checkpoint()
    stamped = {**check_in_approved(by="alice@ops"), "at": datetime.date(2026, 12, 2)}
    with pytest.raises(ConfigurationError) as refused:
        await agent.resume(checkpoint, stamped)
    assert str(refused.value) == (
        f"the answer {stamped!r} cannot travel to the in-process executor (['at'] is a date); "
        "an answer must be JSON data (a dict with str keys, list, str, int, float, bool or "
        "None), so pass plain data such as check_in_approved(by=...) or "
        "model.model_dump(mode='json')")
    with pytest.raises(ConfigurationError, match=r"\(\['why'\] is a tuple\)"):
        await agent.resume(checkpoint, {**check_in_approved(by="a"), "why": ("x", "y")})
    with pytest.raises(ConfigurationError, match="has the key 1, not a str"):
        await agent.resume(checkpoint, {**check_in_approved(by="a"), "n": {1: "x"}})
    assert executor.jobs == [] and refunds == []


async def test_an_executor_that_cannot_resume_is_refused_and_nothing_runs_locally() -> None:
    class RunOnly:
        name = "run-only"

        def __repr__(self) -> str:
            return "<RunOnly>"

        async def run_agent(self, agent: Any, message: str, **options: Any) -> Any:
            raise AssertionError("not reached")

    agent = _agent(RunOnly(), name="refunds")
    with pytest.raises(ConfigurationError) as refused:
        await agent.resume(await _paused_checkpoint(), check_in_approved(by="alice@ops"))
    assert str(refused.value) == (
        "executor <RunOnly> of agent 'refunds' cannot resume a paused run (it has no "
        "resume_agent); give the agent an executor of agentfootprint.distributed, or resume "
        "with an agent built like this one without executor=")
    assert refunds == []


async def test_what_cannot_travel_with_a_resume_is_refused() -> None:
    agent = _agent(Watched())
    checkpoint = await _paused_checkpoint()
    with pytest.raises(ConfigurationError, match="deps= cannot travel with a resume"):
        await agent.resume(checkpoint, check_in_approved(by="a"), deps={"db": 1})
    with pytest.raises(ConfigurationError, match="answer with check_in_approved"):
        await agent.resume(checkpoint, "yes")  # the local resume's own check, before sending
    with pytest.raises(ConfigurationError, match=r"json\.loads the saved text first"):
        await agent.resume(json.dumps(checkpoint), check_in_approved(by="a"))
    assert refunds == []


async def test_an_agent_other_processes_cannot_import_gets_the_fix_on_resume() -> None:
    from agentfootprint.distributed import celery_executor

    pytest.importorskip("celery")
    executor = celery_executor(broker="redis://127.0.0.1:1/0")  # never reached
    checkpoint = await _paused_checkpoint()
    scope: dict[str, Any] = {"__name__": "__main__", "Agent": Agent, "mock": mock,
                             "refund": refund, "respond": respond_refund, "executor": executor}
    exec("agent = Agent(provider=mock(respond=respond), model='mock', tools=[refund], "
         "name='bot', executor=executor)", scope)
    try:
        with pytest.raises(ConfigurationError) as refused:
            await scope["agent"].resume(checkpoint, check_in_approved(by="a"))
        assert str(refused.value) == (
            "agent 'bot' is defined in the script being run (__main__), which another "
            f"process cannot import; {FIX}")
        inner = _agent(executor)
        with pytest.raises(ConfigurationError, match="not a top-level name.*" + FIX):
            await inner.resume(checkpoint, check_in_approved(by="a"))
    finally:
        executor.close()
    assert refunds == []


async def test_a_run_paused_elsewhere_comes_back_resumable(tmp_path: Path) -> None:
    """A run that paused in another process (its result read back from the run store) has
    its checkpoint from the job's outcome, and resuming it goes on in the same recording."""
    from agentfootprint.distributed import _executor

    class Elsewhere(Watched):
        """Runs the job here but hands nothing over: results come from the store."""

        async def run_jobs(self, jobs: Sequence[RunJob]) -> list[RunOutcome]:
            saved = dict(_executor._awaited)
            _executor._awaited.clear()
            try:
                return await super().run_jobs(jobs)
            finally:
                _executor._awaited.update(saved)

    store = RunStore(tmp_path / "runs.db")
    agent = _agent(Elsewhere(), tracing=Tracing(run_store=store))
    paused = await agent.run("refund 50", run_id="far-1")
    assert paused.paused and paused.pause["tool_name"] == "refund"
    assert paused.checkpoint["flow"]["run_id"] == "far-1"
    done = await agent.resume(paused.checkpoint, check_in_approved(by="alice@ops"))
    assert done.content == "refund done" and done.iterations == 2
    assert refunds == ["far-1:r1"]
    recording = store.load("far-1")
    assert recording.status == "done" and recording.output == "refund done"
    assert [w["worker"] for w in recording.meta["placement"]["where"]] == ["in-process"] * 2
    again = await agent.resume(paused.checkpoint, check_in_approved(by="alice@ops"))
    assert again.content == "refund done" and refunds == ["far-1:r1"]  # resumed once
    store.close()


class Killed(BaseException):
    """The process dying mid-tool: no handler of the agent or the executor sees it."""


async def test_a_killed_run_resumed_by_id_continues_from_its_journal_on_the_executor(
        tmp_path: Path) -> None:
    """``agent.resume(run_id)`` (no checkpoint: a run whose process died) is a job too: the
    executor's process continues it from the run store's journal, and the call that finished
    before the crash is not run again."""
    calls: list[str] = []
    kill = {"hold": True}

    @tool(side_effects=False)
    async def pay(ctx: RunContext, amount: int) -> str:
        """Pay an amount."""
        calls.append(f"pay {ctx.idempotency_key}")
        return f"paid {amount}"

    @tool(idempotent=True)
    async def hold(ctx: RunContext) -> str:
        """Hold the order (where the process dies the first time)."""
        calls.append(f"hold {ctx.idempotency_key}")
        if kill.pop("hold", False):
            raise Killed
        return "held"

    def respond(request: Any) -> Any:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done == 0:
            return {"tool_calls": [{"id": "p1", "name": "pay", "args": {"amount": 5}}]}
        if done == 1:
            return {"tool_calls": [{"id": "h1", "name": "hold", "args": {}}]}
        return "paid and held"

    store = RunStore(tmp_path / "runs.db")
    executor = Watched()
    agent = Agent(provider=mock(respond=respond), model="mock", tools=[pay, hold],
                  tracing=Tracing(run_store=store), executor=executor)
    with pytest.raises(Killed):
        await agent.run("order", run_id="killed-1")
    assert store.load("killed-1").status == "running"
    done = await agent.resume("killed-1")
    assert done.content == "paid and held" and done.run_id == "killed-1"
    assert calls == ["pay killed-1:p1", "hold killed-1:h1", "hold killed-1:h1"]
    assert executor.jobs[-1]["resume"] == {"checkpoint": None, "answer": None}
    assert store.load("killed-1").status == "done"
    store.close()
