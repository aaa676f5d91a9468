"""The code runner inside an agent: one ledger row per dispatch, carried by checkpoint()."""

from __future__ import annotations

import os

import pytest

from agentfootprint import Agent
from agentfootprint.providers import mock
from agentfootprint.tools import code_runner

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the runner's limits are POSIX")


def run_code(call_id: str, code: str) -> dict[str, object]:
    return {"tool_calls": [{"id": call_id, "name": "run_code", "args": {"code": code}}]}


async def test_agent_files_rows_and_checkpoint_drops_earlier_text() -> None:
    """Each dispatch files a row with its text; the next turn keeps rows but drops the text."""
    provider = mock(script=[run_code("c1", "print(6 * 7)"), "It is 42.",
                            run_code("c2", "print('again')"), "Done."])
    agent = Agent(provider=provider, model="m", tools=[code_runner(timeout=20)])
    first = await agent.run("compute")
    rows = first.recording.state["findings_ledger"]
    assert [(r["turn"], r["dispatch"], r["outcome"]) for r in rows] == [(1, 1, "ran")]
    assert rows[0]["text"] == "print(6 * 7)"
    assert "42" in first.history[-1]["content"]
    saved = first.checkpoint
    assert saved["findings_ledger"][0]["text"] == "print(6 * 7)"
    second = await agent.run("again", continue_from=saved)
    rows = second.recording.state["findings_ledger"]
    assert [(r["turn"], r["dispatch"]) for r in rows] == [(1, 1), (2, 1)]
    assert "text" not in rows[0] and rows[1]["text"] == "print('again')"
