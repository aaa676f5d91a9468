"""The narrative rendered from the log, the live NarrativeRecorder, and the causal slice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentfootprint import ConfigurationError, StageError
from agentfootprint.flow import Chart, NarrativeRecorder, causal_chain, flow_chart, pause
from agentfootprint.flow._causal import format_causal_chain


def noop(scope: Any) -> None:
    return None


def inc(scope: Any) -> None:
    scope["n"] = scope.get("n", 0) + 1


def _loop_chart(description: str | None = None) -> Chart:
    return (
        flow_chart("Inc", inc, description=description)
        .decide("Check", lambda s: "again" if s["n"] < 3 else "done")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .build()
    )


def _subflow_chart() -> Chart:
    inner = flow_chart("Answer", lambda s: s.__setitem__("ans", s["q"] * 2)).build()
    return (
        flow_chart("Ask", lambda s: s.__setitem__("q", 21))
        .subflow("sf", inner, name="Solver", input=lambda v: {"q": v["q"]},
                 output=lambda v: {"answer": v["ans"]})
        .then("Final", lambda s: s["answer"])
        .build()
    )


# -- narrative --------------------------------------------------------------------------------


async def test_narrative_of_a_loop_names_each_pass() -> None:
    """Revisited stages read 'Looped back to <name> (pass k).' with a growing k."""
    run = await _loop_chart().run()
    lines = run.narrative().splitlines()
    assert lines[0] == "Stage 1: The process began with Inc."
    assert "Stage 4: Looped back to Inc (pass 1)." in lines
    assert "Stage 7: Looped back to Inc (pass 2)." in lines
    assert "Stage 8: Looped back to Check (pass 2)." in lines
    assert lines[-1] == "Stage 9: Next, it moved on to Done."


async def test_narrative_of_a_loop_uses_the_description() -> None:
    """With a description, a revisit reads 'Looped back: <description> (pass k).'."""
    run = await _loop_chart("Count one more").run()
    lines = run.narrative().splitlines()
    assert lines[0] == "Stage 1: The process began: Count one more."
    assert "Stage 7: Looped back: Count one more (pass 2)." in lines


async def test_narrative_steps_show_reads_and_writes_with_values() -> None:
    """Each stage lists its reads (values rebuilt from the log) and writes as numbered steps."""
    chart = flow_chart("A", lambda s: s.__setitem__("x", "hi")).then(
        "B", lambda s: s.__setitem__("y", [s["x"], s["x"]])
    ).then("C", lambda s: s.__delitem__("x")).build()
    run = await chart.run()
    assert run.narrative().splitlines() == [
        "Stage 1: The process began with A.",
        '  Step 1: Write x = "hi"',
        "Stage 2: Next, it moved on to B.",
        '  Step 1: Read x = "hi"',
        "  Step 2: Write y = (2 items)",
        "Stage 3: Next, it moved on to C.",
        "  Step 1: Delete x",
    ]


async def test_narrative_of_a_subflow_has_entry_input_and_exit_lines() -> None:
    """A subflow reads 'Entering the <name> subflow.', one Input line per key, then Exiting."""
    run = await _subflow_chart().run()
    lines = run.narrative().splitlines()
    enter = lines.index("Entering the Solver subflow.")
    assert lines[enter + 1] == "  Input: q = 21"
    assert lines[enter + 2] == "Stage 1: The process began with Answer."
    assert "Exiting the Solver subflow." in lines
    assert lines.index("Exiting the Solver subflow.") > enter
    assert lines[-2:] == ["Stage 2: Next, it moved on to Final.", "  Step 1: Read answer = 42"]


async def test_narrative_inside_a_subflow_shows_input_values() -> None:
    """A read of a mapped input inside the subflow shows its value, not 'undefined'."""
    run = await _subflow_chart().run()
    lines = run.narrative().splitlines()
    inner = lines.index("Stage 1: The process began with Answer.")
    assert lines[inner + 1] == "  Step 1: Read q = 21"


async def test_narrative_subflow_entry_uses_the_description() -> None:
    """A described mount reads 'Entering <name>: <description>.'."""
    inner = flow_chart("Work", noop).build()
    chart = flow_chart("A", noop).subflow("sf", inner, name="Helper",
                                          description="Do the helping").build()
    run = await chart.run()
    assert "Entering Helper: Do the helping." in run.narrative().splitlines()


async def test_narrative_error_line() -> None:
    """A failing stage reads '[Error]: An error occurred at <name>: <Type>: <message>.'."""
    chart = flow_chart("A", noop).then("Bad", lambda s: 1 / 0).build()
    with pytest.raises(StageError) as err:
        await chart.run()
    lines = err.value.run.narrative().splitlines()
    assert lines[-1] == "[Error]: An error occurred at Bad: ZeroDivisionError: division by zero."


async def test_narrative_break_line() -> None:
    """A break reads 'Execution stopped at <name> (<reason>).' (no parentheses without one)."""
    run = await flow_chart("Stop", lambda s: s.break_("enough")).build().run()
    assert run.narrative().splitlines()[-1] == "Execution stopped at Stop (enough)."
    run = await flow_chart("Stop", lambda s: s.break_()).build().run()
    assert run.narrative().splitlines()[-1] == "Execution stopped at Stop."


async def test_narrative_pause_line() -> None:
    """A pause reads 'Execution paused at <name>.'."""
    chart = flow_chart("Ask", lambda s: pause({"q": "?"}), resume=noop).then("B", noop).build()
    run = await chart.run()
    assert run.paused
    assert run.narrative().splitlines()[-1] == "Execution paused at Ask."


async def test_narrative_emit_and_fork_lines() -> None:
    """Emits render as '[emit] name: payload'; a fork as '[Parallel]: Forking into ...'."""
    chart = flow_chart("Fork", lambda s: s.emit("app.note", "hello")).parallel(
        ("Left", noop), ("Right", noop)
    ).build()
    lines = (await chart.run()).narrative().splitlines()
    assert lines[:3] == [
        "Stage 1: The process began with Fork.",
        '  [emit] app.note: "hello"',
        "[Parallel]: Forking into 2 parallel paths: Left, Right.",
    ]


async def test_narrative_recorder_live_entries_equal_rendered_entries() -> None:
    """NarrativeRecorder's live entries equal run.narrative_entries() (loops, subflow, fork)."""

    async def child(scope: Any) -> None:
        await asyncio.sleep(0)
        scope["child"] = True

    inner = flow_chart("Inner", lambda s: s.__setitem__("inner", s["n"])).build()
    chart = (
        flow_chart("Inc", inc)
        .decide("Check", rules=[{"when": {"n": {"gte": 3}}, "then": "done", "label": "Done"}],
                default="again")
        .branch("again", "Again", noop, loop_to="Inc")
        .branch("done", "Done", noop)
        .end()
        .subflow("sf", inner, input=lambda v: {"n": v["n"]},
                 output=lambda v: {"out": v["inner"]})
        .then("Fork", noop)
        .parallel(("Left", child), ("Right", noop))
        .then("Stop", lambda s: s.break_("end"))
        .build()
    )
    live = NarrativeRecorder(chart)
    run = await chart.run(recorders=[live])
    assert live.entries == run.narrative_entries()
    assert live.text() == run.narrative()
    assert len(live.entries) > 20


