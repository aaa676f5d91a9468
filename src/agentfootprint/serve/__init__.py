"""Serving: an agent or a flowchart as an MCP server (stdio, or HTTP on 127.0.0.1 only).

``mcp_app(target)`` builds the server (one tool that runs the target); ``serve_mcp(target)``
runs it until the process stops. The ``mcp`` SDK loads on first use
(``pip install 'agentfootprint[mcp]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._mcp import mcp_app, serve_mcp

__all__ = ["mcp_app", "serve_mcp"]

_LAZY = {"mcp_app": "_mcp", "serve_mcp": "_mcp"}

_lazy, __dir__ = _lazy_names(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """A lazy name on first use."""
    return _lazy(name)
