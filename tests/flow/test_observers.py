"""Observers: isolation of failing recorders, replacement by id, deferred delivery, clear()."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from event_capture import Events

from agentfootprint import ConfigurationError, FlowTimeoutError, StageError
from agentfootprint.flow import Chart, FlowEvent, NarrativeRecorder, deferred, flow_chart, pause
from agentfootprint.flow._recorders import Deferred, ObserverFailure


def noop(scope: Any) -> None:
    return None


def _busy_chart() -> Chart:
    """A chart exercising reads, writes, emits, a decider, a loop, a subflow and a fork."""

    def inc(scope: Any) -> None:
        scope["n"] = scope.get("n", 0) + 1
        scope.emit("tick", scope["n"])

    async def child(scope: Any) -> None:
        await asyncio.sleep(0)
        scope["child"] = True

    inner = flow_chart("Inner", lambda s: s.__setitem__("inner", s["n"])).build()
    return (
        flow_chart("Inc", inc)
        .decide("Check", lambda s: "again" if s["n"] < 3 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .subflow("sf", inner, input=lambda v: {"n": v["n"]}, output=lambda v: {"out": v["inner"]})
        .then("Fork", noop)
        .parallel(("Left", child), ("Right", noop))
        .then("Join", lambda s: s["out"])
        .build()
    )


# -- isolation and attach rules ---------------------------------------------------------------


async def test_throwing_recorder_never_breaks_the_run() -> None:
    """A recorder that raises is isolated: the run finishes and the failure is listed."""

    class Broken:
        id = "broken"

        def on_stage_start(self, event: FlowEvent) -> None:
            raise RuntimeError("recorder bug")

        def on_commit(self, event: FlowEvent) -> None:
            raise KeyError("also broken")

    healthy = Events()
    run = await flow_chart("A", noop).then("B", lambda s: "ok").build().run(
        recorders=[Broken(), healthy]
    )
    assert run.status == "done"
    assert run.output == "ok"
    assert healthy.names().count("stage_start") == 2
    assert run.observer_errors[:2] == [
        ObserverFailure("broken", "stage_start", "RuntimeError: recorder bug"),
        ObserverFailure("broken", "commit", "KeyError: 'also broken'"),
    ]
    assert len(run.observer_errors) == 4


async def test_throwing_deferred_recorder_is_listed_too() -> None:
    """A deferred recorder that raises is isolated and listed in run.observer_errors."""

    class Broken:
        id = "late"

        def on_run_end(self, event: FlowEvent) -> None:
            raise ValueError("late bug")

    run = await flow_chart("A", noop).build().run(recorders=[deferred(Broken())])
    assert run.observer_errors == [ObserverFailure("late", "run_end", "ValueError: late bug")]


async def test_recorder_with_the_same_id_is_replaced() -> None:
    """Attaching a second recorder with an id already attached replaces the first one."""
    first, second, other = Events("dup"), Events("dup"), Events("other")
    await flow_chart("A", noop).build().run(recorders=[first, other, second])
    assert first.events == []
    assert second.names()[0] == "run_start"
    assert second.events == other.events


async def test_recorders_without_id_are_told_apart_by_class() -> None:
    """A recorder without an id uses its class name; different classes are both kept."""

    class One:
        def __init__(self) -> None:
            self.seen = 0

        def on_stage_start(self, event: FlowEvent) -> None:
            self.seen += 1

    class Two(One):
        pass

    one, two = One(), Two()
    await flow_chart("A", noop).build().run(recorders=[one, two])
    assert (one.seen, two.seen) == (1, 1)


async def test_clear_is_called_at_run_start() -> None:
    """A recorder's clear() runs when a run starts, so reusing it keeps one run's events."""
    calls: list[str] = []

    class Clearing(Events):
        def clear(self) -> None:
            calls.append("clear")
            self.events.clear()

    rec = Clearing()
    chart = flow_chart("A", noop).build()
    first = await chart.run(recorders=[rec])
    second = await chart.run(recorders=[rec])
    assert calls == ["clear", "clear"]
    assert {e.run_id for e in rec.events} == {second.run_id}
    assert first.run_id != second.run_id


async def test_narrative_recorder_is_cleared_between_runs() -> None:
    """A reused NarrativeRecorder holds only the latest run's entries."""
    chart = flow_chart("A", noop).then("B", noop).build()
    rec = NarrativeRecorder(chart)
    await chart.run(recorders=[rec])
    run = await chart.run(recorders=[rec])
    assert rec.entries == run.narrative_entries()


# -- deferred delivery ------------------------------------------------------------------------


async def test_deferred_delivers_the_same_events_in_the_same_order() -> None:
    """deferred(rec) sees exactly the inline recorder's events, in the same order."""
    inline, later = Events("inline"), Events("later")
    run = await _busy_chart().run(recorders=[inline, deferred(later)])
    assert run.status == "done"
    assert len(inline.events) > 50
    assert later.events == inline.events
    assert {"loop", "decision", "subflow_entry", "subflow_exit", "fork", "emit"} <= set(
        inline.names()
    )


