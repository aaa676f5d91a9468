"""Invalid checkpoints are refused with a clear error and never resumed.

A paused run's checkpoint is plain JSON a caller keeps; one edited or truncated on the way back
(half its log cut, ``iteration = "NaN"``, ``history`` not a list, a paused batch pointing
nowhere) raises ``CheckpointError`` naming the run and the fix, before any tool or model runs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from agentfootprint import Agent, check_in_approved, tool
from agentfootprint.errors import CheckpointError
from agentfootprint.providers import mock


def _agent(ran: list[str]) -> tuple[Agent, Any]:
    @tool(check_in=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return "refunded"

    provider = mock(script=[{"tool_calls": [{"name": "refund", "args": {"order": "A-1"}}]},
                            "refund issued"])
    return Agent(provider=provider, model="m", tools=[refund]), provider


def _cut_log(cp: dict[str, Any]) -> None:
    records = cp["flow"]["log"]["records"]
    cp["flow"]["log"]["records"] = records[: len(records) // 2]


def _drop_a_record(cp: dict[str, Any]) -> None:
    del cp["flow"]["log"]["records"][2]


def _state(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda cp: cp["flow"]["state"].__setitem__(key, value)


def _batch_index(cp: dict[str, Any]) -> None:
    cp["flow"]["state"]["paused_tool_batch"]["index"] = 7


@pytest.mark.parametrize(("edit", "message"), [
    pytest.param(_cut_log, "incomplete log: it does not end with the paused step", id="half-log"),
    pytest.param(_drop_a_record, "incomplete log: a record is missing", id="record-dropped"),
    pytest.param(_state("iteration", "NaN"), "'iteration' is 'NaN', not a whole number",
                 id="iteration-nan"),
    pytest.param(_state("iteration", float("nan")), "'iteration' is nan", id="iteration-float"),
    pytest.param(_state("turn", True), "'turn' is True", id="turn-bool"),
    pytest.param(_state("history", "not a list"), "'history' is not a list of messages",
                 id="history-str"),
    pytest.param(_state("history", [{"content": "no role"}]), "'history' is not a list",
                 id="history-no-role"),
    pytest.param(_batch_index, "'paused_tool_batch' does not name a call", id="batch-index"),
])
async def test_an_edited_checkpoint_is_refused_before_anything_runs(
        edit: Callable[[dict[str, Any]], None], message: str) -> None:
    ran: list[str] = []
    agent, provider = _agent(ran)
    paused = await agent.run("refund A-1")
    checkpoint = json.loads(json.dumps(paused.checkpoint))
    edited = copy.deepcopy(checkpoint)
    edit(edited)
    asked = len(provider.requests)
    with pytest.raises(CheckpointError, match=message) as caught:
        await agent.resume(edited, check_in_approved(by="ops"))
    assert paused.run_id in str(caught.value)
    assert ran == [] and len(provider.requests) == asked  # nothing ran
    result = await agent.resume(checkpoint, check_in_approved(by="ops"))
    assert (result.content, ran) == ("refund issued", ["A-1"])  # the unedited one resumes
