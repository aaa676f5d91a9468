"""The ``agentfootprint`` command: ``demo``, ``runs list``, ``explain``, ``prove``, ``report``,
``audit verify``/``audit export``, ``export otel``, ``lint-tools``, ``serve``, ``ui``."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .flow._display import terminal_text

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The command; a store or recording it cannot read is one line on stderr, never a traceback."""
    from .errors import AgentFootprintError

    try:
        return _main(argv)
    except AgentFootprintError as exc:
        print(f"agentfootprint: {_plain(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `agentfootprint explain RUN | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


_plain = terminal_text


def _plain_lines(text: str) -> str:
    return "\n".join(_plain(line) for line in text.split("\n"))


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentfootprint")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _is_url(where: object) -> bool:
    return isinstance(where, str) and where.startswith(("postgresql://", "postgres://"))


def _open_store(where: Path | str) -> Any:
    """The run store at ``where``: a SQLite file, or a ``postgresql://`` URL (a fleet's)."""
    if _is_url(where):
        from .runs._postgres import PostgresRunStore

        return PostgresRunStore(str(where))
    from .runs._sqlite import RunStore

    return RunStore(where)


def _report_name(run_id: str) -> str:
    """The default report file for ``run_id``: a plain file name in the working directory,
    whatever the id holds (``../../x`` or a control character never leaves it)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id).lstrip(".") or "run"
    return f"{name[:128]}.html"


def _main(argv: Sequence[str] | None) -> int:
    # --store is accepted before or after the command (`runs list --store x.db`); a subcommand
    # only sets it when given, so it never hides the one given before.
    store_option = argparse.ArgumentParser(add_help=False)
    store_option.add_argument("--store", default=argparse.SUPPRESS,
                       help="run store file (default .agentfootprint/runs.db), or a "
                            "postgresql:// URL for runs, explain, report, prove")
    parser = argparse.ArgumentParser(prog="agentfootprint", parents=[store_option],
                                     description="The explainable AI-agent framework.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", parents=[store_option],
                        help="run the offline refunds demo and explain its answer")
    runs = commands.add_parser("runs", parents=[store_option], help="recorded runs")
    runs_commands = runs.add_subparsers(dest="runs_command", required=True)
    listing = runs_commands.add_parser("list", parents=[store_option], help="the most recent runs")
    listing.add_argument("--limit", type=_count, default=20,
                         help="how many runs to list, newest first (1 or more; default 20)")
    explain = commands.add_parser("explain", parents=[store_option],
                                  help="explain a recorded run: its kept proof (or its failure), "
                                       "then the backtrack")
    explain.add_argument("run_id")
    report = commands.add_parser("report", parents=[store_option],
                                 help="write a recorded run's HTML report")
    report.add_argument("run_id")
    report.add_argument("-o", "--output", default=None, metavar="FILE.html",
                        help="the HTML file to write (default RUN_ID.html here)")
    prove = commands.add_parser(
        "prove", parents=[store_option],
        help="prove a recorded run's cause by isolated re-runs, and keep the proof")
    prove.add_argument("run_id")
    wrong = prove.add_mutually_exclusive_group()
    wrong.add_argument("--wrong-if-contains", metavar="PHRASE",
                       help="the answer is wrong when it contains PHRASE (case-insensitive)")
    wrong.add_argument("--wrong-if-matches", metavar="REGEX",
                       help="the answer is wrong when REGEX is found in it")
    wrong.add_argument("--wrong-if", metavar="MODULE:FUNCTION",
                       help="the answer is wrong when FUNCTION(answer) is true")
    prove.add_argument("--budget", type=int, default=160, metavar="N",
                       help="at most N re-runs of the agent (default 160)")
    prove.add_argument("--alpha", type=float, default=0.01,
                       help="false-positive rate of a CAUSAL verdict on a sampling model")
    prove.add_argument("--factory", metavar="MODULE:FUNCTION", default=None,
                       help="what rebuilds the agent (default: the factory recorded with the run)")
    from .audit._cli import add_audit_commands, run_audit

    add_audit_commands(commands, store_option)
    from .observe._cli import add_export_commands, run_export

    add_export_commands(commands, store_option)
    from .serve._cli import add_serve_command, run_serve

    add_serve_command(commands)
    from .lint._cli import add_lint_command, run_lint

    add_lint_command(commands)
    from .serve.browser._cli import add_ui_command, run_ui

    add_ui_command(commands, store_option)
    options = parser.parse_args(argv)
    if options.command == "lint-tools":  # reads a catalog file, no run store
        return run_lint(options)
    if options.command == "audit":  # verify needs no store; export opens its own
        return run_audit(options)
    if options.command == "export":
        return run_export(options)
    if options.command == "serve":  # its own session store, no run store
        return run_serve(options)

    from .runs._sqlite import DEFAULT_RUN_STORE

    given = getattr(options, "store", None)
    if _is_url(given) and options.command in ("runs", "explain", "report", "prove", "ui"):
        store_path: Any = given  # a PostgreSQL run store every worker records to
    elif _is_url(given):
        print(f"`agentfootprint {options.command}` reads a SQLite run store file; pass "
              "--store FILE", file=sys.stderr)
        return 1
    else:
        store_path = Path(given) if given else DEFAULT_RUN_STORE
    if options.command != "demo" and not _is_url(store_path) and not store_path.exists():
        print(f"no run store at {str(store_path)!r}: nothing has been recorded there yet. "
              "Record a run with RunStore(path).save(result), or pass --store FILE",
              file=sys.stderr)
        return 1
    if options.command == "demo":
        from ._demo import run_demo

        def progress(done: int, total: int, label: str) -> None:
            print(f"  re-run {done}/{total}: {label}", file=sys.stderr)

        print(run_demo(store_path=store_path, progress=progress))
        return 0
    if options.command == "runs":
        with _open_store(store_path) as store:
            found = store.list(limit=options.limit)
        if not found:
            print(f"no runs recorded in {store_path}")
        for run in found:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created_at))
            print(_plain(f"{run.run_id}  {when}  {run.kind:<5} {run.status:<6} {run.name}: "
                         f"{run.preview[:60]}"))
        return 0
    if options.command == "prove":
        return _prove(store_path, options)
    if options.command == "ui":
        return run_ui(store_path, options)
    if options.command == "report":
        return _report(store_path, options.run_id,
                       options.output or _report_name(options.run_id))
    from .audit._cli import stored_run_warning
    from .explain._explain_run import NoAnswer, explain_recording

    with _open_store(store_path) as store:
        try:
            recording = store.load(options.run_id)
            proofs = store.proofs(options.run_id)
        except KeyError as exc:
            print(_plain(exc.args[0]), file=sys.stderr)
            return 1
        tampered = stored_run_warning(store, recording)
    if tampered:  # the edited run is explained, but never as the run that happened
        print(_plain(tampered) + "\n")
    try:
        print(_plain_lines(explain_recording(recording, proofs)))
    except NoAnswer as exc:
        print(_plain(str(exc)), file=sys.stderr)
        return 1
    return 1 if tampered else 0


def _prove(store_path: Path | str, options: argparse.Namespace) -> int:
    """Re-run a stored run's agent (rebuilt from its factory) without its suspects; keep it."""
    from .explain._criterion import wrong_if
    from .explain._prove import kept_criterion, prove_stored_run
    from .flow._run import run_sync

    given = (options.wrong_if_contains, options.wrong_if_matches, options.wrong_if)
    criterion = (wrong_if(contains=given[0], matches=given[1], predicate=given[2])
                 if any(g is not None for g in given) else None)

    def progress(done: int, total: int, label: str) -> None:
        print(f"  re-run {done}: {label}", file=sys.stderr)

    with _open_store(store_path) as store:
        criterion = criterion or kept_criterion(store, options.run_id)
        report = run_sync(prove_stored_run(store, options.run_id, is_wrong=criterion,
                                           factory=options.factory, budget=options.budget,
                                           alpha=options.alpha, progress=progress))
    print(report)
    print(f"\nkept with run {options.run_id} in {store_path}; `agentfootprint explain "
          f"{options.run_id}` leads with it")
    return 0


def _count(text: str) -> int:
    """``--limit``: a whole number of at least 1 (SQLite reads ``LIMIT -1`` as "no limit")."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count; pass 1 or more, e.g. 20")
    return value


def _report(store_path: Path | str, run_id: str, output: str) -> int:
    """Write the HTML report of a stored run; print its path."""
    from .audit._cli import stored_run_warning
    from .explain.report._render import write_html_report

    with _open_store(store_path) as store:
        try:
            recording = store.load(run_id)
            proofs = store.proofs(run_id)
        except KeyError as exc:
            print(_plain(exc.args[0]), file=sys.stderr)
            return 1
        tampered = stored_run_warning(store, recording)
        head = store.chain_head(run_id)  # the page says whether the run still matches it
    if tampered:  # a report page would present the edited run as the one that happened
        print(_plain(f"{tampered}; no report was written"), file=sys.stderr)
        return 1
    target = Path(output)
    try:
        written = write_html_report(recording, target, localization=proofs,
                                    chain_head=head)
    except OSError as exc:
        print(_plain(f"cannot write the report to {str(target)!r} ({exc}); pass -o with a "
                     "writable path"), file=sys.stderr)
        return 1
    print(_plain(str(written)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
