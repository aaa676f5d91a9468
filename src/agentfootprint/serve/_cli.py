"""``agentfootprint serve module:make_agent [--host H] [--port P] [--sessions SPEC] [--workers N]
[--insecure-local] [--cors-origin ORIGIN ...] [--request-timeout S] [--max-body-bytes N]
[--max-concurrent N] [--mcp]``.

Serves ``serve_app`` on uvicorn until stopped; SIGTERM or Ctrl-C lets the runs under way finish
(up to the request timeout) before the process exits. ``--sessions`` is ``sqlite:PATH`` (the
default: ``.agentfootprint/sessions.db``), ``redis://...`` or ``postgresql://...``. Callers
authenticate with API keys from ``$AGENTFOOTPRINT_API_KEYS`` (``key1=alice,key2=bob``); without
keys the command refuses to start unless ``--insecure-local`` (127.0.0.1 only, every caller
``local``). The target may build an Agent or a composition (``Sequence(...)``, a pattern); it
is built once at startup to check it (and dropped: each turn builds its own). A user error (a
target that cannot be imported, raises, or builds the wrong thing; no keys; a bad option) is
one line on stderr and exit status 2; nothing is served.

With ``--workers N`` (N > 1) uvicorn starts N processes, each building the app from the
configuration this command checked (passed in ``$AGENTFOOTPRINT_SERVE_CONFIG``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ..flow._display import terminal_text

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["add_serve_command", "app_from_env", "run_serve"]

CONFIG_ENV = "AGENTFOOTPRINT_SERVE_CONFIG"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_serve_command(commands: Any) -> None:
    """The ``serve`` command."""
    serve = commands.add_parser(
        "serve", help="serve an agent over HTTP, SSE and WebSocket (sessions kept in a store)")
    serve.add_argument("target", metavar="MODULE:MAKE_AGENT",
                       help="the function that builds the agent (or composition), called per "
                            "turn and once at startup to check it")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    serve.add_argument("--sessions", metavar="SPEC", default=None,
                       help="session store: sqlite:PATH (default .agentfootprint/sessions.db), "
                            "redis://..., or postgresql://...")
    serve.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    serve.add_argument("--insecure-local", action="store_true",
                       help="no authentication, for local development: binds 127.0.0.1 only "
                            "and every caller is 'local'")
    serve.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="a browser origin allowed to call the server (repeatable; none "
                            "by default)")
    serve.add_argument("--request-timeout", type=float, default=300.0, metavar="SECONDS",
                       help="longest a turn may run (default 300)")
    serve.add_argument("--max-body-bytes", type=int, default=1_000_000, metavar="N",
                       help="largest request body (default 1000000)")
    serve.add_argument("--max-concurrent", type=int, default=4, metavar="N",
                       help="runs one caller may have under way per process (default 4)")
    serve.add_argument("--mcp", action="store_true",
                       help="also serve the agent as an MCP server at /mcp (same auth)")


def _say(text: str) -> None:
    print(f"agentfootprint serve: {terminal_text(text)}", file=sys.stderr)


def run_serve(options: argparse.Namespace) -> int:
    """Run ``serve``; the exit status (2: a user error, said in one line)."""
    from ..errors import AgentFootprintError

    config = {
        "target": options.target, "sessions": options.sessions,
        "insecure_local": bool(options.insecure_local), "cors_origins": options.cors_origin,
        "request_timeout": options.request_timeout, "max_body_bytes": options.max_body_bytes,
        "max_concurrent": options.max_concurrent, "mcp": bool(options.mcp)}
    try:
        _check_bind(options.host, options.port, options.workers, options.insecure_local)
        if os.getcwd() not in sys.path:  # `serve app:make_agent` from the app's directory
            sys.path.insert(0, os.getcwd())
        app = build_app(config)
    except AgentFootprintError as exc:
        _say(str(exc))
        return 2
    import uvicorn

    grace = int(options.request_timeout) + 10
    if options.workers == 1:
        uvicorn.Server(uvicorn.Config(app, host=options.host, port=options.port,
                                      timeout_graceful_shutdown=grace)).run()
        return 0
    import asyncio

    asyncio.run(app.state.standing.close())  # each worker opens its own
    os.environ[CONFIG_ENV] = json.dumps(config)
    uvicorn.run("agentfootprint.serve._cli:app_from_env", factory=True, host=options.host,
                port=options.port, workers=options.workers, timeout_graceful_shutdown=grace)
    return 0


def _check_bind(host: str, port: int, workers: int, insecure_local: bool) -> None:
    from ..errors import ConfigurationError

    if insecure_local and host not in _LOOPBACK:
        raise ConfigurationError(
            f"--insecure-local serves without authentication, so it binds 127.0.0.1 only, not "
            f"--host {host}; set {_keys_env()} and drop --insecure-local to serve elsewhere")
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port {port} must be from 0 to 65535")
    if workers < 1:
        raise ConfigurationError(f"--workers {workers} must be 1 or more")


def _keys_env() -> str:
    from ._auth import API_KEYS_ENV

    return API_KEYS_ENV


def sessions_from(spec: str | None) -> Any:
    """The session store ``--sessions`` names (None: the standing agent's default)."""
    from ..errors import ConfigurationError

    if spec is None:
        return None
    if spec.startswith("sqlite:"):
        from ._sessions_sqlite import sqlite_sessions

        path = spec.removeprefix("sqlite:").removeprefix("//")
        if not path:
            raise ConfigurationError("--sessions sqlite: needs a file, e.g. sqlite:sessions.db")
        return sqlite_sessions(path)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from ._sessions_redis import redis_sessions

        return redis_sessions(spec)
    if spec.startswith(("postgresql://", "postgres://")):
        from ._sessions_postgres import postgres_sessions

        return postgres_sessions(spec)
    raise ConfigurationError(
        "--sessions must be sqlite:PATH, redis://HOST:PORT/DB or postgresql://..., "
        f"not {spec.split(':', 1)[0]!r}...")


def build_app(config: dict[str, Any]) -> Starlette:
    """The app ``config`` describes (what ``run_serve`` checked; what each worker builds).

    ``serve_app`` builds the target once to check it, so a factory that cannot be imported,
    raises, or builds neither an Agent nor a composition is a user error before anything is
    served."""
    from ._app import serve_app

    target = config["target"]
    return serve_app(target, sessions=sessions_from(config["sessions"]),
                     allow_unauthenticated=config["insecure_local"],
                     cors_origins=tuple(config["cors_origins"]),
                     max_body_bytes=config["max_body_bytes"],
                     request_timeout=config["request_timeout"],
                     max_concurrent_per_principal=config["max_concurrent"], mcp=config["mcp"])


def app_from_env() -> Starlette:
    """A worker's app: the configuration ``run_serve`` put in ``$AGENTFOOTPRINT_SERVE_CONFIG``."""
    config = json.loads(os.environ[CONFIG_ENV])
    return build_app(config)
