"""Tools from MCP servers, through the official ``mcp`` SDK (stdio or streamable HTTP).

``async with mcp_server(command=[...]) as orders:`` (or ``url="http://.../mcp"``) starts or
reaches one server, lists its tools once, and gives them as ``orders.tools``: plain ``Tool``s
whose name, description and input schema are the server's listing. An agent treats them like
any tool: the arguments are checked against the listed schema before anything is sent, a call
goes through the open session, and its result (or error) becomes the tool result the model
reads and the recording keeps. Each tool also names where it came from (``origin``:
``mcp_server`` and ``mcp_tool``), which the ToolCalls step files with the call's result row,
so a backtrack that ends at the result names the server and the tool.

A tool the server annotates ``readOnlyHint`` is declared free of side effects (safe to run
again on resume or in an explanation's re-run); every other tool is treated as having effects.
Tool names must be unique across the tools an agent gets: two servers offering one name is a
configuration error naming both, fixed with ``prefix=``. The session is closed when the block
ends; a call after that, from another event loop, or to a server that died mid-call is a tool
error (a result the model reads, ``error=True``) naming the server.

``mcp`` is imported on first use (``pip install 'agentfootprint[mcp]'``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import ConfigurationError, McpServerError
from ._tool import Tool, ToolContext, define_tool

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpServer", "McpTool", "mcp_server"]

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class McpTool(Tool):
    """A tool served by an MCP server: ``name`` is what the model calls (the MCP name, with the
    prefix and with characters providers refuse replaced by ``_``); ``mcp_tool`` is the name
    the server knows."""

    mcp_server: str
    """The server's name (``name=`` of ``mcp_server``, else the one it announced)."""
    mcp_tool: str
    """The tool's name on that server."""
    read_only: bool = False
    """The server annotated it ``readOnlyHint`` (so ``side_effects`` is False)."""

    @property
    def origin(self) -> dict[str, str]:
        """What the recording keeps beside each result of this tool (the call's result row)."""
        return {"mcp_server": self.mcp_server, "mcp_tool": self.mcp_tool}