async def test_deferred_delivery_is_off_the_hot_path() -> None:
    """A deferred recorder has not been called while the (synchronous) stages run."""
    later = Events("later")
    during: list[int] = []

    def look(scope: Any) -> None:
        scope["x"] = 1
        during.append(len(later.events))

    run = await flow_chart("A", look).then("B", look).build().run(recorders=[deferred(later)])
    assert during == [0, 0]
    assert later.names()[-1] == "run_end"
    assert run.observer_stats["later"]["depth"] == 0


async def test_deferred_is_flushed_before_run_returns() -> None:
    """Every queued event is delivered by the time run() returns."""
    inline, later = Events("inline"), Events("later")
    wrapper = deferred(later)
    await flow_chart("A", noop).then("B", noop).build().run(recorders=[inline, wrapper])
    assert later.events == inline.events
    assert wrapper.stats()["depth"] == 0


async def test_deferred_is_flushed_at_pause() -> None:
    """A paused run returns with every event (pause included) delivered."""
    inline, later = Events("inline"), Events("later")
    chart = flow_chart("Ask", lambda s: pause({"q": "ok?"}), resume=noop).then("B", noop).build()
    run = await chart.run(recorders=[inline, deferred(later)])
    assert run.paused
    assert later.names()[-2:] == ["commit", "pause"]
    assert later.events == inline.events


async def test_deferred_is_flushed_when_the_run_fails() -> None:
    """A failing run delivers every event (error and run_failed included) before it raises."""
    inline, later = Events("inline"), Events("later")
    chart = flow_chart("A", noop).then("Bad", lambda s: 1 / 0).build()
    with pytest.raises(StageError):
        await chart.run(recorders=[inline, deferred(later)])
    assert later.names()[-2:] == ["error", "run_failed"]
    assert later.events == inline.events


async def test_deferred_is_flushed_when_the_run_times_out() -> None:
    """A run that times out delivers every event, run_failed included, before it raises."""
    inline, later = Events("inline"), Events("later")

    async def slow(scope: Any) -> None:
        scope["x"] = 1
        await asyncio.sleep(5)

    chart = flow_chart("A", noop).then("Slow", slow).build()
    with pytest.raises(FlowTimeoutError):
        await chart.run(timeout=0.05, recorders=[inline, deferred(later)])
    assert inline.names()[-1] == "run_failed"
    assert later.events == inline.events


async def test_drop_oldest_keeps_the_newest_and_counts_drops() -> None:
    """overflow='drop_oldest' with a small queue keeps the newest events and counts the rest."""
    inline, later = Events("inline"), Events("later")
    builder = flow_chart("s0", lambda s: s.__setitem__("x", 0))
    for i in range(1, 10):
        builder.then(f"s{i}", lambda s: s.__setitem__("x", s["x"] + 1))
    run = await builder.build().run(recorders=[inline, deferred(later, max_queue=3)])
    stats = run.observer_stats["later"]
    total = len(inline.events)
    assert stats["queued"] == total
    assert stats["dropped"] == total - 3
    assert stats["delivered"] == 3
    assert later.events == inline.events[-3:]


async def test_block_policy_loses_nothing() -> None:
    """overflow='block' delivers the backlog inline when full, so nothing is lost."""
    inline, later = Events("inline"), Events("later")
    run = await _busy_chart().run(
        recorders=[inline, deferred(later, max_queue=2, overflow="block")]
    )
    stats = run.observer_stats["later"]
    assert later.events == inline.events
    assert stats["dropped"] == 0
    assert stats["inline_flushes"] > 0
    assert stats["delivered"] == len(inline.events)


async def test_observer_stats_per_deferred_observer() -> None:
    """run.observer_stats has one entry per deferred observer, keyed by its id."""
    a, b = Events("a"), Events("b")
    run = await flow_chart("A", noop).build().run(
        recorders=[deferred(a), deferred(b), Events("inline")]
    )
    assert set(run.observer_stats) == {"a", "b"}
    stats = run.observer_stats["a"]
    assert set(stats) == {
        "queued", "delivered", "dropped", "flushes", "inline_flushes", "depth", "failures",
    }
    assert stats["queued"] == stats["delivered"] == len(a.events) > 0
    assert stats["dropped"] == stats["failures"] == stats["depth"] == 0
    assert stats["flushes"] >= 1


async def test_deferred_only_queues_hooks_the_recorder_has() -> None:
    """A deferred recorder with one hook only queues that event."""

    class OnlyCommits:
        id = "commits"

        def __init__(self) -> None:
            self.records: list[Any] = []

        def on_commit(self, event: FlowEvent) -> None:
            self.records.append(event.value)

    rec = OnlyCommits()
    run = await flow_chart("A", noop).then("B", noop).build().run(recorders=[deferred(rec)])
    assert rec.records == run.records
    assert run.observer_stats["commits"]["queued"] == 2


def test_deferred_options_are_validated() -> None:
    """deferred() refuses a non-positive max_queue and an unknown overflow policy."""
    with pytest.raises(ConfigurationError, match="max_queue=0"):
        deferred(Events(), max_queue=0)
    with pytest.raises(ConfigurationError, match="overflow='spill'"):
        deferred(Events(), overflow="spill")  # type: ignore[arg-type]
    assert isinstance(deferred(Events()), Deferred)