async def test_narrative_recorder_matches_a_run_seeded_with_state() -> None:
    """Live narrative shows seeded state values exactly like the rendered narrative."""
    chart = flow_chart("A", lambda s: s["seed"] + 1).build()
    live = NarrativeRecorder(chart)
    run = await chart.run(state={"seed": 41}, recorders=[live])
    assert "  Step 1: Read seed = 41" in run.narrative().splitlines()
    assert live.entries == run.narrative_entries()


async def test_narrative_entries_carry_step_identity() -> None:
    """Each narrative entry names its runtime id, stage id, kind and depth."""
    run = await flow_chart("A", lambda s: s.__setitem__("x", 1)).build().run()
    header, step = run.narrative_entries()
    assert (header.kind, header.depth, header.runtime_stage_id, header.stage_id) == (
        "stage", 0, "A#0", "A",
    )
    assert (step.kind, step.depth, step.text) == ("step", 1, "Step 1: Write x = 1")


# -- causal slice -----------------------------------------------------------------------------


def _overwrites_chart() -> Chart:
    return (
        flow_chart("First", lambda s: s.__setitem__("x", 1))
        .then("Second", lambda s: s.__setitem__("x", 2))
        .then("Use", lambda s: s.__setitem__("y", s["x"] + s["seed"]))
        .then("Third", lambda s: s.__setitem__("x", 3))
        .then("Last", lambda s: s["y"])
        .build()
    )


