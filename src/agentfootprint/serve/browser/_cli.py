"""``agentfootprint ui``: the run browser over a run store, served by uvicorn on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..._refs import load_callable
from ...errors import ConfigurationError

__all__ = ["add_ui_command", "run_ui"]


def add_ui_command(commands: Any, store_option: argparse.ArgumentParser) -> None:
    """The ``ui`` subcommand and its options."""
    ui = commands.add_parser(
        "ui", parents=[store_option],
        help="browse recorded runs in a local web page: filter, open a report, prove a cause")
    ui.add_argument("--agent", metavar="MODULE:FUNCTION", default=None,
                    help="what rebuilds the agent for prove (default: the factory recorded "
                         "with each run)")
    ui.add_argument("--wrong-if", metavar="MODULE:FUNCTION", action="append", default=[],
                    help="a predicate the prove form offers (repeatable)")
    ui.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1; another needs --auth)")
    ui.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    ui.add_argument("--auth", metavar="MODULE:FUNCTION", default=None,
                    help="a function request -> principal (None refuses the request)")


def run_ui(store_path: Path | str, options: argparse.Namespace) -> int:
    """Serve the browser over ``store_path`` (a SQLite file or a ``postgresql://`` URL) until
    interrupted."""
    from ._app import browser_app, check_bind

    auth = load_callable(options.auth) if options.auth else None
    check_bind(options.host, auth)
    if not 0 < options.port < 65_536:
        raise ConfigurationError(f"--port {options.port} is not a port; give 1-65535")
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigurationError(f"agentfootprint ui needs uvicorn ({exc.name!r} is missing); "
                                 'install it with: pip install "agentfootprint[server]"') from exc
    app = browser_app(store_path, agent=options.agent, auth=auth, predicates=options.wrong_if)
    shown = f"[{options.host}]" if ":" in options.host else options.host
    print(f"agentfootprint ui: {app.state.store_label} at http://{shown}:{options.port}/ "
          "(Ctrl-C stops it)", file=sys.stderr)
    uvicorn.run(app, host=options.host, port=options.port, log_level="warning")
    return 0
