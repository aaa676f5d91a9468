"""``Agent(..., executor=dbos_executor())`` in one process: ``agent.run`` is a DBOS workflow whose
steps are the model and tool calls, on the default system database and run store under
``.agentfootprint/``, handing back the usual RunResult; an agent the recovering process could
not import is refused before anything runs. Kill and recovery:
``tests/e2e/test_dbos_agent_kill.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, RunContext, RunResult, tool
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

pytest.importorskip("dbos")

paid: list[str] = []


@tool
async def pay(ctx: RunContext, amount: int) -> str:
    """Pay an amount."""
    paid.append(ctx.idempotency_key)
    return f"paid {amount}"


def _respond(request: Any) -> Any:
    done = sum(1 for m in request.messages if m["role"] == "tool")
    if done < 2:
        return {"tool_calls": [{"id": f"c{done}", "name": "pay", "args": {"amount": done}}]}
    return "paid twice"


DURABLE = Agent(provider=mock(respond=_respond), model="mock", tools=[pay], name="durable")


def test_agent_run_on_a_default_dbos_executor_is_a_workflow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbos import DBOS

    from agentfootprint.distributed import dbos_executor

    monkeypatch.chdir(tmp_path)
    executor = dbos_executor()
    DURABLE.executor = executor
    paid.clear()
    try:
        script: Any = {"__name__": "__main__", "Agent": Agent, "mock": mock}
        exec("agent = Agent(provider=mock(reply='x'), model='mock', name='s')", script)
        script["agent"].executor = executor
        with pytest.raises(ConfigurationError, match="define the agent in an importable module"):
            asyncio.run(script["agent"].run("x"))

        result = asyncio.run(DURABLE.run("pay it", run_id="durable-run-1"))
        assert isinstance(result, RunResult) and result.content == "paid twice"
        assert result.iterations == 3 and paid == ["durable-run-1:c0", "durable-run-1:c1"]
        steps = [s["function_name"] for s in DBOS.list_workflow_steps("durable-run-1")]
        assert steps == ["llm", "tool", "llm", "tool", "llm"]
        assert (tmp_path / ".agentfootprint" / "dbos.sqlite").exists()
        with RunStore(tmp_path / ".agentfootprint" / "runs.db") as runs:
            meta = runs.load("durable-run-1").meta
        assert meta["factory"] == "test_dbos_agent:DURABLE"
        assert meta["placement"]["worker"].startswith("dbos")

        again = asyncio.run(DURABLE.run("pay it", run_id="durable-run-1"))
        assert again.content == "paid twice" and len(paid) == 2  # the workflow's record
    finally:
        DURABLE.executor = None
        executor.close()