@dataclass(eq=False)
class McpServer:
    """One open connection to an MCP server, and the tools it listed when it was opened."""

    name: str
    """How the trace and error messages name the server."""
    transport: str
    """``stdio`` or ``streamable-http``."""
    tools: list[Tool] = field(default_factory=list)
    """The server's tools as ``Tool``s, in its listing's order: pass them to an agent."""
    _client: Client | None = field(default=None, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _timeout: float | None = field(default=None, repr=False)

    def tool(self, name: str) -> Tool:
        """The tool the model calls ``name`` (or the server calls ``name``)."""
        for found in self.tools:
            if name in (found.name, getattr(found, "mcp_tool", None)):
                return found
        names = ", ".join(t.name for t in self.tools) or "none"
        raise KeyError(f"MCP server {self.name!r} has no tool {name!r}; its tools: {names}")

    @property
    def closed(self) -> bool:
        return self._client is None

    async def call(self, mcp_tool: str, args: Mapping[str, Any],
                   ctx: ToolContext | None = None) -> Any:
        """Call ``mcp_tool`` on the server: its text (or structured content) on success; an
        ``McpServerError`` naming the server when the tool reports an error, the server
        refuses the call, dies or stops answering, or the session is closed."""
        client = self._client
        if client is None:
            raise McpServerError(
                f"MCP server {self.name!r} is closed (its `async with mcp_server(...)` block "
                f"ended), so tool {mcp_tool!r} cannot run; call its tools inside the block")
        if asyncio.get_running_loop() is not self._loop:
            raise McpServerError(
                f"MCP server {self.name!r} was opened on another event loop; open "
                "mcp_server(...) inside the same asyncio.run(...) as the agent's run "
                "(agent.run_sync starts a loop of its own: use await agent.run(...))")
        from mcp import MCPError

        try:
            result = await client.call_tool(mcp_tool, dict(args),
                                            read_timeout_seconds=self._timeout)
        except MCPError as exc:
            lost = "closed" in str(exc).lower()
            raise McpServerError(
                f"MCP server {self.name!r} {'stopped' if lost else 'refused'} while running "
                f"tool {mcp_tool!r}: {exc}"
                + ("; check that the server process is still running" if lost else "")) from exc
        except (TimeoutError, OSError) as exc:
            raise McpServerError(
                f"MCP server {self.name!r} did not answer tool {mcp_tool!r} "
                f"({type(exc).__name__}: {exc}); check that it is running and reachable") from exc
        except Exception as exc:  # the transport's own errors (anyio, httpx2) end here
            raise McpServerError(
                f"MCP server {self.name!r} failed while running tool {mcp_tool!r} "
                f"({type(exc).__name__}: {exc}); check that it is running and reachable") from exc
        text = _result_text(result.content)
        if result.is_error:
            raise McpServerError(
                f"MCP server {self.name!r}, tool {mcp_tool!r}, reported an error: "
                f"{text or 'no details given'}")
        if text or result.structured_content is None:
            return text
        return result.structured_content

    async def _attach(self, client: Client, *, prefix: str, only: Sequence[str] | None) -> None:
        """List the server's tools (every page) and make our ``Tool``s of them."""
        listed: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):  # a paginator that never ends cannot hang the open
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        if only is not None:
            known = {t.name for t in listed}
            missing = [name for name in only if name not in known]
            if missing:
                raise ConfigurationError(
                    f"MCP server {self.name!r} has no tool(s) {missing}; it lists "
                    f"{sorted(known)}: fix tools=[...]")
            listed = [t for t in listed if t.name in set(only)]
        made: dict[str, str] = {}
        for item in listed:
            made_tool = self._make_tool(item, prefix)
            if made_tool.name in made:
                raise ConfigurationError(
                    f"MCP server {self.name!r}: tools {made[made_tool.name]!r} and "
                    f"{item.name!r} both become {made_tool.name!r}; leave one out with tools=[...]")
            made[made_tool.name] = item.name
            self.tools.append(made_tool)

    def _make_tool(self, item: Any, prefix: str) -> McpTool:
        mcp_name: str = item.name
        name = _INVALID.sub("_", f"{prefix}{mcp_name}")[:64]
        schema = dict(item.input_schema or {})
        schema.setdefault("type", "object")
        schema.pop("title", None)  # pydantic's echo of the function name; the model has the name
        if schema.get("type") != "object":
            raise ConfigurationError(
                f"MCP server {self.name!r}, tool {mcp_name!r}: its input schema is not an "
                "object of named arguments, which tool calls need; leave it out with "
                "tools=[...]")
        annotations = item.annotations
        read_only = bool(annotations is not None and annotations.read_only_hint)
        description = (item.description or (annotations.title if annotations else None)
                       or item.title or f"Tool {mcp_name} of MCP server {self.name}")

        async def execute(args: dict[str, Any], ctx: ToolContext) -> Any:
            return await self.call(mcp_name, args, ctx)

        base = define_tool(name, description, schema, execute, side_effects=not read_only)
        return McpTool(name=base.name, description=base.description,
                       input_schema=base.input_schema, execute=base.execute,
                       validate=base.validate, blocking=False, side_effects=not read_only,
                       mcp_server=self.name, mcp_tool=mcp_name, read_only=read_only)


