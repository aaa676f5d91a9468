"""``agent.resume(checkpoint, answer)`` on ``Agent(..., executor=dbos_executor())`` in one process:
the resumed part of a run that paused for consent is a DBOS workflow of its own, named in the
recording's placement, whose steps are the approved tool call and the model call after it; the
same checkpoint resumed again joins that workflow (the tool is not run twice); closing the
executor leaves ``*_sync`` calls' loop working. A process killed
during the resumed part: ``tests/e2e/test_dbos_resume_kill.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _consent_refund import refund, refunds, respond_refund
from agentfootprint import Agent, RunResult, check_in_approved, tool
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

pytest.importorskip("dbos")

AGENT = Agent(provider=mock(respond=respond_refund), model="mock", tools=[refund], name="refunds")


def test_a_resume_on_a_dbos_executor_is_a_workflow_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbos import DBOS

    from agentfootprint.distributed import dbos_executor

    monkeypatch.chdir(tmp_path)
    executor = dbos_executor()
    AGENT.executor = executor
    refunds.clear()
    try:
        paused = asyncio.run(AGENT.run("refund 50", run_id="dbos-resume-1"))
        assert paused.paused and paused.pause["tool_name"] == "refund" and refunds == []
        checkpoint = paused.checkpoint
        done = AGENT.resume_sync(checkpoint, check_in_approved(by="alice@ops"))
        assert isinstance(done, RunResult) and done.content == "refund done"
        assert done.run_id == "dbos-resume-1" and refunds == ["dbos-resume-1:r1"]
        assert AGENT.last is done

        with RunStore(tmp_path / ".agentfootprint" / "runs.db") as runs:
            recording = runs.load("dbos-resume-1")
        assert recording.status == "done" and recording.output == "refund done"
        workflows = [w.get("workflow") for w in recording.meta["placement"]["where"]]
        assert workflows[0] == "dbos-resume-1"
        assert workflows[1].startswith("dbos-resume-1.resume-")
        assert recording.meta["placement"]["workflow"] == workflows[1]
        resumed = workflows[1]
        assert DBOS.get_workflow_status(resumed).status == "SUCCESS"
        assert [s["function_name"] for s in DBOS.list_workflow_steps(resumed)] == ["tool", "llm"]
        first = [s["function_name"] for s in DBOS.list_workflow_steps("dbos-resume-1")]
        assert first == ["llm", "DBOS.setEvent"]  # the model call, then the kept checkpoint

        again = asyncio.run(AGENT.resume(checkpoint, check_in_approved(by="alice@ops")))
        assert again.content == "refund done" and refunds == ["dbos-resume-1:r1"]  # joined
        statuses = DBOS.list_workflows(workflow_id_prefix="dbos-resume-1.resume-")
        assert [w.workflow_id for w in statuses] == [resumed]
    finally:
        AGENT.executor = None
        executor.close()

    @tool
    def note(text: str) -> str:
        """Note something (a sync tool: it runs on the loop's default executor)."""
        return f"noted {text}"

    def respond(request: Any) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return {"tool_calls": [{"id": "n1", "name": "note", "args": {"text": "x"}}]}
        return "ok"

    after = Agent(provider=mock(respond=respond), model="mock", tools=[note]).run_sync("x")
    assert after.history[-1]["content"] == "noted x"  # the closed DBOS lent its pool back
