"""Golden outputs: what backtrack, localize, the HTML report and the CLI print, byte for byte.

Each case records runs into a run store in a temporary folder — the demo through
``agentfootprint demo``; each example by running its file as ``python examples/NAME.py`` would
(in-process, with every outermost ``run``/``resume`` caught as it returns, so no example needs a
hook) — then renders the explanations of those runs and compares them, after ``normalise``,
with the files in ``data/<case>/``:

- ``example.txt``   what the example printed (its own backtracks, narratives, reports);
- ``backtrack.txt`` ``str(backtrack(result))`` for each run the case made, on the live result;
- ``cli.txt``       ``demo`` (the demo's backtrack and ``localize_context_bug`` report),
  ``runs list``, ``explain RUN_ID`` and ``report RUN_ID -o FILE`` on the store: stdout, stderr
  and exit code (or the exception a command dies of) of each;
- ``report-N.html`` the HTML reports those commands wrote (``demo-report.html``: the demo's own,
  with its backtrack and localization).

Only the demo is localized: it is the one case with a natural ``rebuild``/``is_wrong``.
Run ids, clock times and temp paths become placeholders; the HTML is stored whole, as it holds
no other varying part. Examples run under a ``SteppingClock``, because a memory's timestamp
reaches the influence scores. Regenerate after an intended change with
``AGENTFOOTPRINT_REGEN_GOLDENS=1 .venv/bin/pytest tests/goldens`` and review the git diff.
"""

from __future__ import annotations

import contextvars
import difflib
import functools
import io
import os
import re
import runpy
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, LLMCall
from agentfootprint.cli import main
from agentfootprint.compose._base import Composition
from agentfootprint.compose._pattern import Pattern
from agentfootprint.explain import backtrack
from agentfootprint.flow import Chart
from agentfootprint.runs import RunStore

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "goldens" / "data"
EXAMPLES = ROOT / "examples"
REGEN = os.environ.get("AGENTFOOTPRINT_REGEN_GOLDENS") == "1"
REGEN_COMMAND = "AGENTFOOTPRINT_REGEN_GOLDENS=1 .venv/bin/pytest tests/goldens"

# -- normalisation -------------------------------------------------------------------------------

RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")
"""``uuid4().hex``: how a run id is made when the caller gives none."""
SESSION_ID = re.compile(r"\bs[0-9a-f]{32}\b")
"""A served conversation's id (``serve/_standing.py``)."""
SESSION_RUN_ID = re.compile(r"\bs[0-9a-f]{32}\.\d+\.[0-9a-f]{8}\b")
"""A run id a served conversation makes: ``{session}.{turn}.{nonce}``."""
CLOCK = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"  # ISO, local
    r"|\b1[6-9]\d{8}(?:\.\d+)?\b|\b1[6-9]\d{11}\b")  # epoch seconds / milliseconds, 2020-2033
DURATION = re.compile(r"\b\d+\.\d+ ?ms\b")
DURATION_FIELD = re.compile(
    r"((?:duration|latency|elapsed)(?:_ms|_s)?[\"']?\s*[:=]\s*)\d+(?:\.\d+)?")
TEMP_DIR = re.compile(r"<tmp>(?:/example/tmp[a-z0-9_]{8})?")
"""The case's folder, and a ``tempfile.mkdtemp()`` folder an example made inside it."""


def normalise(text: str, *, runs: dict[str, str], tmp: Path) -> str:
    """``text`` with run ids as ``<run-N>`` (``runs`` numbers them in order of first
    appearance and is shared by a case's outputs), clock times as ``<time>``, durations as
    ``<ms>`` and temporary paths as ``<tmp>``; everything else untouched."""
    text = TEMP_DIR.sub("<tmp>", text.replace(str(tmp), "<tmp>"))
    text = RUN_ID.sub(lambda found: runs.setdefault(found[0], f"<run-{len(runs) + 1}>"), text)
    text = SESSION_RUN_ID.sub(
        lambda found: runs.setdefault(found[0], f"<run-{len(runs) + 1}>"), text)
    text = SESSION_ID.sub(
        lambda found: runs.setdefault(found[0], f"<session-{len(runs) + 1}>"), text)
    text = CLOCK.sub("<time>", text)
    return DURATION_FIELD.sub(r"\1<ms>", DURATION.sub("<ms>", text))


