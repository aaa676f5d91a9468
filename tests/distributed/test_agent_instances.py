"""Agents by reference: ``run_many(agent)`` with an instance, ``Agent(executor=...)`` whose
``run()`` is an executor's job handing back the usual RunResult, the refusal of agents another
process cannot find (``__main__``, built in a function), and ``celery_executor(app)``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fleet_agents import _respond, applied, effect
from instance_agents import AGENT, SCRIPTED

from agentfootprint import Agent, RunResult, Tracing
from agentfootprint.distributed import InProcessExecutor, run_many
from agentfootprint.errors import ConfigurationError, RunError
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

FIX = "define the agent in an importable module or pass a factory 'module:make_agent'"


@pytest.fixture(autouse=True)
def fleet_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AF_FLEET_DIR", str(tmp_path))
    return tmp_path


def _in_main(source: str) -> Any:
    """What ``source`` builds when run as the script (``__main__``)."""
    scope: dict[str, Any] = {"__name__": "__main__", "Agent": Agent, "mock": mock}
    exec(source, scope)
    return scope["agent"]


async def test_run_many_with_a_module_level_agent_runs_a_fresh_copy_per_run(
        tmp_path: Path) -> None:
    seen: list[str] = []
    stop = AGENT.on("agent.turn_end", lambda event: seen.append(event.payload["content"]))
    try:
        store = str(tmp_path / "runs.db")
        outcomes = await run_many(AGENT, ["a", "b", "c"], store=store,
                                  executor=InProcessExecutor(concurrency=2))
    finally:
        stop()
    assert [o.content for o in outcomes] == ["done: a", "done: b", "done: c"]
    assert sorted(seen) == ["done: a", "done: b", "done: c"]  # the instance's listeners heard
    assert AGENT.last is None  # each run had its own copy: the instance kept no run state
    with RunStore(store) as runs:
        assert runs.load(outcomes[0].run_id).meta["factory"] == "instance_agents:AGENT"
    assert sorted(key for key, _ in applied(tmp_path)) == sorted(
        f"{o.run_id}:c1" for o in outcomes)


async def test_each_job_of_a_module_level_agent_starts_its_model_afresh() -> None:
    """As if a factory had built the agent for each run: a scripted model's cursor is not
    shared between the runs of a batch (so workers and in-process give the same answers)."""
    outcomes = await run_many(SCRIPTED, ["a", "b", "c"])
    assert [o.content for o in outcomes] == ["first"] * 3
    assert (await SCRIPTED.run("d")).content == "first"  # the instance's own script untouched


async def test_an_agent_built_in_a_function_or_the_script_runs_in_process() -> None:
    local = Agent(provider=mock(reply="here"), model="mock")
    assert [o.content for o in await run_many(local, ["x"])] == ["here"]
    script = _in_main("agent = Agent(provider=mock(reply='script'), model='mock')")
    assert [o.content for o in await run_many(script, ["x"])] == ["script"]


async def test_executors_that_run_elsewhere_refuse_agents_they_cannot_import() -> None:
    from agentfootprint.distributed import celery_executor

    executor = celery_executor(broker="redis://127.0.0.1:1/0")  # never reached
    script = _in_main("agent = Agent(provider=mock(reply='x'), model='mock', name='bot')")
    with pytest.raises(ConfigurationError) as refused:
        await run_many(script, ["x"], executor=executor)
    assert str(refused.value) == (
        "agent 'bot' is defined in the script being run (__main__), which another process "
        f"cannot import; {FIX}")
    local = Agent(provider=mock(reply="x"), model="mock", name="inner")
    with pytest.raises(ConfigurationError, match="not a top-level name of module "
                                                  "'test_agent_instances'.*" + FIX):
        await run_many(local, ["x"], executor=executor)
    remote = Agent(provider=mock(reply="x"), model="mock", executor=executor)
    with pytest.raises(ConfigurationError, match="not a top-level name"):
        await remote.run("x")
    executor.close()


PLAIN = Agent(provider=mock(respond=_respond), model="mock", tools=[effect],
              executor=InProcessExecutor())


async def test_agent_run_through_an_executor_is_the_usual_run_result(tmp_path: Path) -> None:
    heard: list[str] = []
    PLAIN.on("agent.turn_end", lambda event: heard.append(event.payload["content"]))
    result = await PLAIN.run("pay", run_id="through-1")
    assert isinstance(result, RunResult) and result.content == "done: pay"
    assert result.run_id == "through-1" and result.iterations == 2
    assert heard == ["done: pay"]
    assert PLAIN.checkpoint() == result.checkpoint  # follow_up continues from it
    second = await PLAIN.follow_up("again")
    assert second.turn == 2 and second.history[:len(result.history)] == result.history
    assert result.source.executor is None  # what ran (and an explanation re-runs) is a copy
    assert [key for key, _ in applied(tmp_path)][:1] == ["through-1:c1"]


async def test_agent_run_on_an_executor_records_where_it_ran_and_is_idempotent(
        tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    agent = Agent(provider=mock(respond=_respond), model="mock", tools=[effect],
                  tracing=Tracing(run_store=store), executor=InProcessExecutor())
    first = await agent.run("ship", run_id="idem-1")
    again = await agent.run("ship", run_id="idem-1")  # finished: read back from the store
    assert first.content == again.content == "done: ship"
    assert again.recording.log.to_json() == first.recording.log.to_json()
    assert [key for key, _ in applied(tmp_path)] == ["idem-1:c1"]  # the effect, once
    meta = store.load("idem-1").meta
    assert meta["placement"]["worker"] == "in-process"
    assert meta["factory"].startswith("agentfootprint._refs:live_")  # this process only
    store.close()


async def test_a_failed_run_raises_its_own_error_and_what_cannot_travel_is_refused() -> None:
    def broken(_request: Any) -> Any:
        raise RuntimeError("model down")

    agent = Agent(provider=mock(respond=broken), model="mock", executor=InProcessExecutor())
    with pytest.raises(Exception, match="model down"):
        await agent.run("x")
    with pytest.raises(ConfigurationError, match="deps= cannot travel"):
        await agent.run("x", deps={"db": 1})
    with pytest.raises(ConfigurationError, match=r"executor=.* cannot run an agent"):
        Agent(provider=mock(reply="x"), model="mock", executor="celery")  # type: ignore[arg-type]


async def test_a_run_another_process_finished_comes_back_from_the_store(tmp_path: Path) -> None:
    class Elsewhere(InProcessExecutor):
        """Runs the job here but hands nothing over: the result must come from the store."""

        shares_process = True

        async def run_jobs(self, jobs: Any) -> Any:
            from agentfootprint.distributed import _executor

            saved = dict(_executor._awaited)
            _executor._awaited.clear()
            try:
                return await super().run_jobs(jobs)
            finally:
                _executor._awaited.update(saved)

    store = RunStore(tmp_path / "runs.db")
    agent = Agent(provider=mock(respond=_respond), model="mock", tools=[effect],
                  tracing=Tracing(run_store=store), executor=Elsewhere())
    result = await agent.run("far", run_id="far-1")
    assert result.content == "done: far" and result.turn == 1 and result.iterations == 2
    assert result.recording.run_id == "far-1" and len(result.recording.log) > 0
    assert agent.checkpoint() == result.checkpoint
    failing = Agent(provider=mock(respond=lambda r: 1 / 0), model="mock",
                    tracing=Tracing(run_store=store), executor=Elsewhere())
    with pytest.raises((RunError, ZeroDivisionError)):
        await failing.run("x")
    store.close()


def test_celery_executor_takes_a_celery_app() -> None:
    celery = pytest.importorskip("celery")
    from agentfootprint.distributed import celery_executor
    from agentfootprint.distributed._celery import RERUN_TASK, RUN_TASK

    app = celery.Celery("mine", broker="redis://127.0.0.1:1/3", backend="redis://127.0.0.1:1/4")
    executor = celery_executor(app, queue="q1", timeout=5)
    assert executor.app is app and executor.queue == "q1"
    assert {RUN_TASK, RERUN_TASK} <= set(app.tasks)  # its workers serve our tasks
    assert app.conf.broker_url == "redis://127.0.0.1:1/3"
    assert app.conf.result_backend == "redis://127.0.0.1:1/4"
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    keyword = celery_executor(broker="redis://127.0.0.1:1/5")  # the keywords still work
    assert keyword.app.conf.broker_url == "redis://127.0.0.1:1/5"
    with pytest.raises(ConfigurationError, match="has no broker URL"):
        celery_executor(celery.Celery("bare"))
    with pytest.raises(ConfigurationError, match="a Celery app or a broker URL"):
        celery_executor(42)  # type: ignore[arg-type]
    for made in (executor, keyword):
        made.close()


def test_run_many_sync_with_an_instance() -> None:
    from agentfootprint.distributed import run_many_sync

    assert [o.content for o in run_many_sync(AGENT, ["s"])] == ["done: s"]
    assert asyncio.iscoroutinefunction(AGENT.run)
