"""MCP client: real MCP servers (the ``mcp`` SDK's MCPServer) over stdio and streamable HTTP.

The server is ``mcp_orders_server.py`` beside this file, started as a subprocess: over stdio by
``mcp_server(command=...)`` itself, over HTTP once per module on a free 127.0.0.1 port. No part
of MCP is mocked; only the LLM is the scripted mock, asking for the MCP tools.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agentfootprint import Agent, ToolContext
from agentfootprint.errors import ConfigurationError, McpServerError
from agentfootprint.explain import backtrack
from agentfootprint.providers import mock
from agentfootprint.runs import trace
from agentfootprint.tools import mcp_server

SERVER = Path(__file__).resolve().parent / "mcp_orders_server.py"
STDIO = [sys.executable, str(SERVER), "stdio"]
LOOKUP_TEXT = "order A-1001: delivered, 42.00 EUR, refundable within 30 days"
ANSWER = "Order A-1001 was delivered: 42.00 EUR, refundable within 30 days."


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The orders server over streamable HTTP on a free 127.0.0.1 port, waited for."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the MCP HTTP server exited: {process.stderr.read()!r}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


def _agent(tools: list, script: list) -> Agent:
    return Agent(provider=mock(script=script), system="You handle refunds.", tools=tools)


def _rows(result) -> list[dict]:
    """Every result row the run's ToolCalls steps filed (``trace.TOOL_RESULTS``)."""
    log = result.recording.log
    rows: list[dict] = []
    for record in log.records:
        for change in record.changes:
            if change.key == trace.TOOL_RESULTS and isinstance(change.value, list):
                rows.extend(change.value)
    return rows


def _tool_messages(result) -> list[dict]:
    return [m for m in result.history if m["role"] == "tool"]


async def test_stdio_server_tools_are_listed_as_tools() -> None:
    """Name, description and schema come from the server's listing; readOnlyHint → no side
    effects; a name providers refuse is made safe, and the server's own name is kept."""
    async with mcp_server(command=STDIO) as orders:
        assert orders.name == "orders" and orders.transport == "stdio"
        by_name = {t.name: t for t in orders.tools}
        assert list(by_name) == ["lookup_order", "refund", "broken", "crash", "dotted_name"]
        lookup = by_name["lookup_order"]
        assert lookup.description == "Look up an order by its id."
        assert lookup.input_schema["properties"]["order_id"]["type"] == "string"
        assert lookup.input_schema["required"] == ["order_id"]
        assert lookup.side_effects is False
        assert by_name["refund"].side_effects is True
        assert by_name["broken"].side_effects is True
        assert lookup.origin == {"mcp_server": "orders", "mcp_tool": "lookup_order"}
        assert by_name["dotted_name"].origin["mcp_tool"] == "dotted.name"
        assert orders.tool("dotted.name") is by_name["dotted_name"]
        assert await orders.call("dotted.name", {}) == "dotted ok"


async def test_agent_calls_stdio_tool_and_backtrack_ends_at_the_mcp_result() -> None:
    """The agent runs the MCP tool through the session; the recording names the server and
    tool with the result, and the backtrack's last hop is that result, naming both."""
    async with mcp_server(command=STDIO) as orders:
        agent = _agent(orders.tools, [
            {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]}, ANSWER])
        result = await agent.run("Can I get a refund for A-1001?")
    assert result.content == ANSWER
    assert [m["content"] for m in _tool_messages(result)] == [LOOKUP_TEXT]
    assert {"tool_name": "lookup_order", "mcp_server": "orders",
            "mcp_tool": "lookup_order", "status": "success"}.items() <= _rows(result)[0].items()
    chain = backtrack(result)
    assert chain.suspect is not None and chain.suspect.id == "lookup_order"
    assert [hop.kind for hop in chain.hops][-1] == "BORN"
    born = chain.hops[-1].text
    assert "MCP server 'orders'" in born and "'lookup_order'" in born
    assert LOOKUP_TEXT in str(chain)  # the READ hop quotes the MCP result the model saw


async def test_agent_calls_http_tool_and_backtrack_names_the_server(http_url: str) -> None:
    """The same over streamable HTTP; ``name=`` is how the trace names the server."""
    async with mcp_server(url=http_url, name="orders-http") as orders:
        assert orders.transport == "streamable-http"
        agent = _agent(orders.tools, [
            {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}},
                            {"name": "refund", "args": {"order_id": "A-1001", "amount": 42.0}}]},
            ANSWER])
        result = await agent.run("Refund A-1001?")
    contents = [m["content"] for m in _tool_messages(result)]
    assert contents == [LOOKUP_TEXT, "refunded 42.00 EUR on A-1001"]
    assert [(r["mcp_server"], r["mcp_tool"]) for r in _rows(result)] == [
        ("orders-http", "lookup_order"), ("orders-http", "refund")]
    born = backtrack(result).hops[-1].text
    assert "MCP server 'orders-http'" in born and "'lookup_order'" in born