async def test_causal_chain_picks_the_last_writer_before_the_step() -> None:
    """A read links to the last record that wrote the key before the step, not earlier or later."""
    run = await _overwrites_chart().run(state={"seed": 0})
    chain = causal_chain(run, "Use")
    assert chain.root.runtime_stage_id == "Use#2"
    assert [(e.kind, e.key, e.node.runtime_stage_id) for e in chain.root.causes] == [
        ("data", "x", "Second#1"),
    ]
    assert [n.runtime_stage_id for n in chain.nodes] == ["Use#2", "Second#1"]
    assert chain.initial_reads == {"Use#2": ["seed"]}
    assert not chain.truncated


async def test_causal_chain_follows_edges_transitively() -> None:
    """The slice walks read→write edges back through several steps."""
    run = await _overwrites_chart().run(state={"seed": 0})
    chain = causal_chain(run, "Last")
    assert [(n.runtime_stage_id, n.depth, n.linked_by) for n in chain.nodes] == [
        ("Last#4", 0, None), ("Use#2", 1, "y"), ("Second#1", 2, "x"),
    ]
    assert chain.nodes[1].keys_written == ["y"]


async def test_causal_chain_accepts_ids_names_and_logs() -> None:
    """from_stage may be a runtime id, a stage id or a name; the source may be a CommitLog."""
    run = await _overwrites_chart().run(state={"seed": 0})
    for ref in ("Use#2", "Use"):
        assert causal_chain(run, ref).root.runtime_stage_id == "Use#2"
    assert causal_chain(run.log, "Use").root.runtime_stage_id == "Use#2"


async def test_causal_chain_has_control_edges_to_the_decider() -> None:
    """A branch's first step links to the decider that chose it, labelled by the matched rule."""
    chart = (
        flow_chart("Receive", lambda s: s.__setitem__("score", 580))
        .decide("Route", rules=[
            {"when": {"score": {"lt": 620}}, "then": "reject", "label": "Low credit"},
        ], default="approve")
        .branch("reject", "Reject", noop)
        .branch("approve", "Approve", noop)
        .end()
        .build()
    )
    run = await chart.run()
    chain = causal_chain(run, "reject")
    (edge,) = chain.root.causes
    assert (edge.kind, edge.key, edge.node.runtime_stage_id) == ("control", "Low credit", "Route#1")
    assert [(e.kind, e.key, e.node.runtime_stage_id) for e in edge.node.causes] == [
        ("data", "score", "Receive#0"),
    ]
    assert causal_chain(run, "reject", control=False).root.causes == []


async def test_causal_chain_control_edge_without_label() -> None:
    """Without a matched label the control edge is named 'chose <branch>'."""
    chart = flow_chart("Start", noop).decide("Route", lambda s: "a").branch(
        "a", "A", noop
    ).end().build()
    run = await chart.run()
    (edge,) = causal_chain(run, "a").root.causes
    assert (edge.kind, edge.key) == ("control", "chose a")


async def test_causal_chain_crosses_subflow_boundaries() -> None:
    """The slice goes through the exit record, the inner steps and the enter record."""
    run = await _subflow_chart().run()
    chain = causal_chain(run, "Final")
    assert [(n.runtime_stage_id, n.record.kind, n.linked_by) for n in chain.nodes] == [
        ("Final#3", "stage", None),
        ("sf#1", "subflow-exit", "answer"),
        ("sf/Answer#2", "stage", "ans"),
        ("sf#1", "subflow-enter", "q"),
        ("Ask#0", "stage", "q"),
    ]


