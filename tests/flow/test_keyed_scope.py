"""``build(keyed_scope=True)``: the chart's stages get a ``KeyedScope`` (state by key only), and
the run records exactly what the same chart with the attribute-form ``Scope`` records."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentfootprint import Agent
from agentfootprint.flow import Scope, decide, flow_chart
from agentfootprint.flow._scope import KeyedScope
from agentfootprint.providers import mock


def _chart(keyed: bool, seen: list[type]) -> Any:
    def start(scope: Scope) -> None:
        seen.append(type(scope))
        scope["n"] = scope.get("n", 0) + 1
        if "items" in scope:
            scope.append("items", {"n": scope["n"]})
        else:
            scope["items"] = [{"n": 1}]
        scope.emit("app.counted", {"n": scope["n"]})

    def route(scope: Scope) -> Any:
        seen.append(type(scope))
        return decide(scope, [{"when": {"n": {"lt": 3}}, "then": "again"}], default="done")

    def done(scope: Scope) -> None:
        seen.append(type(scope))
        scope["total"] = sum(i["n"] for i in scope["items"])

    return (flow_chart("Count", start, id="start")
            .decide("Route", route, id="route")
            .branch("again", "Again", start, id="again", loop_to="start")
            .branch("done", "Done", done, id="done")
            .end()
            .build(keyed_scope=keyed))


def test_a_keyed_chart_records_what_the_attribute_form_records() -> None:
    keyed_types: list[type] = []
    plain_types: list[type] = []
    keyed = asyncio.run(_chart(True, keyed_types).run(run_id="r"))
    plain = asyncio.run(_chart(False, plain_types).run(run_id="r"))
    assert set(keyed_types) == {KeyedScope} and set(plain_types) == {Scope}
    assert keyed.state == plain.state and keyed.state["total"] == 6
    assert json.dumps(keyed.log.to_json()) == json.dumps(plain.log.to_json())


def test_a_keyed_scope_has_no_attribute_form() -> None:
    def stage(scope: Any) -> None:
        scope["a"] = 1
        with pytest.raises(AttributeError):
            scope.a
        with pytest.raises(AttributeError):
            scope.b = 2

    run = asyncio.run(flow_chart("One", stage).build(keyed_scope=True).run())
    assert run.state == {"a": 1}


def test_the_agent_chart_is_keyed() -> None:
    agent = Agent(provider=mock(script=["hi"]), model="mock")
    assert agent.chart.nodes and all(n.keyed_scope for n in agent.chart.nodes.values())
