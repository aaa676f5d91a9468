"""The agent event bridge's emit gate answers from a per-name cache that listeners keep fresh.

The gate is the cache's own ``__getitem__`` (no Python call per emit once a name was asked);
it must still change its answer the moment a listener is added or removed, mid-run included.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentfootprint.events import EVENTS
from agentfootprint.events._dispatcher import _WANTED_NAMES, EventBridge, EventDispatcher
from agentfootprint.flow import Scope, flow_chart


def _names(domain: str) -> list[str]:
    return [n for n in EVENTS if n.startswith(f"agentfootprint.{domain}.")]


def test_the_gate_follows_every_subscription_change() -> None:
    dispatcher = EventDispatcher()
    bridge = EventBridge(dispatcher)
    agent_name, stream_name = _names("agent")[0], _names("stream")[0]
    assert not bridge.wants_emit(agent_name) and not bridge.wants_emit(stream_name)
    off_one = dispatcher.on(agent_name, lambda event: None)
    assert bridge.wants_emit(agent_name) and not bridge.wants_emit(stream_name)
    off_domain = dispatcher.on("stream.*", lambda event: None)
    assert bridge.wants_emit(stream_name)
    off_one()
    assert not bridge.wants_emit(agent_name) and bridge.wants_emit(stream_name)
    off_all = dispatcher.on("*", lambda event: None)
    assert bridge.wants_emit(agent_name)
    assert not bridge.wants_emit("my.own.emit")  # only the agentfootprint. namespace
    off_all()
    off_domain()
    assert not bridge.wants_emit(agent_name) and not bridge.wants_emit(stream_name)


def test_a_listener_added_mid_run_hears_the_emits_after_it() -> None:
    dispatcher = EventDispatcher()
    first, second = _names("agent")[:2]
    heard: list[str] = []

    def stage(scope: Scope) -> None:
        scope.emit(first, {})  # nobody listens yet
        dispatcher.on(first, lambda event: heard.append(event.type))
        scope.emit(first, {})
        scope.emit(second, {})

    run = asyncio.run(flow_chart("s", stage).build().run(recorders=[EventBridge(dispatcher)]))
    assert heard == [first]
    assert [n for n, _ in run.log.records[0].emits] == [first, first, second]


def test_the_cache_stays_bounded_by_distinct_names() -> None:
    dispatcher = EventDispatcher()
    bridge = EventBridge(dispatcher)
    for index in range(_WANTED_NAMES * 2 + 5):
        assert not bridge.wants_emit(f"agentfootprint.custom.n{index}")
    cache: Any = dispatcher._wanted
    assert len(cache) <= _WANTED_NAMES