async def test_causal_chain_links_a_join_to_both_parallel_children() -> None:
    """A join that reads what two parallel children wrote links to both of them."""
    chart = (
        flow_chart("Fork", noop)
        .parallel(("Left", lambda s: s.__setitem__("left", 1)),
                  ("Right", lambda s: s.__setitem__("right", 2)))
        .then("Join", lambda s: s["left"] + s["right"])
        .build()
    )
    run = await chart.run()
    chain = causal_chain(run, "Join")
    assert [(e.key, e.node.record.stage_id) for e in chain.root.causes] == [
        ("left", "Left"), ("right", "Right"),
    ]


async def test_causal_chain_format() -> None:
    """format_causal_chain prints each step, the key linking it and what it wrote, indented."""
    run = await _subflow_chart().run()
    text = format_causal_chain(causal_chain(run, "Final"))
    assert text.splitlines() == [
        "Final (Final#3)",
        "  Solver (sf#1) ← via answer [wrote: answer]",
        "    Answer (sf/Answer#2) ← via ans [wrote: ans]",
        "      Solver (sf#1) ← via q [wrote: q]",
        "        Ask (Ask#0) ← via q [wrote: q]",
    ]
    assert str(causal_chain(run, "Final")) == text


def _relay_chart(length: int) -> Chart:
    builder = flow_chart("s0", lambda s: s.__setitem__("k0", 0))
    for i in range(1, length):
        builder.then(f"s{i}", lambda s, i=i: s.__setitem__(f"k{i}", s[f"k{i - 1}"] + 1))
    return builder.build()


async def test_causal_chain_max_depth_truncates_and_says_so() -> None:
    """max_depth bounds the walk, sets truncated_by_depth, and the formatter warns."""
    run = await _relay_chart(10).run()
    chain = causal_chain(run, "s9", max_depth=3)
    assert [n.runtime_stage_id for n in chain.nodes] == ["s9#9", "s8#8", "s7#7", "s6#6"]
    assert chain.truncated_by_depth
    assert not chain.truncated_by_nodes
    assert chain.truncated
    assert format_causal_chain(chain).splitlines()[-1] == (
        "⚠ slice truncated (max_depth reached) — older causes exist beyond this horizon"
    )
    full = causal_chain(run, "s9")
    assert len(full.nodes) == 10
    assert not full.truncated
    assert "⚠" not in format_causal_chain(full)


async def test_causal_chain_max_nodes_truncates_and_says_so() -> None:
    """max_nodes bounds the slice size, sets truncated_by_nodes, and the formatter warns."""
    run = await _relay_chart(10).run()
    chain = causal_chain(run, "s9", max_nodes=2)
    assert len(chain.nodes) == 2
    assert chain.truncated_by_nodes
    assert not chain.truncated_by_depth
    assert "⚠ slice truncated (max_nodes reached)" in format_causal_chain(chain)


async def test_causal_chain_unknown_stage_is_a_configuration_error() -> None:
    """Asking about a step that did not run raises ConfigurationError naming it."""
    run = await _relay_chart(2).run()
    with pytest.raises(ConfigurationError, match="no step 'nope'"):
        causal_chain(run, "nope")


async def test_causal_chain_shared_cause_is_printed_once() -> None:
    """A step reached by two edges appears once in nodes; the formatter says 'see above'."""
    chart = (
        flow_chart("Src", lambda s: (s.__setitem__("a", 1), s.__setitem__("b", 2)))
        .then("Use", lambda s: s["a"] + s["b"])
        .build()
    )
    run = await chart.run()
    chain = causal_chain(run, "Use")
    assert [n.runtime_stage_id for n in chain.nodes] == ["Use#1", "Src#0"]
    assert [e.key for e in chain.root.causes] == ["a", "b"]
    assert format_causal_chain(chain).splitlines() == [
        "Use (Use#1)",
        "  Src (Src#0) ← via a [wrote: a, b]",
        "  ↳ Src#0 (see above)",
    ]