# -- comparison ----------------------------------------------------------------------------------


def check_goldens(case: str, outputs: dict[str, str]) -> None:
    """Compare ``outputs`` (file name -> normalised text) with ``data/<case>/``, or write them
    there when AGENTFOOTPRINT_REGEN_GOLDENS=1; one failure lists every mismatch."""
    folder = DATA / case
    stale = sorted(p.name for p in folder.glob("*") if p.name not in outputs)
    if REGEN:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in outputs.items():
            (folder / name).write_bytes(text.encode("utf-8"))
        for name in stale:
            (folder / name).unlink()
        return
    shown = folder.relative_to(ROOT)  # messages name the files from the repository root
    problems = [f"{shown / name} is no longer produced; regenerate with: {REGEN_COMMAND}"
                for name in stale]
    for name, text in outputs.items():
        path = folder / name
        if not path.exists():
            problems.append(f"{shown / name} is missing; create it with: {REGEN_COMMAND} -k {case}")
            continue
        expected = path.read_bytes().decode("utf-8")
        if expected != text:
            problems.append(_short_diff(expected, text, str(shown / name),
                                        html=name.endswith(".html")))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def _short_diff(expected: str, actual: str, where: str, *, html: bool,
                max_lines: int = 40, width: int = 160) -> str:
    """A unified diff, cut to ``max_lines`` lines of at most ``width`` characters."""

    def lines(text: str) -> list[str]:
        return (text.replace("><", ">\n<") if html else text).splitlines(keepends=True)

    diff = [line.rstrip("\n") for line in difflib.unified_diff(
        lines(expected), lines(actual), fromfile=where, tofile="this run", n=2)]
    shown = [line if len(line) <= width else line[: width - 1] + "…" for line in diff[:max_lines]]
    if len(diff) > max_lines:
        shown.append(f"... {len(diff) - max_lines} more diff lines")
    return "\n".join([f"{where} differs (if intended: {REGEN_COMMAND}):", *shown])


# -- running the cases ---------------------------------------------------------------------------

_IN_A_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("_IN_A_RUN", default=False)
ENTRY_POINTS = ("run", "resume", "resume_on_error")


