"""Our agent (and a flowchart) served over MCP, called by the ``mcp`` SDK's own client.

The served process is ``mcp_agent_server.py`` beside this file (``serve_mcp`` over stdio, or
streamable HTTP on a free 127.0.0.1 port); the client is ``mcp.Client``. Nothing of MCP is
mocked; the served agent's model is the mock provider.
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

from mcp import Client, StdioServerParameters

from agentfootprint import Agent
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.serve import mcp_app, serve_mcp
from agentfootprint.tools import mcp_server

SERVER = Path(__file__).resolve().parent / "mcp_agent_server.py"
ANSWER = "Yes: order A-1001: delivered, 42.00 EUR, refundable within 30 days."


def _stdio(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER), *args])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The agent served over streamable HTTP on a free 127.0.0.1 port, waited for."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "agent", "http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the served agent exited: {process.stderr.read()!r}")
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


async def test_the_sdk_client_calls_our_agent_over_stdio() -> None:
    async with Client(_stdio("agent", "stdio")) as client:
        assert client.server_info is not None and client.server_info.name == "support"
        [listed] = (await client.list_tools()).tools
        assert listed.name == "support"
        assert listed.input_schema["required"] == ["request"]
        result = await client.call_tool("support", {"request": "Can I get a refund for A-1001?"})
        assert not result.is_error
        assert [block.text for block in result.content] == [ANSWER]
        assert result.structured_content["answer"] == ANSWER
        assert len(result.structured_content["run_id"]) >= 8
        wrong = await client.call_tool("support", {"question": "hi"})
        assert wrong.is_error and "request" in wrong.content[0].text


async def test_the_sdk_client_calls_our_agent_over_http(http_url: str) -> None:
    async with Client(http_url) as client:
        first = await client.call_tool("support", {"request": "Refund A-1001?"})
        second = await client.call_tool("support", {"request": "Refund A-1001?"})
    assert [first.content[0].text, second.content[0].text] == [ANSWER, ANSWER]
    # a fresh run (and recording) per call
    assert first.structured_content["run_id"] != second.structured_content["run_id"]


async def test_a_flowchart_is_served_with_its_input_schema() -> None:
    async with Client(_stdio("chart", "stdio")) as client:
        [listed] = (await client.list_tools()).tools
        assert listed.name == "loan_decision"
        assert listed.description == "Score a loan applicant and decide."
        assert listed.input_schema["required"] == ["applicant"]
        approved = await client.call_tool("loan_decision", {"applicant": "Ada"})
        assert approved.content[0].text == "approved"
        assert approved.structured_content["status"] == "done"
        bad = await client.call_tool("loan_decision", {"applicant": 7})
        assert bad.is_error and "applicant" in bad.content[0].text


async def test_our_client_uses_our_served_agent_as_tools_of_another_agent(
        http_url: str) -> None:
    """Both ends ours: the served agent is an MCP tool of a second agent, recorded as one."""
    async with mcp_server(url=http_url) as support:
        assert [t.name for t in support.tools] == ["support"]
        outer = Agent(provider=mock(script=[
            {"tool_calls": [{"name": "support", "args": {"request": "Refund A-1001?"}}]},
            "Refund confirmed."]), tools=support.tools)
        result = await outer.run("Ask support about A-1001")
    [message] = [m for m in result.history if m["role"] == "tool"]
    assert message["content"] == ANSWER


async def test_an_agent_failure_is_a_tool_error_for_the_caller() -> None:
    broken = Agent(provider=mock(script=[]), name="broken")
    async with Client(mcp_app(broken)) as client:  # in-process: the SDK's own transport
        result = await client.call_tool("broken", {"request": "hello"})
    assert result.is_error and "ran out of scripted replies" in result.content[0].text


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.org", "::"])
def test_http_serving_refuses_a_host_other_than_loopback(host: str) -> None:
    agent = Agent(provider=mock(reply="hi"))
    with pytest.raises(ConfigurationError, match=f"host={host!r} is refused.*127.0.0.1"):
        serve_mcp(agent, transport="streamable-http", host=host)


def test_what_cannot_be_served_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="pass an Agent"):
        mcp_app(object())
    with pytest.raises(ConfigurationError, match="transport="):
        serve_mcp(Agent(provider=mock(reply="hi")), transport="sse")  # type: ignore[arg-type]


async def test_serve_mcp_refuses_to_block_a_running_loop() -> None:
    with pytest.raises(ConfigurationError, match="cannot run inside an event loop"):
        serve_mcp(Agent(provider=mock(reply="hi")))
