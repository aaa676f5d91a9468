"""The engine's inline step commit (``_Engine.walk``) records what ``commit`` records.

A decider that returns a ``Decision`` naming one of its branches is recorded inline; any other
answer (a bare branch id, a fallback to the default, a bad branch) goes through ``decided`` and
``commit``. A change is built as ``_ChangeSlots`` and made a ``Change``: it must be a real,
frozen, equal, picklable ``Change``. A loop back is followed inline unless a ``loop`` recorder
listens or the limit is reached.
"""

from __future__ import annotations

import asyncio
import pickle
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from agentfootprint.errors import LoopLimitError, StageError
from agentfootprint.flow import Decision, Scope, flow_chart
from agentfootprint.flow._commitlog import Change


def _chart(answer: Any, *, default: str | None = None) -> Any:
    def start(scope: Scope) -> None:
        scope["n"] = scope.get("n", 0) + 1
        if "seen" in scope:
            scope.append("seen", {"n": scope["n"]})
        else:
            scope["seen"] = [{"n": 1}]

    def route(scope: Scope) -> Any:
        scope["routed"] = True
        return answer(scope["n"])

    builder = (flow_chart("Start", start, id="start")
               .decide("Route", route, id="route")
               .branch("again", "Again", lambda scope: None, id="again", loop_to="start")
               .branch("done", "Done", lambda scope: None, id="done"))
    if default is not None:
        builder = builder.default(default)
    return builder.end().build()


def _decisions(run: Any) -> list[dict[str, Any] | None]:
    return [r.decision for r in run.log.records if r.kind == "decider"]


def test_a_decision_and_a_bare_branch_id_record_the_same_steps() -> None:
    evidence = {"why": "counted"}
    as_decision = asyncio.run(_chart(
        lambda n: Decision("again" if n < 3 else "done", evidence)).run(run_id="r"))
    as_id = asyncio.run(_chart(lambda n: "again" if n < 3 else "done").run(run_id="r"))
    assert _decisions(as_decision) == [{"chosen": "again", "evidence": evidence}] * 2 + [
        {"chosen": "done", "evidence": evidence}]
    assert _decisions(as_id) == [{"chosen": "again"}] * 2 + [{"chosen": "done"}]
    for a, b in zip(as_decision.log.records, as_id.log.records, strict=True):
        assert (a.kind, a.runtime_stage_id, a.reads, a.changes, a.parent, a.control,
                a.loop_pass) == (b.kind, b.runtime_stage_id, b.reads, b.changes, b.parent,
                                 b.control, b.loop_pass)
    assert as_decision.state["n"] == 3 and as_decision.state["routed"] is True


def test_a_fallback_and_a_bad_branch_are_recorded_as_before() -> None:
    fell_back = asyncio.run(_chart(lambda n: Decision("nowhere", {}), default="done").run())
    assert _decisions(fell_back) == [{"chosen": "nowhere", "evidence": {}, "fallback": "done"}]
    with pytest.raises(StageError, match="not one of its branches"):
        asyncio.run(_chart(lambda n: Decision("nowhere", {})).run())


def test_a_committed_change_is_a_frozen_equal_picklable_change() -> None:
    run = asyncio.run(_chart(lambda n: "again" if n < 2 else "done").run())
    changes = [c for r in run.log.records for c in r.changes]
    assert {c.op for c in changes} == {"set", "append"}
    for change in changes:
        assert type(change) is Change
        assert change == Change(change.key, change.op, change.value)
        if change.op == "set" and type(change.value) is int:
            assert hash(change) == hash(Change(change.key, change.op, change.value))
        assert pickle.loads(pickle.dumps(change)) == change
        with pytest.raises(FrozenInstanceError):
            change.key = "other"


def test_a_loop_back_still_counts_passes_and_stops_at_the_limit() -> None:
    looped: list[int] = []

    class Loops:
        def on_loop(self, event: Any) -> None:
            looped.append(event.data["pass"])

    forever = _chart(lambda n: "again")
    with pytest.raises(LoopLimitError, match="max_loop_iterations=3"):
        asyncio.run(forever.run(max_loop_iterations=3))
    with pytest.raises(LoopLimitError):
        asyncio.run(forever.run(max_loop_iterations=3, recorders=[Loops()]))
    assert looped == [1, 2, 3]
