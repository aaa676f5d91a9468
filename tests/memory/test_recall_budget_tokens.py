"""memory.budget(tokenizer=...): a recall budget counted with a real vocabulary, and the
recorded pick says how its tokens were counted (the len/4 estimate is labelled as one)."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent
from agentfootprint.memory import InMemoryStore, MemoryIdentity, budget, define_memory
from agentfootprint.providers import mock

pytest.importorskip("bpe_openai")

CONV = MemoryIdentity("tenant", "user", "conv")


def picks(result: Any) -> list[dict[str, Any]]:
    """Every ``pick`` the memory's read chart recorded, from the commit log."""
    return [change.value for record in result.recording.log.records
            for change in record.changes if change.key == "pick"]


async def run_twice(strategy: Any) -> Any:
    store = InMemoryStore()
    memory = define_memory(id="chat", type="episodic", strategy=strategy, store=store)
    for reply in ("3141592653 5897932384 " * 6, "last"):
        result = await Agent(provider=mock(reply=reply), model="m", memory=[memory],
                             identity=CONV).run("digits please")
    return result


async def test_a_recall_budget_records_its_vocabulary_or_the_estimate() -> None:
    counted = picks(await run_twice(budget(tokenizer="o200k_base")))
    estimated = picks(await run_twice(budget()))
    assert counted[-1]["rule"] == "pick" and counted[-1]["counted_by"] == "o200k_base"
    assert estimated[-1]["counted_by"] == "estimate: len/4"
    assert counted[-1]["used"] != estimated[-1]["used"]  # digits: the estimate is off
