"""The executor port in-process: batches in input order, the run id as idempotency handle,
where-and-how-many-attempts on every recording, and explanations fanned out with the same
verdicts as without an executor (deterministic and sampling models alike)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_agents import applied, make_sampling_agent, make_suspect_agent

from agentfootprint.distributed import InProcessExecutor, RunJob, run_many
from agentfootprint.distributed._executor import execute
from agentfootprint.errors import ConfigurationError
from agentfootprint.explain import localize_context_bug, wrong_if
from agentfootprint.explain._whatif import bisect_culprits
from agentfootprint.runs import RunStore

FACTORY = "fleet_agents:make_agent"


@pytest.fixture(autouse=True)
def fleet_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AF_FLEET_DIR", str(tmp_path))
    return tmp_path


async def test_run_many_answers_in_input_order_and_records_where_it_ran(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    messages = [f"m{i}" for i in range(12)]
    outcomes = await run_many(FACTORY, messages, store=str(store),
                              executor=InProcessExecutor(concurrency=3))
    assert [o.content for o in outcomes] == [f"done: {m}" for m in messages]
    assert len({o.run_id for o in outcomes}) == 12
    with RunStore(store) as runs:
        meta = runs.load(outcomes[3].run_id).meta
    assert meta["factory"] == FACTORY
    assert meta["placement"]["worker"] == "in-process"
    assert meta["placement"]["attempts"] == 1
    assert len(meta["placement"]["where"]) == 1
    assert outcomes[3].placement["attempts"] == 1


async def test_a_run_id_delivered_again_returns_its_stored_answer(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    first = await run_many(FACTORY, ["pay"], store=store, run_ids=["r-1"])
    again = await run_many(FACTORY, ["pay"], store=store, run_ids=["r-1"])
    assert not first[0].reused and again[0].reused
    assert again[0].content == first[0].content == "done: pay"
    assert [key for key, _ in applied(tmp_path)] == ["r-1:c1"]  # the effect, once


async def test_a_run_killed_mid_tool_is_resumed_not_repeated(tmp_path: Path) -> None:
    """A first attempt that died inside its tool call leaves a 'running' row; the job
    delivered again resumes it and counts a second attempt."""
    store = str(tmp_path / "runs.db")
    job = RunJob(factory=FACTORY, message="block once", run_id="k-1", store=store)
    (tmp_path / "release").unlink(missing_ok=True)
    import asyncio

    first = asyncio.create_task(execute(job, worker="first"))
    while not (tmp_path / "entered-k-1").exists():
        await asyncio.sleep(0.01)
    first.cancel()  # the attempt dies with its effect applied and no outcome recorded
    with pytest.raises(asyncio.CancelledError):
        await first
    (tmp_path / "release").touch()
    outcome = await execute(job, worker="second")
    assert outcome.status == "done" and outcome.content == "done: block once"
    assert outcome.placement["attempts"] == 2
    assert [w["worker"] for w in outcome.placement["where"]] == ["first", "second"]
    assert [key for key, _ in applied(tmp_path)] == ["k-1:c1"]


async def test_one_failing_job_is_its_outcome_not_the_batch() -> None:
    outcomes = await run_many("fleet_agents:no_such_factory", ["a", "b"])
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "no_such_factory" in (outcomes[0].error or "")


async def test_bad_batches_are_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="importable"):
        await run_many(lambda: None, ["a"])
    with pytest.raises(ConfigurationError, match="one distinct id per message"):
        await run_many(FACTORY, ["a", "b"], run_ids=["x", "x"])
    with pytest.raises(ConfigurationError, match="list of str"):
        await run_many(FACTORY, "a")


async def test_localize_on_an_executor_gives_the_same_report() -> None:
    result = await make_suspect_agent().run("What should we do about ticket 42?")
    wrong = wrong_if(contains="WRONG")
    here = await localize_context_bug(result, is_wrong=wrong)
    there = await localize_context_bug(result, is_wrong=wrong, executor=InProcessExecutor(),
                                       factory="fleet_agents:make_suspect_agent")
    assert [c.members for c in there.causes] == [("f7",)]
    assert there.to_proof() == here.to_proof()


async def test_a_sampling_model_gets_the_same_seeds_on_an_executor() -> None:
    agent = make_sampling_agent()
    wrong = wrong_if(contains="WRONG")
    result = None
    for _ in range(20):  # the first run that answered wrong
        result = await agent.run("What should we do about ticket 42?")
        if wrong(result.content):
            break
    assert result is not None and wrong(result.content)
    here = await localize_context_bug(result, is_wrong=wrong, budget=120)
    there = await localize_context_bug(result, is_wrong=wrong, budget=120,
                                       executor=InProcessExecutor(),
                                       factory="fleet_agents:make_sampling_agent")
    assert not here.deterministic and here.runs_used > 8
    assert there.to_proof() == here.to_proof()
    bisect_here = await bisect_culprits(result, is_wrong=wrong, reruns=3)
    bisect_there = await bisect_culprits(result, is_wrong=wrong, reruns=3,
                                         executor=InProcessExecutor(),
                                         factory="fleet_agents:make_sampling_agent")
    assert bisect_there.to_proof() == bisect_here.to_proof()


async def test_an_executor_refuses_what_cannot_travel() -> None:
    result = await make_suspect_agent().run("What should we do about ticket 42?")
    wrong = wrong_if(contains="WRONG")
    with pytest.raises(ConfigurationError, match="factory="):
        await localize_context_bug(result, is_wrong=wrong, executor=InProcessExecutor())
    with pytest.raises(ConfigurationError, match="rebuild"):
        await localize_context_bug(result, is_wrong=wrong, executor=InProcessExecutor(),
                                   factory="fleet_agents:make_suspect_agent",
                                   rebuild=lambda without: make_suspect_agent())
    with pytest.raises(ConfigurationError, match="deps"):
        await localize_context_bug(result, is_wrong=wrong, executor=InProcessExecutor(),
                                   factory="fleet_agents:make_suspect_agent", deps={"x": 1})


def test_run_many_takes_an_agent_instance_and_refuses_what_is_neither() -> None:
    from agentfootprint import Agent
    from agentfootprint.distributed import run_many_sync
    from agentfootprint.errors import ConfigurationError
    from agentfootprint.providers import mock

    agent = Agent(provider=mock(reply="x"))  # built in a function: in-process takes it as is
    assert [o.content for o in run_many_sync(agent, ["hi", "ho"])] == ["x", "x"]
    with pytest.raises(ConfigurationError, match="the agent or the function that builds it"):
        run_many_sync(42, ["hi"])
