"""``scope.append`` records exactly what read-append-write records, without copying the list.

The agent appends a usage row and a latency to growing lists on every model call; the
constant-time path must leave the log, the reads and the state identical to the plain three
lines, and must never change a committed list somebody else still holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentfootprint.flow import flow_chart
from agentfootprint.flow._values import FrozenList

Stage = Callable[[Any], None]


def _plain(key: str, item: object) -> Stage:
    def stage(scope: Any) -> None:
        items = scope.get(key) or []
        items.append(item)
        scope[key] = items
    return stage


def _fast(key: str, item: object) -> Stage:
    def stage(scope: Any) -> None:
        scope.append(key, item)
    return stage


async def _log(stages: list[Stage], state: dict[str, Any] | None = None,
               **kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    chart = flow_chart("s0", stages[0])
    for index, stage in enumerate(stages[1:], 1):
        chart = chart.then(f"s{index}", stage)
    run = await chart.build().run(state=state, **kwargs)
    records = [(r.reads, [c.to_json() for c in r.changes]) for r in run.log.records]
    return records, dict(run.state)


async def test_append_records_what_read_append_write_records() -> None:
    items: list[object] = [{"row": 1, "nested": [1, {"a": 2}]}, 0.5, "x", {"row": 2}, [3]]
    for start in (None, {"k": []}, {"k": None}, {"k": [0]}):
        plain = await _log([_plain("k", i) for i in items], state=start)
        fast = await _log([_fast("k", i) for i in items], state=start)
        assert fast == plain
        assert fast[0][3] == (("k",), [{"key": "k", "op": "append", "value": [{"row": 2}]}])


async def test_two_appends_and_a_read_in_one_stage() -> None:
    def plain(scope: Any) -> None:
        for item in (1, 2):
            items = scope.get("k") or []
            items.append(item)
            scope["k"] = items
        scope["seen"] = len(scope["k"])

    def fast(scope: Any) -> None:
        scope.append("k", 1)
        scope.append("k", 2)
        scope["seen"] = len(scope["k"])  # a read of the pending append sees it

    def then_delete(scope: Any) -> None:
        scope.append("k", 3)
        del scope["k"]

    for last in (then_delete, _plain("k", 4)):
        assert await _log([_plain("k", 0), _plain("k", 0), fast, last]) == \
            await _log([_plain("k", 0), _plain("k", 0), plain, last])


async def test_a_held_committed_list_never_changes() -> None:
    held: list[Any] = []
    lists: list[Any] = []

    def keep(scope: Any) -> None:
        held.append(scope._frame.state["k"])  # somebody holds the committed list

    def look(scope: Any) -> None:
        lists.append(scope._frame.state["k"])

    stages = [_fast("k", 0), _fast("k", 1), look, _fast("k", 2), look, _fast("k", 3), keep,
              _fast("k", 4), look]
    _, state = await _log(stages)
    assert state["k"] == [0, 1, 2, 3, 4]
    assert held[0] == [0, 1, 2, 3] and type(held[0]) is FrozenList  # still what it was
    assert lists[1] is not held[0] or lists[1] == [0, 1, 2, 3]
    assert lists[-1] == [0, 1, 2, 3, 4] and lists[-1] is not held[0]


async def test_an_unheld_list_grows_in_place() -> None:
    ids: list[int] = []

    def look(scope: Any) -> None:
        ids.append(id(scope._frame.state["k"]))

    stages = [_fast("k", 0), _fast("k", 1), _fast("k", 2), look, _fast("k", 3), look,
              _fast("k", 4), look]
    _, state = await _log(stages)
    assert state["k"] == [0, 1, 2, 3, 4]
    assert ids[0] == ids[1] == ids[2]  # no copy per append once only the state holds it


async def test_recorders_and_redaction_see_the_same_run() -> None:
    from agentfootprint.flow._redact import RedactionPolicy

    class Writes:
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def on_write(self, event: Any) -> None:
            self.seen.append((event.key, event.value))

    items = ["a", "secret-b", "c"]
    policy = RedactionPolicy(keys=("k",))
    for kwargs in ({"recorders": [Writes()]}, {"redaction": policy}):
        plain = await _log([_plain("k", i) for i in items] + [_plain("j", 1)], **kwargs)
        fast = await _log([_fast("k", i) for i in items] + [_fast("j", 1)], **kwargs)
        assert fast == plain
