"""OpenTelemetry export: the span tree, attributes and events of a run, live and from storage.

Spans are read back through the SDK's in-memory exporter; a small OTLP/HTTP receiver on
127.0.0.1 takes what ``agentfootprint export otel`` sends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from agentfootprint import Agent, LLMCall, Tracing, define_fact, tool
from agentfootprint.cli import main as cli
from agentfootprint.compose import Parallel, Sequence
from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import InMemoryStore, MemoryIdentity, define_memory
from agentfootprint.observe import export_otel, otel
from agentfootprint.providers import mock
from agentfootprint.runs import RedactionPolicy, RunStore

CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result", "gen_ai.system_instructions")
SECRET = "Oslo-7f3a-private"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _agent(provider: TracerProvider | None, *, capture: bool = False,
           redaction: RedactionPolicy | None = None, store: RunStore | None = None) -> Agent:
    observe = otel(tracer_provider=provider, capture_content=capture) if provider else None
    return Agent(
        provider=mock(script=[{"tool_calls": [{"name": "weather", "args": {"city": SECRET}}]},
                              "It is sunny."]),
        model="mock", name="helper", tools=[weather],
        context=[define_fact(id="tier", data="This customer is a VIP.")],
        tracing=Tracing(observe=observe, redaction=redaction, run_store=store))


def _tree(finished: tuple[ReadableSpan, ...]) -> list[tuple[Any, ...]]:
    """Each span as (depth, name, parent name, attributes without times, events)."""
    by_id = {s.context.span_id: s for s in finished}
    rows = []
    for span in finished:
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        depth, up = 0, parent
        while up is not None:
            depth += 1
            up = by_id.get(up.parent.span_id) if up.parent is not None else None
        attributes = dict(span.attributes or {})
        rows.append((depth, span.name, parent.name if parent else None,
                     json.dumps(attributes, sort_keys=True, default=list),
                     [(e.name, dict(e.attributes or {})) for e in span.events]))
    return sorted(rows, key=lambda row: (row[0], row[1], row[3]))


def _named(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


async def test_a_live_run_is_an_agent_span_with_chat_and_tool_children(spans: Any) -> None:
    provider, exporter = spans
    result = await _agent(provider).run("What is the weather?")
    finished = exporter.get_finished_spans()
    [root] = _named(finished, "invoke_agent helper")
    assert root.parent is None
    assert root.attributes["agentfootprint.run_id"] == result.run_id
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["openinference.span.kind"] == "AGENT"
    chats = _named(finished, "chat mock")
    [tool_span] = _named(finished, "execute_tool weather")
    assert len(chats) == 2 and len(finished) == 4
    assert all(s.parent.span_id == root.context.span_id for s in [*chats, tool_span])
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.attributes["gen_ai.provider.name"] == "mock"
    assert first.attributes["gen_ai.request.model"] == "mock"
    assert first.attributes["gen_ai.response.model"] == "mock"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    calls = result.usage.calls
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in (first, second)] == [
        c.input_tokens for c in calls]
    assert [s.attributes["gen_ai.usage.output_tokens"] for s in (first, second)] == [
        c.output_tokens for c in calls]
    assert first.attributes["openinference.span.kind"] == "LLM"
    assert tool_span.attributes["gen_ai.tool.name"] == "weather"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool_span.attributes["openinference.span.kind"] == "TOOL"
    assert first.end_time <= tool_span.start_time <= tool_span.end_time <= second.start_time
    assert root.start_time <= first.start_time and second.end_time <= root.end_time
    events = [(e.name, dict(e.attributes or {})) for e in root.events]
    assert ("agentfootprint.context.injected", {"injection_id": "tier", "slot": "system",
                                                "trigger": "always", "iteration": 1}) in events
    routes = [a["chosen"] for n, a in events if n == "agentfootprint.agent.route_decided"]
    assert routes == ["tool-calls", "final"]


async def test_content_is_left_out_by_default(spans: Any) -> None:
    provider, exporter = spans
    await _agent(provider).run("What is the weather?")
    finished = exporter.get_finished_spans()
    for span in finished:
        assert not set(CONTENT_KEYS) & set(span.attributes or {}), span.name
    assert SECRET not in repr(_tree(finished))
    assert "weather?" not in repr(_tree(finished))


async def test_captured_content_is_the_recorded_content(spans: Any) -> None:
    provider, exporter = spans
    await _agent(provider, capture=True).run("What is the weather?")
    finished = exporter.get_finished_spans()
    [tool_span] = _named(finished, "execute_tool weather")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"city": SECRET}
    assert tool_span.attributes["gen_ai.tool.call.result"] == f"sunny in {SECRET}"
    [root] = _named(finished, "invoke_agent helper")
    said = json.loads(root.attributes["gen_ai.input.messages"])
    assert said[0]["role"] == "user" and said[0]["parts"][0]["content"] == "What is the weather?"
    answer = json.loads(root.attributes["gen_ai.output.messages"])
    assert answer[0]["parts"][0]["content"] == "It is sunny."


async def test_captured_content_stays_redacted(spans: Any) -> None:
    provider, exporter = spans
    policy = RedactionPolicy(kinds={"tool_args", "tool_results", "user_text"})
    result = await _agent(provider, capture=True, redaction=policy).run("What is the weather?")
    assert result.content == "It is sunny."
    finished = exporter.get_finished_spans()
    shown = repr(_tree(finished))
    assert SECRET not in shown and "What is the weather?" not in shown
    [tool_span] = _named(finished, "execute_tool weather")
    assert "[REDACTED]" in tool_span.attributes["gen_ai.tool.call.arguments"]


async def test_an_export_of_the_stored_run_has_the_live_spans(spans: Any,
                                                              tmp_path: Path) -> None:
    provider, exporter = spans
    with RunStore(tmp_path / "runs.db") as store:
        result = await _agent(provider, capture=True, store=store).run("What is the weather?")
        live = _tree(exporter.get_finished_spans())
        exporter.clear()
        count = export_otel(store.load(result.run_id), tracer_provider=provider,
                            capture_content=True)
    exported = _tree(exporter.get_finished_spans())
    assert count == len(exported) == 4
    assert exported == live


async def test_a_composition_is_a_workflow_span_over_its_members(spans: Any) -> None:
    provider, exporter = spans
    pipeline = Sequence(
        ("classify", LLMCall(provider=mock(reply="urgent"), name="classify")),
        ("review", Parallel(("legal", LLMCall(provider=mock(reply="ok"), name="legal")),
                            ("ethics", LLMCall(provider=mock(reply="fine"), name="ethics")))))
    result = await pipeline.run("refund?")
    assert export_otel(result, tracer_provider=provider) == 8
    rows = _tree(exporter.get_finished_spans())
    shape = sorted((depth, name, parent) for depth, name, parent, _, _ in rows)
    assert shape == [
        (0, "invoke_workflow Sequence", None),
        (1, "invoke_agent classify", "invoke_workflow Sequence"),
        (1, "invoke_workflow review", "invoke_workflow Sequence"),
        (2, "chat mock", "invoke_agent classify"),
        (2, "invoke_agent ethics", "invoke_workflow review"),
        (2, "invoke_agent legal", "invoke_workflow review"),
        (3, "chat mock", "invoke_agent ethics"),
        (3, "chat mock", "invoke_agent legal"),
    ]
    [root] = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["agentfootprint.run_id"] == result.run_id


async def test_memory_reads_and_writes_are_spans(spans: Any) -> None:
    provider, exporter = spans
    agent = Agent(provider=mock(reply="noted"), model="mock", name="memo",
                  memory=[define_memory(type="episodic", strategy="window", keep_turns=4,
                                        store=InMemoryStore())],
                  identity=MemoryIdentity(conversation_id="c1"),
                  tracing=Tracing(observe=otel(tracer_provider=provider)))
    await agent.run("remember this")
    finished = exporter.get_finished_spans()
    [read] = _named(finished, "retrieval episodic")
    [write] = _named(finished, "memory_write episodic")
    assert read.attributes["gen_ai.operation.name"] == "retrieval"
    assert read.attributes["gen_ai.data_source.id"] == "episodic"
    assert read.attributes["openinference.span.kind"] == "RETRIEVER"
    [root] = _named(finished, "invoke_agent memo")
    assert root.attributes["gen_ai.conversation.id"] == "c1"
    [chat] = _named(finished, "chat mock")
    assert read.end_time <= chat.start_time and chat.end_time <= write.start_time
    assert [e.name for e in write.events] == ["agentfootprint.memory.written"]
    assert write.events[0].attributes["ids"] == ("msg-1-0", "msg-1-1")


async def test_a_failed_run_ends_its_span_in_error(spans: Any) -> None:
    provider, exporter = spans
    agent = Agent(provider=mock(script=[]), model="mock", name="broken",
                  tracing=Tracing(observe=otel(tracer_provider=provider)))
    with pytest.raises(ConfigurationError):
        await agent.run("hello")
    [root] = _named(exporter.get_finished_spans(), "invoke_agent broken")
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["agentfootprint.status"] == "failed"
    assert "ran out" not in (root.status.description or "")  # error text is content


def test_otel_refuses_what_is_not_a_tracer_provider() -> None:
    with pytest.raises(ConfigurationError, match="not a tracer provider"):
        otel(tracer_provider=object())
    with pytest.raises(ConfigurationError, match="Recording, RunResult or FlowRun"):
        export_otel("run-1")


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_cli_export_otel_sends_a_stored_run_over_otlp_http(tmp_path: Path,
                                                           capsys: Any) -> None:
    store_path = tmp_path / "runs.db"
    with RunStore(store_path) as store:
        result = _agent(None, store=store).run_sync("What is the weather?")
    _Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1/traces"
        status = cli(["export", "otel", result.run_id, "--store", str(store_path),
                      "--endpoint", url])
    finally:
        server.shutdown()
        server.server_close()
    assert status == 0
    assert capsys.readouterr().out.strip() == f"run {result.run_id}: 4 span(s) sent to {url}"
    names = sorted(span.name for request in _Receiver.received
                   for resource in request.resource_spans for scope in resource.scope_spans
                   for span in scope.spans)
    assert names == ["chat mock", "chat mock", "execute_tool weather", "invoke_agent helper"]
    assert status == 0 and cli(["export", "otel", "nope", "--store", str(store_path),
                                "--endpoint", url]) == 1


async def test_a_composition_with_a_traced_member_is_traced_live_as_one_run(spans: Any) -> None:
    provider, exporter = spans
    pipeline = Sequence(
        ("classify", LLMCall(provider=mock(reply="urgent"), name="classify")),
        ("answer", _agent(provider)))
    result = await pipeline.run("What is the weather?")
    live = _tree(exporter.get_finished_spans())
    assert [row[:3] for row in live if row[0] < 2] == [
        (0, "invoke_workflow Sequence", None),
        (1, "invoke_agent answer", "invoke_workflow Sequence"),
        (1, "invoke_agent classify", "invoke_workflow Sequence")]
    assert len(live) == 7  # the root, two agents, three chats and the tool call
    exporter.clear()
    export_otel(result, tracer_provider=provider)
    assert _tree(exporter.get_finished_spans()) == live


async def test_an_agent_used_as_a_tool_is_nested_under_its_tool_call(spans: Any) -> None:
    provider, exporter = spans
    inner = _agent(None)
    outer = Agent(
        provider=mock(script=[{"tool_calls": [{"name": "forecast",
                                               "args": {"request": "weather?"}}]}, "Sunny."]),
        model="mock", name="desk", tools=[inner.as_tool(name="forecast",
                                                        description="Ask the forecaster.")],
        tracing=Tracing(observe=otel(tracer_provider=provider)))
    result = await outer.run("Weather?")
    live = _tree(exporter.get_finished_spans())
    shape = sorted(row[:3] for row in live)
    assert shape == [
        (0, "invoke_agent desk", None),
        (1, "chat mock", "invoke_agent desk"),
        (1, "chat mock", "invoke_agent desk"),
        (1, "execute_tool forecast", "invoke_agent desk"),
        (2, "invoke_agent helper", "execute_tool forecast"),
        (3, "chat mock", "invoke_agent helper"),
        (3, "chat mock", "invoke_agent helper"),
        (3, "execute_tool weather", "invoke_agent helper")]
    finished = exporter.get_finished_spans()
    [call] = _named(finished, "execute_tool forecast")
    [nested] = _named(finished, "invoke_agent helper")
    assert call.attributes["agentfootprint.sub_run_id"] == nested.attributes[
        "agentfootprint.run_id"] != result.run_id
    exporter.clear()
    export_otel(result, tracer_provider=provider)
    assert _tree(exporter.get_finished_spans()) == live


MCP_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("orders", log_level="WARNING")


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: delivered"


server.run("stdio")
'''


async def test_an_mcp_tool_span_names_its_server(spans: Any, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import sys

    from agentfootprint.tools import mcp_server

    provider, exporter = spans
    script = tmp_path / "orders_server.py"
    script.write_text(MCP_SERVER)
    async with mcp_server(command=[sys.executable, str(script)]) as orders:
        agent = Agent(
            provider=mock(script=[{"tool_calls": [{"name": "lookup_order",
                                                   "args": {"order_id": "A-1"}}]}, "Delivered."]),
            model="mock", name="support", tools=orders.tools,
            tracing=Tracing(observe=otel(tracer_provider=provider)))
        await agent.run("Where is A-1?")
    [span] = _named(exporter.get_finished_spans(), "execute_tool lookup_order")
    assert span.attributes["agentfootprint.mcp.server"] == "orders"
    assert span.attributes["agentfootprint.mcp.tool"] == "lookup_order"
    assert span.attributes["gen_ai.tool.type"] == "extension"


async def test_a_paused_run_ends_its_trace_and_the_resumed_run_starts_one(spans: Any) -> None:
    from agentfootprint import check_in_approved

    @tool(check_in=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    provider, exporter = spans
    agent = Agent(
        provider=mock(script=[{"tool_calls": [{"name": "refund", "args": {"order_id": "A-1"}}]},
                              "Refunded."]),
        model="mock", name="clerk", tools=[refund],
        tracing=Tracing(observe=otel(tracer_provider=provider)))
    paused = await agent.run("Refund A-1")
    assert paused.paused
    [first] = _named(exporter.get_finished_spans(), "invoke_agent clerk")
    assert first.attributes["agentfootprint.status"] == "paused"
    [waiting] = _named(exporter.get_finished_spans(), "execute_tool refund")
    assert waiting.attributes["agentfootprint.tool.status"] == "paused"
    exporter.clear()
    done = await agent.resume(paused.checkpoint, check_in_approved(by="ops"))
    assert done.content == "Refunded."
    finished = exporter.get_finished_spans()
    [second] = [s for s in finished if s.parent is None]
    assert second.name == "invoke_agent clerk"
    assert second.attributes["agentfootprint.resumed"] is True
    assert second.attributes["agentfootprint.status"] == "done"
    assert second.attributes["agentfootprint.run_id"] == paused.run_id
    assert "chat mock" in [s.name for s in finished]
