"""``agentfootprint export otel RUN_ID [--store PATH] [--endpoint URL] [--capture-content]``.

Sends a stored run's spans over OTLP/HTTP and prints one line naming the run, the span count
and where they went; exit 0 sent, 1 no such run or store or the collector did not take them,
2 the ``opentelemetry`` packages missing. The endpoint defaults to the standard
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``),
else ``http://localhost:4318/v1/traces``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..flow._display import terminal_text

__all__ = ["add_export_commands", "run_export"]


def add_export_commands(commands: Any, store_option: argparse.ArgumentParser) -> None:
    """The ``export`` command and its ``otel`` subcommand."""
    export = commands.add_parser("export", parents=[store_option],
                                 help="send a stored run elsewhere (otel: OpenTelemetry spans)")
    targets = export.add_subparsers(dest="export_command", required=True)
    otel = targets.add_parser("otel", parents=[store_option],
                              help="send a stored run's GenAI spans to an OTLP/HTTP collector")
    otel.add_argument("run_id")
    otel.add_argument("--endpoint", metavar="URL", default=None,
                      help="OTLP/HTTP traces URL (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
                           "else http://localhost:4318/v1/traces)")
    otel.add_argument("--capture-content", action="store_true",
                      help="also send messages, tool arguments and results (as recorded: "
                           "redacted values stay masked)")


def _endpoint(given: str | None) -> str:
    if given:
        return given
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return f"{base.rstrip('/')}/v1/traces" if base else "http://localhost:4318/v1/traces"


def _say(text: str) -> None:
    print(f"agentfootprint export: {terminal_text(text)}", file=sys.stderr)


def run_export(options: argparse.Namespace) -> int:
    """Run ``export otel``; the exit status."""
    from ..errors import ConfigurationError
    from ..runs._sqlite import DEFAULT_RUN_STORE, RunStore
    from ._otel import _require, export_otel

    try:
        _require()
    except ConfigurationError as exc:
        _say(str(exc))
        return 2
    given = getattr(options, "store", None)
    path = Path(given) if given else DEFAULT_RUN_STORE
    if not path.exists():
        _say(f"no run store at {str(path)!r}; pass --store FILE")
        return 1
    with RunStore(path) as store:
        try:
            recording = store.load(options.run_id)
        except KeyError as exc:
            _say(str(exc.args[0]))
            return 1
    endpoint = _endpoint(options.endpoint)
    try:
        count = export_otel(recording, endpoint=endpoint,
                            capture_content=options.capture_content)
    except ConfigurationError as exc:
        _say(str(exc))
        return 1
    print(f"run {recording.run_id}: {count} span(s) sent to {endpoint}")
    return 0
