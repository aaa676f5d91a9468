"""Pause and resume: checkpoints that cross process boundaries, and the errors around them."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from resume_chart import ANSWERS, build_chart

from agentfootprint.errors import CheckpointError, StageError
from agentfootprint.flow import Checkpoint, FlowRun, flow_chart, pause
from agentfootprint.flow._checkpoint import load_checkpoint
from agentfootprint.flow._commitlog import CommitLog

HERE = Path(__file__).resolve().parent
ARGS = {"items": [3, 4]}

RESUME_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from resume_chart import build_chart

    with open(sys.argv[1], encoding="utf-8") as handle:
        text = handle.read()
    run = build_chart().resume_sync(text, json.loads(sys.argv[2]))
    print(json.dumps({
        "status": run.status,
        "run_id": run.run_id,
        "output": run.output,
        "state": run.state,
        "log": run.log.to_json(),
        "checkpoint": run.checkpoint.to_json() if run.checkpoint is not None else None,
    }))
    """
)


def _resume_in_fresh_process(tmp_path: Path, checkpoint_json: str, answer: Any, n: int) -> dict:
    """Write the checkpoint to a file and resume it in a new interpreter; return its report."""
    path = tmp_path / f"checkpoint-{n}.json"
    path.write_text(checkpoint_json, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), env.get("PYTHONPATH", "")) if p
    )
    done = subprocess.run(
        [sys.executable, "-c", RESUME_SCRIPT, str(path), json.dumps(answer)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _plain(value: Any) -> Any:
    """The value as it looks after a trip through JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def _rid_number(rid: str) -> int:
    match = re.fullmatch(r".+#(\d+)", rid)
    assert match, rid
    return int(match.group(1))


def _stamped(records: list[dict]) -> list[dict]:
    """Records that took a fresh runtime id (a subflow's exit reuses its enter's id)."""
    return [r for r in records if r["kind"] != "subflow-exit"]


async def _run_in_process(run_id: str) -> tuple[FlowRun, list[Checkpoint]]:
    chart = build_chart()
    run = await chart.run(ARGS, run_id=run_id)
    checkpoints = []
    for answer in ANSWERS:
        assert run.paused and run.checkpoint is not None
        checkpoints.append(run.checkpoint)
        run = await chart.resume(run.checkpoint, answer)
    return run, checkpoints


# -- the acceptance test -----------------------------------------------------------------------


async def test_resume_in_fresh_process_matches_in_process(tmp_path: Path) -> None:
    """Three pauses (top level, decider-with-next branch, inside a subflow loop) resumed each in
    a fresh interpreter give the same log, state, output and run id as resuming in-process."""
    first = await build_chart().run(ARGS)
    assert first.paused and first.checkpoint is not None
    run_id = first.run_id
    reference, ref_checkpoints = await _run_in_process(run_id)
    assert reference.status == "done"
    text = first.checkpoint.to_json()
    counters = [first.checkpoint.counter]
    reports = []
    for n, answer in enumerate(ANSWERS):
        report = _resume_in_fresh_process(tmp_path, text, answer, n)
        reports.append(report)
        assert report["run_id"] == run_id
        if n < len(ANSWERS) - 1:
            assert report["status"] == "paused"
            text = report["checkpoint"]
            counters.append(json.loads(text)["counter"])
        else:
            assert report["status"] == "done"
            assert report["checkpoint"] is None
    final = reports[-1]

    # the paused stages are the three kinds of nesting the chart was built for
    assert [cp.paused_stage for cp in ref_checkpoints] == ["review", "manual", "contract/sign"]
    assert [[f.kind for f in cp.frames] for cp in ref_checkpoints] == [[], ["after"], ["subflow"]]

    # same log, record for record, and on the fields that matter most
    got = final["log"]["records"]
    want = _plain(reference.log.to_json())["records"]
    assert [r["runtime_stage_id"] for r in got] == [r["runtime_stage_id"] for r in want]
    assert [r["kind"] for r in got] == [r["kind"] for r in want]
    assert [r["changes"] for r in got] == [r["changes"] for r in want]
    assert [r["reads"] for r in got] == [r["reads"] for r in want]
    assert final["log"] == _plain(reference.log.to_json())

    # same final state and output; the run keeps its identity
    assert final["state"] == _plain(reference.state)
    assert final["output"] == reference.output == "ok"
    assert all(r["run_id"] == run_id for r in reports)
    assert reference.run_id == run_id

    # the log explains the state: replaying it gives the final state
    replayed = CommitLog.from_json(final["log"])
    assert _plain(replayed.state_at(len(replayed) - 1)) == final["state"]

    # runtime ids climb past each checkpoint's counter, never reused
    numbers = [_rid_number(r["runtime_stage_id"]) for r in _stamped(got)]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == len(numbers)
    assert counters == sorted(counters) and len(set(counters)) == len(counters)
    for n, counter in enumerate(counters):
        before = len(_plain(ref_checkpoints[n].log)["records"])
        after = _stamped(got[before:])
        assert after, f"nothing ran after checkpoint {n}"
        assert all(_rid_number(r["runtime_stage_id"]) >= counter for r in after)
        assert after[0]["kind"] == "resume"

    # the three answers landed where the chart uses them
    assert final["state"]["reviewer"] == "ana"
    assert final["state"]["amount"] == 63
    assert final["state"]["signature"] == "ana-sig"
    assert final["state"]["history"] == [
        "intake", "accumulated", "reviewed by ana", "manual checked", "routed manual", "finished",
    ]


async def test_resumed_run_keeps_run_id_and_records_the_resume_step() -> None:
    """A resume adds a ``resume`` record for the paused stage whose parent is the paused step."""
    chart = build_chart()
    run = await chart.run(ARGS, run_id="fixed-run-id")
    assert run.checkpoint is not None
    cp = run.checkpoint
    resumed = await chart.resume(cp.to_json(), ANSWERS[0])
    assert resumed.run_id == "fixed-run-id"
    record = resumed.records[len(cp.log["records"])]
    assert record.kind == "resume"
    assert record.stage_id == cp.paused_stage
    assert record.parent == cp.paused_runtime_stage_id
    assert record.runtime_stage_id != cp.paused_runtime_stage_id
    paused_record = resumed.records[len(cp.log["records"]) - 1]
    assert paused_record.paused and paused_record.runtime_stage_id == cp.paused_runtime_stage_id


async def test_resuming_one_checkpoint_twice_gives_the_same_run() -> None:
    """A checkpoint is not consumed or altered by resuming it: two resumes give equal runs."""
    chart = build_chart()
    run = await chart.run(ARGS)
    assert run.checkpoint is not None
    run = await chart.resume(run.checkpoint, ANSWERS[0])
    assert run.checkpoint is not None
    cp = run.checkpoint
    before = cp.to_json()
    one = await chart.resume(cp, ANSWERS[1])
    two = await chart.resume(cp, ANSWERS[1])
    assert cp.to_json() == before
    assert _plain(one.log.to_json()) == _plain(two.log.to_json())
    assert one.checkpoint is not None and two.checkpoint is not None
    assert one.checkpoint.counter == two.checkpoint.counter
    assert _plain(one.state) == _plain(two.state)


# -- ids and visit counts ------------------------------------------------------------------


def _asking_loop() -> Any:
    """start -> ask (pausable) -> work -> more? (again: back to ask | stop)."""

    def start(scope: Any) -> None:
        scope["answers"] = []
        scope["n"] = 0

    def ask(scope: Any) -> Any:
        return pause({"n": scope["n"]})

    def got(scope: Any, answer: Any) -> None:
        scope["answers"] = [*scope["answers"], answer]

    def work(scope: Any) -> None:
        scope["n"] = scope["n"] + 1

    def more(scope: Any) -> str:
        return "again" if scope["n"] < 3 else "stop"

    return (
        flow_chart("Start", start, id="start")
        .then("Ask", ask, id="ask", resume=got)
        .then("Work", work, id="work")
        .decide("More?", more, id="more")
        .branch("again", "Again", lambda scope: None, loop_to="ask")
        .branch("stop", "Stop", lambda scope: None)
        .end()
        .build()
    )


def test_ids_climb_and_visit_counts_continue_across_resumes() -> None:
    """Across several resumes runtime ids stay unique and increasing, checkpoint counters grow,
    and each record's loop_pass counts the earlier visits of its stage in the whole run."""
    chart = _asking_loop()
    run = chart.run_sync()
    checkpoints = []
    answer = 0
    while run.paused:
        assert run.checkpoint is not None
        checkpoints.append(run.checkpoint)
        answer += 1
        run = chart.resume_sync(run.checkpoint.to_json(), f"a{answer}")
    assert run.status == "done"
    assert len(checkpoints) == 3
    assert run.state == {"answers": ["a1", "a2", "a3"], "n": 3}

    numbers = [_rid_number(r.runtime_stage_id) for r in run.records]
    assert numbers == list(range(len(run.records)))
    counters = [cp.counter for cp in checkpoints]
    assert counters == sorted(counters) and len(set(counters)) == 3
    for cp in checkpoints:
        resumed = run.records[len(cp.log["records"])]
        assert resumed.kind == "resume"
        assert _rid_number(resumed.runtime_stage_id) >= cp.counter

    seen: dict[str, int] = {}
    for record in run.records:
        assert record.loop_pass == seen.get(record.stage_id, 0), record.runtime_stage_id
        seen[record.stage_id] = seen.get(record.stage_id, 0) + 1
    assert checkpoints[-1].visits["work"] == 2
    assert [cp.visits["ask"] for cp in checkpoints] == [1, 3, 5]


# -- checkpoint validation -----------------------------------------------------------------


@pytest.fixture
def paused_at_manual() -> tuple[Any, Checkpoint]:
    """The approval chart paused at the decider branch (a checkpoint with one frame)."""
    chart = build_chart()
    run = chart.run_sync(ARGS)
    assert run.checkpoint is not None
    run = chart.resume_sync(run.checkpoint, ANSWERS[0])
    assert run.checkpoint is not None and run.checkpoint.frames
    return chart, run.checkpoint


def test_checkpoint_is_plain_json(paused_at_manual: tuple[Any, Checkpoint]) -> None:
    """``to_json()`` is standard JSON text; its parsed dict and the text itself both resume."""
    chart, cp = paused_at_manual
    text = cp.to_json()
    data = json.loads(text)
    assert isinstance(data, dict)
    assert data["version"] == 1
    assert data["paused_stage"] == "manual"
    assert data["pause_data"] == {"question": "manual check", "amount": 70}
    assert [(f["kind"], f["node"], f["rid"]) for f in data["frames"]] == [
        ("after", "route", "route#5")
    ]
    assert load_checkpoint(text) == load_checkpoint(data) == cp
    from_text = chart.resume_sync(text, ANSWERS[1])
    from_dict = chart.resume_sync(data, ANSWERS[1])
    assert _plain(from_text.log.to_json()) == _plain(from_dict.log.to_json())


def test_checkpoint_of_wrong_version_is_refused(paused_at_manual: tuple[Any, Checkpoint]) -> None:
    """A checkpoint from another format version is refused with the version in the message."""
    chart, cp = paused_at_manual
    data = json.loads(cp.to_json())
    data["version"] = 99
    with pytest.raises(CheckpointError, match=r"version 99 is not supported \(expected 1\)"):
        chart.resume_sync(json.dumps(data), ANSWERS[1])
    del data["version"]
    with pytest.raises(CheckpointError, match="version None is not supported"):
        load_checkpoint(data)


def test_truncated_checkpoint_is_refused(paused_at_manual: tuple[Any, Checkpoint]) -> None:
    """Truncated checkpoint text fails as invalid JSON and says where good text comes from."""
    chart, cp = paused_at_manual
    text = cp.to_json()
    with pytest.raises(CheckpointError, match=r"not valid JSON.*checkpoint\.to_json\(\)"):
        chart.resume_sync(text[: len(text) // 2], ANSWERS[1])
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(b"")


@pytest.mark.parametrize(
    ("path", "bad", "where"),
    [
        (("counter",), "many", "counter"),
        (("state",), ["not", "a", "dict"], "state"),
        (("frames", 0, "kind"), "sideways", "frames.0.kind"),
        (("run_id",), None, "run_id"),
        (("unexpected",), 1, "unexpected"),
    ],
)
def test_checkpoint_field_of_wrong_type_is_refused(
    paused_at_manual: tuple[Any, Checkpoint], path: tuple[Any, ...], bad: Any, where: str
) -> None:
    """A checkpoint field of the wrong type (or an unknown field) names the field."""
    chart, cp = paused_at_manual
    data = json.loads(cp.to_json())
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = bad
    with pytest.raises(CheckpointError, match=rf"checkpoint field '{re.escape(where)}' is invalid"):
        chart.resume_sync(json.dumps(data), ANSWERS[1])


def test_checkpoint_with_missing_field_is_refused(
    paused_at_manual: tuple[Any, Checkpoint],
) -> None:
    """A checkpoint missing a required field names it."""
    _, cp = paused_at_manual
    data = json.loads(cp.to_json())
    del data["paused_stage"]
    with pytest.raises(CheckpointError, match="checkpoint field 'paused_stage' is invalid"):
        load_checkpoint(data)


def test_checkpoint_from_a_different_chart_is_refused(
    paused_at_manual: tuple[Any, Checkpoint],
) -> None:
    """Resuming with a chart of another shape fails on the fingerprint, naming both."""
    _, cp = paused_at_manual
    other = (
        flow_chart("Intake", lambda scope: None, id="intake")
        .then("Manual check", lambda scope: pause(), id="manual", resume=lambda s, a: None)
        .build()
    )
    assert other.fingerprint() != cp.fingerprint
    with pytest.raises(CheckpointError, match=rf"different chart.*{cp.fingerprint}"):
        other.resume_sync(cp.to_json(), ANSWERS[1])


def test_checkpoint_naming_an_unknown_stage_is_refused(
    paused_at_manual: tuple[Any, Checkpoint],
) -> None:
    """A checkpoint whose paused stage the chart lacks is refused even with a matching print."""
    chart, cp = paused_at_manual
    data = json.loads(cp.to_json())
    data["paused_stage"] = "nowhere"
    with pytest.raises(CheckpointError, match="'nowhere'"):
        chart.resume_sync(data, ANSWERS[1])


def test_checkpoint_with_altered_log_is_refused(paused_at_manual: tuple[Any, Checkpoint]) -> None:
    """A checkpoint whose embedded commit log was tampered with is refused as unreadable."""
    chart, cp = paused_at_manual
    data = json.loads(cp.to_json())
    data["log"]["records"][0] = {"nonsense": True}
    with pytest.raises(CheckpointError, match="checkpoint log is unreadable"):
        chart.resume_sync(data, ANSWERS[1])


def _pausing_with(data: Any, state: dict[str, Any] | None = None) -> Any:
    def ask(scope: Any) -> Any:
        for key, value in (state or {}).items():
            scope[key] = value
        return pause(data)

    return (
        flow_chart("Start", lambda scope: None, id="start")
        .then("Ask", ask, id="ask", resume=lambda scope, answer: None)
        .build()
    )


@pytest.mark.parametrize(
    ("data", "state", "message"),
    [
        ({1, 2}, None, r"pause data holds a set"),
        ({"when": object()}, None, r"pause data\.when holds a object"),
        ({1: "one"}, None, r"pause data has a non-string key 1"),
        ("fine", {"tags": {"a"}}, r"state\.tags holds a set"),
    ],
)
def test_pause_with_non_json_data_fails_clearly(
    data: Any, state: dict[str, Any] | None, message: str
) -> None:
    """Pause data (or state) that cannot travel as JSON fails the pause with a CheckpointError
    naming the stage and the offending value's path."""
    chart = _pausing_with(data, state)
    with pytest.raises(CheckpointError, match=rf"cannot checkpoint the pause at 'ask': {message}"):
        chart.run_sync()


def test_checkpoint_json_keeps_nan_and_infinity() -> None:
    """NaN and ±Infinity in state, pause data and the log survive ``to_json()`` and resume
    (the engine accepts them as state; a checkpoint must not silently turn them into null)."""
    chart = (
        flow_chart("Start", lambda scope: scope.__setitem__("low", -math.inf), id="start")
        .then("Ask", lambda scope: pause({"score": math.nan}), id="ask",
              resume=lambda scope, answer: scope.__setitem__("answer", answer))
        .build()
    )
    run = chart.run_sync(state={"score": math.nan, "high": [1.5, math.inf]})
    assert run.checkpoint is not None
    text = run.checkpoint.to_json()
    data = json.loads(text)
    for where, value in (("pause_data", data["pause_data"]["score"]),
                         ("state", data["state"]["score"])):
        assert isinstance(value, float) and math.isnan(value), f"{where}: NaN became {value!r}"
    assert data["state"]["high"] == [1.5, math.inf]
    assert data["state"]["low"] == -math.inf
    resumed = chart.resume_sync(text, "ok")
    assert math.isnan(resumed.state["score"])
    assert resumed.state["high"] == [1.5, math.inf]
    assert resumed.state["low"] == -math.inf
    assert math.isnan(resumed.log.value_at("score", -1))
    assert resumed.log.value_at("low", 0) == -math.inf


# -- pause() from a stage that cannot be resumed ---------------------------------------------


def test_pause_without_resume_names_the_fix() -> None:
    """A stage declared without resume= that returns pause() fails with a StageError that says
    to declare resume=, and its record carries the error."""
    chart = (
        flow_chart("Start", lambda scope: None, id="start")
        .then("Ask", lambda scope: pause({"q": "?"}), id="ask")
        .then("Never", lambda scope: scope.__setitem__("reached", True), id="never")
        .build()
    )
    with pytest.raises(StageError, match=r"'Ask' returned pause\(\).*declare it with resume=") as e:
        chart.run_sync()
    assert e.value.stage_id == "ask"
    assert e.value.runtime_stage_id == "ask#1"
    run = e.value.run
    assert run is not None and run.status == "failed"
    assert [r.stage_id for r in run.records] == ["start", "ask"]
    assert run.records[-1].error is not None and "without resume=" in run.records[-1].error
    assert "reached" not in run.state