def _result_text(content: Sequence[Any]) -> str:
    """The text the model reads for an MCP result's content blocks (non-text ones described)."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else
                         f"[resource {resource.uri}, {resource.mime_type or 'binary'}]")
        else:
            parts.append(f"[{kind or type(block).__name__} content]")
    return "\n".join(parts)


@asynccontextmanager
async def mcp_server(command: Sequence[str] | None = None, *, url: str | None = None,
                     name: str | None = None, prefix: str = "",
                     tools: Sequence[str] | None = None,
                     env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                     headers: Mapping[str, str] | None = None,
                     timeout: float | None = 60.0) -> AsyncIterator[McpServer]:
    """Open an MCP server for the block: ``command=[...]`` starts it as a subprocess (stdio),
    ``url=`` reaches it over streamable HTTP. Yields an ``McpServer`` whose ``tools`` are ready
    for an agent.

    ``name`` is how the trace names the server (default: the name it announces); ``prefix``
    goes before every tool name (``"orders_"``), for two servers with a tool of the same name;
    ``tools`` takes only the tools named; ``env``/``cwd`` are the subprocess's, ``headers``
    go with every HTTP request (e.g. an ``Authorization``); ``timeout`` bounds each call, in
    seconds. The session (and a started process) is closed when the block ends.
    """
    client, transport, http = _client(command, url=url, env=env, cwd=cwd, headers=headers,
                                      timeout=timeout)
    if not isinstance(prefix, str) or _INVALID.search(prefix):
        raise ConfigurationError(
            f"prefix={prefix!r} may hold only letters, digits, '_' and '-' (e.g. 'orders_')")
    where = " ".join(command) if command is not None else str(url)
    raised: BaseException | None = None
    try:
        async with AsyncExitStack() as stack:
            if http is not None:
                stack.push_async_callback(http.aclose)
            try:
                entered = await stack.enter_async_context(client)
            except Exception as exc:
                raise McpServerError(
                    f"MCP server {name or where!r} could not be opened over {transport} "
                    f"({type(exc).__name__}: {exc}); check the command or URL, and that the "
                    "server speaks MCP") from exc
            server = McpServer(name or _announced(entered) or _fallback_name(command, url),
                               transport, _client=entered, _loop=asyncio.get_running_loop(),
                               _timeout=timeout)
            try:
                try:
                    await server._attach(entered, prefix=prefix, only=tools)
                except (ConfigurationError, McpServerError):
                    raise
                except Exception as exc:
                    raise McpServerError(
                        f"MCP server {server.name!r} did not list its tools "
                        f"({type(exc).__name__}: {exc})") from exc
                yield server
            except BaseException as exc:  # the block's own error, or the listing's
                raised = exc
                raise
            finally:
                server._client = None
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap whatever left the block; give back the error itself.
        if raised is not None and _leaves(group) == [raised]:
            raise raised from raised.__cause__
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions inside ``group`` and its nested groups."""
    found: list[BaseException] = []
    for item in group.exceptions:
        found.extend(_leaves(item) if isinstance(item, BaseExceptionGroup) else [item])
    return found


def _client(command: Sequence[str] | None, *, url: str | None, env: Mapping[str, str] | None,
            cwd: str | Path | None, headers: Mapping[str, str] | None,
            timeout: float | None) -> tuple[Client, str, Any]:
    """The SDK's client for ``command`` or ``url`` (refusing what cannot work), the
    transport's name, and the HTTP client to close after it (when headers made one)."""
    if (command is None) == (url is None):
        raise ConfigurationError(
            "mcp_server needs exactly one of command=[...] (a server started over stdio) or "
            "url='http://host:port/mcp' (streamable HTTP)")
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"timeout={timeout!r} must be a positive number of seconds")
    try:
        from mcp import Client, StdioServerParameters
    except ImportError as exc:
        raise ConfigurationError(
            "MCP servers need the mcp SDK: pip install 'agentfootprint[mcp]'") from exc
    if command is not None:
        if isinstance(command, str) or not command or not all(
                isinstance(part, str) and part for part in command):
            raise ConfigurationError(
                f"command={command!r} must be a non-empty list of strings, e.g. "
                "['uvx', 'my-orders-mcp']")
        if headers is not None:
            raise ConfigurationError("headers= goes with url=; a stdio server takes env=")
        params = StdioServerParameters(command=command[0], args=list(command[1:]),
                                       env=dict(env) if env is not None else None, cwd=cwd)
        return Client(params, read_timeout_seconds=timeout), "stdio", None
    assert url is not None
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") \
            or not urlsplit(url).netloc:
        raise ConfigurationError(
            f"url={url!r} must be an http(s) URL of the server's MCP endpoint, e.g. "
            "'http://127.0.0.1:8000/mcp'")
    if env is not None or cwd is not None:
        raise ConfigurationError("env= and cwd= go with command=; a URL server takes headers=")
    if headers is None:
        return Client(url, read_timeout_seconds=timeout), "streamable-http", None
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers=dict(headers))
    return (Client(streamable_http_client(url, http_client=http), read_timeout_seconds=timeout),
            "streamable-http", http)


def _announced(client: Client) -> str | None:
    info = client.server_info
    return info.name if info is not None and info.name else None


def _fallback_name(command: Sequence[str] | None, url: str | None) -> str:
    if command is not None:
        return Path(command[-1]).stem or command[0]
    return urlsplit(str(url)).netloc
