"""Serving: an agent or a flowchart as an MCP server (stdio, or HTTP on 127.0.0.1 only), and
``standing_agent(make_agent, sessions=...)``: conversations kept in a session store (SQLite by
default, Redis or PostgreSQL when scaled out), each owned by the principal who started it.

``serve_app(target, sessions=...)`` is the ASGI app of ``agentfootprint serve``: the standing
agent over HTTP, SSE and a WebSocket, behind ``api_key_auth()`` or any auth hook
(``pip install 'agentfootprint[server]'``).

``mcp_app(target)`` builds the server (one tool that runs the target); ``serve_mcp(target)``
runs it until the process stops. The ``mcp`` SDK loads on first use
(``pip install 'agentfootprint[mcp]'``).

``browser_app(store, agent=...)`` is the run browser of ``agentfootprint ui``: the runs list,
one run's report and a prove button, on 127.0.0.1 unless given an auth hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._app import serve_app
    from ._auth import api_key_auth
    from ._mcp import mcp_app, serve_mcp
    from ._sessions import Reply, Session, SessionStore, TranscriptEntry
    from ._sessions_postgres import postgres_sessions
    from ._sessions_redis import redis_sessions
    from ._sessions_sqlite import sqlite_sessions
    from ._standing import StandingAgent, standing_agent
    from .browser._app import browser_app

__all__ = ["Reply", "Session", "SessionStore", "StandingAgent", "TranscriptEntry", "api_key_auth",
           "browser_app", "mcp_app", "postgres_sessions", "redis_sessions", "serve_app",
           "serve_mcp", "sqlite_sessions", "standing_agent"]

_LAZY = {"api_key_auth": "_auth", "browser_app": "browser._app", "mcp_app": "_mcp",
         "serve_app": "_app", "serve_mcp": "_mcp",
         **dict.fromkeys(("Reply", "Session", "SessionStore", "TranscriptEntry"), "_sessions"),
         "postgres_sessions": "_sessions_postgres", "redis_sessions": "_sessions_redis",
         "sqlite_sessions": "_sessions_sqlite",
         **dict.fromkeys(("StandingAgent", "standing_agent"), "_standing")}

_lazy, __dir__ = _lazy_names(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """A lazy name on first use."""
    return _lazy(name)
