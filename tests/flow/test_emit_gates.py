"""A recorder's ``wants_emit(name)`` gate: asked before an emit's event is built.

The gate only spares work: the commit log records every emit whatever the gates say, a gate
that says yes delivers exactly the event it would have had without one, and a gate that raises
is an observer failure like a hook's (the emit is then delivered).
"""

from __future__ import annotations

from typing import Any

from agentfootprint.events import EVENTS
from agentfootprint.events._dispatcher import EventBridge, EventDispatcher
from agentfootprint.flow import FlowEvent, flow_chart


class Gated:
    def __init__(self, id: str, wanted: set[str] | None, fail: bool = False) -> None:
        self.id = id
        self.wanted = wanted
        self.fail = fail
        self.asked: list[str] = []
        self.heard: list[tuple[str | None, Any]] = []

    def wants_emit(self, name: str) -> bool:
        self.asked.append(name)
        if self.fail:
            raise RuntimeError("gate broke")
        return self.wanted is None or name in self.wanted

    def on_emit(self, event: FlowEvent) -> None:
        self.heard.append((event.key, event.value))


class Plain:
    id = "plain"

    def __init__(self) -> None:
        self.heard: list[FlowEvent] = []

    def on_emit(self, event: FlowEvent) -> None:
        self.heard.append(event)


def emitting(scope: Any) -> None:
    scope.emit("a", {"n": 1})
    scope.emit("b", {"n": 2})


async def test_gates_choose_what_each_recorder_hears_and_the_log_keeps_everything() -> None:
    only_b = Gated("only-b", {"b"})
    none = Gated("none", set())
    plain = Plain()
    run = await flow_chart("s", emitting).build().run(recorders=[only_b, none, plain])
    assert only_b.asked == ["a", "b"] and only_b.heard == [("b", {"n": 2})]
    assert none.asked == ["a", "b"] and none.heard == []
    assert [(e.key, e.value) for e in plain.heard] == [("a", {"n": 1}), ("b", {"n": 2})]
    assert plain.heard[1].runtime_stage_id == "s#0" and plain.heard[1].stage_id == "s"
    assert run.log.records[0].emits == (("a", {"n": 1}), ("b", {"n": 2}))
    assert run.observer_errors == []


async def test_a_gate_that_raises_is_an_observer_failure_and_the_emit_is_delivered() -> None:
    broken = Gated("broken", set(), fail=True)
    run = await flow_chart("s", emitting).build().run(recorders=[broken])
    assert broken.heard == [("a", {"n": 1}), ("b", {"n": 2})]
    assert [(f.observer, f.hook) for f in run.observer_errors] == [
        ("broken", "wants_emit"), ("broken", "wants_emit")]
    assert "RuntimeError: gate broke" in run.observer_errors[0].error


async def test_the_agent_event_bridge_wants_only_what_someone_listens_to() -> None:
    name = next(n for n in EVENTS if n.startswith("agentfootprint.agent."))
    dispatcher = EventDispatcher()
    bridge = EventBridge(dispatcher)
    assert not bridge.wants_emit(name)
    heard: list[str] = []
    off = dispatcher.on(name, lambda event: heard.append(event.type))
    assert bridge.wants_emit(name)
    assert not bridge.wants_emit("my.own.emit")

    def stage(scope: Any) -> None:
        scope.emit(name, {})
        scope.emit("my.own.emit", {})

    await flow_chart("s", stage).build().run(recorders=[bridge])
    assert heard == [name]
    off()
    assert not bridge.wants_emit(name)
