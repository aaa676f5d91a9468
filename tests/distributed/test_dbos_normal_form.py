"""The normal form (``distributed/_normal_form.py``): idempotent, blind to exactly the fields
its rules remove (run id, created_at, placement, timing values), and to nothing else.

Properties over a real agent run's recording: any run id, save time, placement block and
latencies give the same normal form; the normal form of a normal form is itself; changing any
other leaf of the recording changes it.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint import Agent, RunContext, define_fact, tool
from agentfootprint.distributed import normal_form
from agentfootprint.distributed._normal_form import RULES, RUN, TIMING
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, trace


@tool
async def lookup(ctx: RunContext, order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped (key {ctx.idempotency_key})"


def _recording(run_id: str) -> dict[str, Any]:
    agent = Agent(provider=mock(script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"order": "A-1"}}]},
        "A-1 has shipped."]), model="mock", system="Orders.", tools=[lookup],
        context=[define_fact(id="ship", data="Orders ship in two days.")])
    result = asyncio.run(agent.run("Where is A-1?", run_id=run_id))
    body = json.loads(Recording.of(result, meta={
        "placement": {"host": "h", "pid": 1, "attempts": 1}, "factory": "app:make",
        "kept": "this stays"}).to_json())
    return body  # type: ignore[no-any-return]


BASE_ID = "base-run-0001"
BASE = _recording(BASE_ID)
TIMING_KEYS, _ = trace.keys_of_kinds(("timing",))


def _timing_changes(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for r in body["log"]["records"] for c in r["changes"]
            if c["key"] in TIMING_KEYS and "value" in c]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of the leaves no rule removes."""
    if path in (("run_id",), ("created_at",), ("meta", "placement"), ("meta", "factory")):
        return []
    if isinstance(value, dict):
        if value.get("key") in TIMING_KEYS and "value" in value:
            value = {k: v for k, v in value.items() if k != "value"}
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    if isinstance(value, str) and BASE_ID in value:
        return []  # a string that holds the run id: rule 1 rewrites it
    return [path]


LEAVES = _leaves(BASE)


def _set(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _get(body: dict[str, Any], path: tuple[Any, ...]) -> Any:
    target: Any = body
    for part in path:
        target = target[part]
    return target


run_ids = st.from_regex(r"[a-z][a-z0-9]{11,20}", fullmatch=True)
numbers = st.floats(min_value=0, max_value=1e6, allow_nan=False)
placements = st.dictionaries(st.sampled_from(["host", "pid", "worker", "attempts", "where"]),
                             st.one_of(st.integers(), st.text(max_size=8)), max_size=5)


def test_the_rules_are_documented_in_order() -> None:
    assert RULES == ("run-id", "created-at", "placement", "timings")
    assert LEAVES and _timing_changes(BASE)  # the recording exercises the timing rule


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_id=run_ids, created=numbers, placement=placements, data=st.data())
def test_removed_fields_do_not_change_the_normal_form(run_id: str, created: float,
                                                      placement: dict[str, Any],
                                                      data: st.DataObject) -> None:
    other = json.loads(json.dumps(BASE).replace(BASE_ID, run_id))
    other["created_at"] = created
    other["meta"]["placement"] = placement
    for change in _timing_changes(other):
        change["value"] = [data.draw(numbers) for _ in change["value"]]
    expected = normal_form(BASE)
    assert normal_form(other) == expected
    assert normal_form(expected) == expected  # idempotent
    assert expected["run_id"] == RUN and "created_at" not in expected
    assert all(v == TIMING for c in _timing_changes(expected) for v in c["value"])
    assert expected["meta"] == {k: v for k, v in BASE["meta"].items()
                                if k not in ("placement", "factory")}


@settings(max_examples=60, deadline=None)
@given(index=st.integers(min_value=0, max_value=len(LEAVES) - 1),
       new=st.one_of(st.integers(), st.text(max_size=12), st.booleans(), st.none()))
def test_any_other_change_changes_the_normal_form(index: int, new: Any) -> None:
    path = LEAVES[index]
    if _get(BASE, path) == new or (isinstance(new, str) and (BASE_ID in new or "<" in new)):
        return
    if type(_get(BASE, path)) is not type(new) and _get(BASE, path) == new:
        return  # 1 == True
    changed = copy.deepcopy(BASE)
    _set(changed, path, new)
    assert normal_form(changed) != normal_form(BASE), path