def _catching(method: Callable[..., Awaitable[Any]],
              caught: list[Any]) -> Callable[..., Awaitable[Any]]:
    """``method``, appending what it returns to ``caught`` unless it runs inside another run."""

    @functools.wraps(method)
    async def entry(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _IN_A_RUN.get():
            return await method(self, *args, **kwargs)
        token = _IN_A_RUN.set(True)
        try:
            result = await method(self, *args, **kwargs)
        finally:
            _IN_A_RUN.reset(token)
        caught.append(result)
        return result

    return entry


class SteppingClock:
    """A wall clock that starts at a fixed instant and moves 1 ms at each reading.

    Memory entries are stamped with the wall clock and recalled as ``updated="…"``; the tokens
    of that time enter the influence scores, so under the real clock a score drifts by a few
    thousandths from one run to the next. Placeholders cannot fix a number computed from it.
    """

    def __init__(self, start: datetime) -> None:
        self.now_ns = int(start.timestamp()) * 1_000_000_000

    def time_ns(self) -> int:
        self.now_ns += 1_000_000
        return self.now_ns

    def time(self) -> float:
        return self.time_ns() / 1e9


def run_example(path: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[Any]]:
    """Run an example file as ``python PATH`` would, under a ``SteppingClock``; return what it
    printed and its runs (``RunResult`` or ``FlowRun``, in the order they returned)."""
    caught: list[Any] = []
    owners = {(next(c for c in runner.__mro__ if name in vars(c)), name)
              for runner in (Agent, LLMCall, Composition, Pattern, Chart)
              for name in ENTRY_POINTS if hasattr(runner, name)}
    scratch = tmp / "example"
    scratch.mkdir()
    clock = SteppingClock(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    printed = io.StringIO()
    with monkeypatch.context() as patch, redirect_stdout(printed):
        for owner, name in owners:
            patch.setattr(owner, name, _catching(vars(owner)[name], caught))
        patch.setattr(tempfile, "tempdir", str(scratch))  # its mkdtemp() lands in tmp
        patch.setattr(time, "time", clock.time)
        patch.setattr(time, "time_ns", clock.time_ns)
        runpy.run_path(str(path), run_name="__main__")
    return printed.getvalue(), caught


def cli(argv: Sequence[str], store: Path) -> str:
    """``agentfootprint --store STORE ARGV...`` in-process: the command, its output, its exit."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            ended = f"[exit {main(['--store', str(store), *argv])}]"
        except Exception as exc:  # what the command would die of, as the traceback's last line
            ended = f"[raised {type(exc).__name__}: {exc}]"
    shown = [f"$ agentfootprint {' '.join(argv)}"]
    if out.getvalue():
        shown.append(out.getvalue().rstrip("\n"))
    if err.getvalue():
        shown += ["[stderr]", err.getvalue().rstrip("\n")]
    return "\n".join([*shown, ended, "", ""])


def explain_store(store: Path, tmp: Path, run_ids: Sequence[str]) -> dict[str, str]:
    """``runs list``, then ``explain`` and ``report -o`` of each run: the CLI transcript and
    the report files (not yet normalised)."""
    transcript = [f"# every command runs with --store {store}\n\n", cli(["runs", "list"], store)]
    reports: dict[str, str] = {}
    for number, run_id in enumerate(run_ids, start=1):
        transcript.append(cli(["explain", run_id], store))
        target = tmp / f"report-{number}.html"
        transcript.append(cli(["report", run_id, "-o", str(target)], store))
        if target.exists():
            reports[target.name] = target.read_text(encoding="utf-8")
    return {"cli.txt": "".join(transcript), **reports}


def _backtracks(results: Sequence[Any]) -> str:
    """``str(backtrack(result))`` for each run, or the error it raised."""
    parts = []
    for result in results:
        try:
            text = str(backtrack(result))
        except Exception as exc:
            text = f"[raised {type(exc).__name__}: {exc}]"
        parts.append(f"## run {result.run_id} ({result.status})\n{text}\n")
    return "\n".join(parts)


def test_demo(tmp_path: Path) -> None:
    """The demo's backtrack and localization, its HTML report, and runs list/explain/report."""
    store = tmp_path / "runs.db"
    demo = cli(["demo"], store)
    (reports,) = (tmp_path / "reports").glob("*.html")
    with RunStore(store) as opened:
        run_ids = [run.run_id for run in opened.list()]
    outputs = explain_store(store, tmp_path, run_ids)
    outputs["cli.txt"] = demo + outputs["cli.txt"]
    outputs["demo-report.html"] = reports.read_text(encoding="utf-8")
    runs: dict[str, str] = {}
    check_goldens("demo", {name: normalise(text, runs=runs, tmp=tmp_path)
                           for name, text in sorted(outputs.items())})


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An example's output, each run's backtrack, and runs list/explain/report on its store."""
    printed, results = run_example(EXAMPLES / name, tmp_path, monkeypatch)
    assert results, f"{name} made no run to record"
    store = tmp_path / "runs.db"
    with RunStore(store) as opened:
        for result in results:
            opened.save(result)
    run_ids = list(dict.fromkeys(result.run_id for result in results))
    runs = {run_id: f"<run-{n}>" for n, run_id in enumerate(run_ids, start=1)}
    outputs = {"example.txt": printed, "backtrack.txt": _backtracks(results),
               **explain_store(store, tmp_path, run_ids)}
    check_goldens(name.removesuffix(".py"), {
        key: normalise(text, runs=runs, tmp=tmp_path) for key, text in sorted(outputs.items())})
