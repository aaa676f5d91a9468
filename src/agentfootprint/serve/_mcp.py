"""An agent (or a flowchart) served as an MCP server, through the official ``mcp`` SDK.

``mcp_app(agent)`` is an MCP server (the SDK's low-level ``Server``) with one tool: it takes
``request`` (the message, in full), runs the agent once on it and answers with the agent's
text; the call's structured content also carries the ``run_id`` (the recording the run left,
e.g. in the agent's run store) and a typed output when the agent has one. A flowchart
(``Chart``) becomes a tool whose arguments are the chart's ``args`` (checked against its
``input_schema`` when it declares one) and whose result is the run's output. Any other
object with ``async run(message)`` (an ``LLMCall``, a composition) is served like an agent.

A target without memory runs each call as a fresh conversation. A target with memory (an
agent's, or a composition member's) runs each call under an identity taken from the call: the
conversation is the caller's MCP session (its ``mcp-session-id``; ``mcp-<id>``), the principal
the one ``serve_app``'s auth authenticated (``PRINCIPAL_SCOPE_KEY`` in the ASGI scope; none
when served alone), so a client's calls in one session continue one conversation and another
principal never reads it. A call without a session (stdio, a stateless transport) and without
a principal runs under the target's own ``identity=`` when every memory agent in it has one;
any other sessionless call is a fresh conversation of its principal (its memory is written,
but no later call continues it).

``serve_mcp(target)`` serves it over stdio (a client starts this process) or streamable HTTP.
HTTP binds 127.0.0.1 (or ``localhost``/``::1``) only: nothing here authenticates a caller, so
another host is refused until the serve issue adds authentication. The low-level server is
used rather than ``MCPServer`` so the tool's schema is exactly ours and serving does not
configure the host's logging.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..errors import AgentFootprintError, ConfigurationError
from ..flow import Chart
from ..tools._validate import argument_checker, describe_issues

if TYPE_CHECKING:
    from mcp.server import Server

    from ..memory._identity import MemoryIdentity

__all__ = ["LOCAL_HOSTS", "PRINCIPAL_SCOPE_KEY", "mcp_app", "serve_mcp"]

PRINCIPAL_SCOPE_KEY = "agentfootprint.principal"
"""The ASGI scope key an authenticating host (``serve_app``'s MCP mount) sets to the caller's
principal; a call's memory identity is that principal's."""

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""The hosts HTTP serving may bind until the serve issue adds authentication."""

_INVALID = re.compile(r"[^A-Za-z0-9_.-]")

_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": "What to ask, in full."}},
    "required": ["request"],
    "additionalProperties": False,
}

Runner = Callable[[dict[str, Any], Any], Awaitable[tuple[str, dict[str, Any], bool]]]
"""``runner(arguments, ctx) -> (text, structured content, is_error)``; ``ctx`` is the SDK's
request context (the HTTP request, when there is one)."""


def mcp_app(target: Any, *, name: str | None = None, tool_name: str | None = None,
            description: str | None = None, instructions: str | None = None) -> Server[Any]:
    """``target`` (an agent, or a flowchart) as an MCP server with one tool.

    ``name`` is the server's name (default: the target's); ``tool_name`` the tool's (default:
    the target's name, made safe for MCP); ``description`` what a calling model reads about it
    (default: the chart's description, or a sentence naming the agent). Run it with
    ``serve_mcp``, or mount ``app.streamable_http_app(host="127.0.0.1")`` in your own ASGI host.
    """
    try:
        from mcp import types
        from mcp.server import Server
    except ImportError as exc:
        raise ConfigurationError(
            "serving over MCP needs the mcp SDK: pip install 'agentfootprint[mcp]'") from exc
    own = str(getattr(target, "name", "") or "agent")
    tool = _safe_tool_name(tool_name if tool_name is not None else own)
    if isinstance(target, Chart):
        schema = dict(target.input_schema or {"type": "object"})
        text = description or target.description or f"Run the {own} flowchart on its args."
        run = _chart_runner(target, schema)
    elif callable(getattr(target, "run", None)):
        schema = _REQUEST_SCHEMA
        remembered = _memory_agents(target)
        text = description or (f"Ask the {own} agent: send the request in full; it answers "
                               "in text (" + ("one conversation per MCP session"
                                              if remembered else "a fresh conversation per call")
                               + ").")
        run = _agent_runner(target, remembered)
    else:
        raise ConfigurationError(
            f"mcp_app cannot serve {target!r}: pass an Agent (or LLMCall, composition) or a "
            "flowchart built with flow_chart(...).build()")
    listed = types.Tool(name=tool, description=text, input_schema=schema)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        structured: dict[str, Any]
        if params.name != tool:
            answer, structured, failed = (
                f"Unknown tool {params.name!r}; this server has {tool!r}.", {}, True)
        else:
            answer, structured, failed = await run(dict(params.arguments or {}), ctx)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer)],
            structured_content=structured or None, is_error=failed)

    return Server(name or own, instructions=instructions, on_list_tools=list_tools,
                  on_call_tool=call_tool,
                  get_tool_input_schema=lambda wanted: schema if wanted == tool else None)