async def test_arguments_are_validated_before_anything_is_sent(http_url: str) -> None:
    """A wrong argument is our validator's tool result (status invalid), never a server call."""
    async with mcp_server(url=http_url) as orders:
        agent = _agent(orders.tools, [
            {"tool_calls": [{"name": "refund", "args": {"order_id": 1001, "amount": "lots"}}]},
            "I could not refund."])
        result = await agent.run("Refund 1001")
    [message] = _tool_messages(result)
    assert _rows(result)[0]["status"] == "invalid"
    assert "order_id" in message["content"] and "refunded" not in message["content"]


async def test_a_tool_error_is_a_tool_error_naming_the_server(http_url: str) -> None:
    async with mcp_server(url=http_url) as orders:
        agent = _agent(orders.tools, [
            {"tool_calls": [{"name": "broken", "args": {"order_id": "A-7"}}]}, "Sorry."])
        result = await agent.run("Check A-7")
    [message] = _tool_messages(result)
    assert _rows(result)[0]["status"] == "error"
    assert "MCP server 'orders', tool 'broken', reported an error" in message["content"]
    assert "order store offline while reading A-7" in message["content"]


async def test_a_server_that_dies_mid_call_is_a_tool_error_naming_it() -> None:
    """The run goes on (the model reads the error), and the block still closes cleanly."""
    async with mcp_server(command=STDIO) as orders:
        agent = _agent(orders.tools, [
            {"tool_calls": [{"name": "crash", "args": {}}]}, "The order service is down."])
        result = await agent.run("Crash it")
        assert result.content == "The order service is down."
        with pytest.raises(McpServerError, match="MCP server 'orders'"):
            await orders.call("lookup_order", {"order_id": "A-1001"})
    [message] = _tool_messages(result)
    assert _rows(result)[0]["status"] == "error"
    assert "MCP server 'orders' stopped while running tool 'crash'" in message["content"]


async def test_calls_after_the_block_say_the_session_is_closed(http_url: str) -> None:
    async with mcp_server(url=http_url) as orders:
        lookup = orders.tool("lookup_order")
    assert orders.closed
    with pytest.raises(McpServerError, match=r"MCP server 'orders' is closed .* inside the block"):
        await lookup.execute({"order_id": "A-1001"}, ToolContext("c1", 1, "run-1"))


async def test_a_name_on_two_servers_is_refused_and_prefix_fixes_it(http_url: str) -> None:
    async with mcp_server(url=http_url) as first, \
            mcp_server(url=http_url, name="billing") as second:
        with pytest.raises(ConfigurationError, match=(
                r"'lookup_order' .*\(MCP server 'orders' and MCP server 'billing': open one "
                r"server with mcp_server\(..., prefix='<server>_'\)\)")):
            Agent(provider=mock(reply="x"), tools=[*first.tools, *second.tools])
    async with mcp_server(url=http_url, tools=["lookup_order"]) as first, \
            mcp_server(url=http_url, name="billing", prefix="billing_",
                       tools=["lookup_order"]) as second:
        assert [t.name for t in second.tools] == ["billing_lookup_order"]
        agent = _agent([*first.tools, *second.tools], [
            {"tool_calls": [{"name": "billing_lookup_order", "args": {"order_id": "A-1001"}}]},
            ANSWER])
        result = await agent.run("Look it up in billing")
    assert [m["content"] for m in _tool_messages(result)] == [LOOKUP_TEXT]
    assert _rows(result)[0]["mcp_server"] == "billing"
    assert _rows(result)[0]["mcp_tool"] == "lookup_order"


async def test_tools_filter_names_unknown_tools(http_url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"no tool\(s\) \['nope'\]"):
        async with mcp_server(url=http_url, tools=["nope"]):
            pass


@pytest.mark.parametrize(("options", "message"), [
    ({}, "exactly one of command"),
    ({"command": STDIO, "url": "http://127.0.0.1:1/mcp"}, "exactly one of command"),
    ({"command": "uvx my-orders-mcp"}, "non-empty list of strings"),
    ({"url": "ftp://example.org/mcp"}, "http\\(s\\) URL"),
    ({"command": STDIO, "headers": {"a": "b"}}, "headers= goes with url="),
    ({"command": STDIO, "prefix": "bad prefix"}, "prefix="),
    ({"command": STDIO, "timeout": 0}, "timeout="),
])
async def test_bad_options_are_refused_with_the_fix(options: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        async with mcp_server(**options):
            pass


async def test_a_server_that_cannot_start_is_named() -> None:
    with pytest.raises(McpServerError, match="could not be opened over stdio"):
        async with mcp_server(command=["/nonexistent/agentfootprint-mcp-server"]):
            pass


async def test_an_error_inside_the_block_leaves_it_as_itself(http_url: str) -> None:
    """The SDK's task groups would wrap it in an ExceptionGroup; the caller gets the error."""
    with pytest.raises(KeyError, match="MCP server 'orders' has no tool 'nope'"):
        async with mcp_server(url=http_url) as orders:
            orders.tool("nope")


async def test_headers_go_with_every_http_request(http_url: str) -> None:
    """``headers=`` (e.g. an Authorization) builds the HTTP client, closed with the block."""
    async with mcp_server(url=http_url, headers={"Authorization": "Bearer t0ken"}) as orders:
        assert await orders.call("lookup_order", {"order_id": "A-1001"}) == LOOKUP_TEXT