def _memory_agents(target: Any) -> list[Any]:
    """The agents with memory in ``target`` (an agent, a composition, a served one)."""
    from ..compose._members import memory_agents

    return [agent for _, agent in memory_agents([getattr(target, "composition", target)])]


def call_identity(ctx: Any, remembered: list[Any]) -> MemoryIdentity | None:
    """The identity one call's memory reads and writes under (see the module docstring);
    None: the target's own."""
    from ..memory._identity import MemoryIdentity

    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    principal = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, Mapping) else None
    headers = getattr(request, "headers", None)
    session = headers.get("mcp-session-id") if isinstance(headers, Mapping) else None
    if session:
        return MemoryIdentity(f"mcp-{session}", principal=principal)
    if principal is None and all(agent.identity is not None for agent in remembered):
        return None
    return MemoryIdentity(f"mcp-call-{uuid.uuid4().hex}", principal=principal)


def _agent_runner(agent: Any, remembered: list[Any]) -> Runner:
    async def run(arguments: dict[str, Any], ctx: Any) -> tuple[str, dict[str, Any], bool]:
        request = arguments.get("request")
        if not isinstance(request, str) or not request.strip() or set(arguments) - {"request"}:
            return ("Send one argument, request: the message in full, as a string.", {}, True)
        options: dict[str, Any] = {}
        if remembered:
            options["identity"] = call_identity(ctx, remembered)
        try:
            result = await agent.run(request, **options)
        except AgentFootprintError as exc:  # our errors name the fix; say it to the caller
            return (f"The agent's run failed: {type(exc).__name__}: {exc}", {}, True)
        structured: dict[str, Any] = {"answer": result.content, "run_id": result.run_id}
        if getattr(result, "paused", False):
            return (f"Run {result.run_id} paused for a person (a check-in) and cannot answer "
                    "over MCP; resume it where the agent runs.", structured, True)
        output = getattr(result, "output", None)
        if output is not None and not isinstance(output, str):
            from pydantic_core import to_jsonable_python

            structured["output"] = to_jsonable_python(output)
        return (result.content, structured, False)

    return run


def _chart_runner(chart: Chart, schema: Mapping[str, Any]) -> Runner:
    check = argument_checker(schema)

    async def run(arguments: dict[str, Any], ctx: Any) -> tuple[str, dict[str, Any], bool]:
        issues = check(arguments)
        if issues:
            return (describe_issues(chart.name, issues), {}, True)
        try:
            flow_run = await chart.run(arguments)
        except AgentFootprintError as exc:
            return (f"The flowchart's run failed: {type(exc).__name__}: {exc}", {}, True)
        from pydantic_core import to_jsonable_python

        output = to_jsonable_python(flow_run.output, fallback=repr)
        structured = {"output": output, "run_id": flow_run.run_id, "status": flow_run.status}
        if flow_run.status != "done":
            return (f"Run {flow_run.run_id} ended {flow_run.status}"
                    f"{': ' + flow_run.error if flow_run.error else ''}.", structured, True)
        import json

        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return (text, structured, False)

    return run


def _safe_tool_name(name: str) -> str:
    safe = _INVALID.sub("_", str(name)).strip("_")[:128]
    if not safe:
        raise ConfigurationError(
            f"tool_name={name!r} has no letters or digits; pass tool_name='ask_support'")
    return safe


def serve_mcp(target: Any, *, transport: Literal["stdio", "streamable-http"] = "stdio",
              host: str = "127.0.0.1", port: int = 8000, path: str = "/mcp",
              **app_options: Any) -> None:
    """Serve ``target`` (see ``mcp_app``) until the process is stopped: over stdio (the default;
    an MCP client starts this process) or streamable HTTP on ``host:port`` at ``path``.

    HTTP binds 127.0.0.1, ``localhost`` or ``::1`` only; any other host is refused, as nothing
    authenticates a caller yet. Blocking: call it from a script, not inside a running loop.
    """
    if transport not in ("stdio", "streamable-http"):
        raise ConfigurationError(
            f"transport={transport!r} must be 'stdio' or 'streamable-http'")
    if transport == "streamable-http":
        check_local_host(host)
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigurationError(f"port={port!r} must be an integer from 0 to 65535")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise ConfigurationError(
            "serve_mcp blocks until the process stops, so it cannot run inside an event loop; "
            "call it from a script's top level (or run mcp_app(...) yourself)")
    app = mcp_app(target, **app_options)
    if transport == "stdio":
        asyncio.run(_serve_stdio(app))
        return
    import uvicorn

    web = app.streamable_http_app(streamable_http_path=path, host=host)
    uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning")).run()


def check_local_host(host: str) -> None:
    """Refuse a host other than the loopback ones (no authentication yet)."""
    if host not in LOCAL_HOSTS:
        raise ConfigurationError(
            f"serving over MCP on host={host!r} is refused: it has no authentication yet, so "
            "it binds 127.0.0.1 only (or localhost, ::1); put an authenticating proxy in "
            "front to reach it from elsewhere")


async def _serve_stdio(app: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())
