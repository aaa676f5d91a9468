"""A traced agent run reaches a real Arize Phoenix over OTLP/HTTP and reads back through its API.

``.ci/run`` starts Phoenix (``.ci/phoenix-server.sh``, its own virtualenv, 127.0.0.1) and sets
``AGENTFOOTPRINT_PHOENIX_URL``; without it these tests are skipped (and fail under CI). Spans are
read back through Phoenix's REST API (``GET /v1/projects/{project}/spans``), which also says how
Phoenix classified each span (``span_kind``: AGENT, LLM, TOOL).
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

PHOENIX = os.environ.get("AGENTFOOTPRINT_PHOENIX_URL", "").rstrip("/")


@pytest.fixture
def phoenix() -> str:
    if not PHOENIX:
        reason = ("AGENTFOOTPRINT_PHOENIX_URL is not set: start Arize Phoenix with "
                  ".ci/phoenix-server.sh install && .ci/phoenix-server.sh start and export "
                  "its URL")
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI never skips the e2e tests)", pytrace=False)
        pytest.skip(reason)
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    return PHOENIX


def _spans(base: str, project: str, run_id: str, *, want: int) -> list[dict[str, Any]]:
    """The spans of the trace whose root carries ``run_id``, once Phoenix has ``want`` of them."""
    url = f"{base}/v1/projects/{urllib.parse.quote(project)}/spans?limit=1000"
    deadline = time.monotonic() + 60
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                spans = json.load(reply)["data"]
        except urllib.error.HTTPError as exc:  # the project appears with its first span
            if exc.code != 404:
                raise
            spans = []
        roots = [s for s in spans if s["attributes"].get("agentfootprint.run_id") == run_id]
        if roots:
            trace_id = roots[0]["context"]["trace_id"]
            found = [s for s in spans if s["context"]["trace_id"] == trace_id]
            if len(found) >= want:
                return found
        time.sleep(0.5)
    raise AssertionError(f"Phoenix at {base} holds {len(found)} span(s) of run {run_id} in "
                         f"project {project!r} after 60 s, not {want}")


def _agent(**tracing: Any) -> Any:
    from agentfootprint import Agent, Tracing, define_fact, tool
    from agentfootprint.providers import mock

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return Agent(
        provider=mock(script=[{"tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]},
                              "It is sunny in Oslo."]),
        model="mock", name="forecaster", tools=[weather],
        context=[define_fact(id="vip-tier", data="This customer is a VIP.")],
        tracing=Tracing(**tracing))


def _check(spans: list[dict[str, Any]], run_id: str) -> None:
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    [root] = by_name["invoke_agent forecaster"]
    chats = by_name["chat mock"]
    [tool_span] = by_name["execute_tool weather"]
    assert len(spans) == 4 and len(chats) == 2
    assert root["parent_id"] is None
    assert root["span_kind"] == "AGENT"
    assert root["attributes"]["agentfootprint.run_id"] == run_id
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.agent.name"] == "forecaster"
    root_id = root["context"]["span_id"]
    assert all(s["parent_id"] == root_id for s in [*chats, tool_span])
    for chat in chats:
        assert chat["span_kind"] == "LLM"
        attributes = chat["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "mock"
        assert attributes["gen_ai.request.model"] == "mock"
        assert attributes["gen_ai.response.model"] == "mock"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.usage.output_tokens" in attributes
    assert sorted(c["attributes"]["gen_ai.response.finish_reasons"][0] for c in chats) == [
        "stop", "tool_call"]
    assert tool_span["span_kind"] == "TOOL"
    assert tool_span["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tool_span["attributes"]["gen_ai.tool.name"] == "weather"
    assert tool_span["attributes"]["gen_ai.tool.call.id"] == "call_1"
    injected = [e for e in root["events"] if e["name"] == "agentfootprint.context.injected"]
    assert injected and injected[0]["attributes"]["injection_id"] == "vip-tier"
    assert injected[0]["attributes"]["slot"] == "system"
    routes = [e["attributes"]["chosen"] for e in root["events"]
              if e["name"] == "agentfootprint.agent.route_decided"]
    assert routes == ["tool-calls", "final"]
    assert "Oslo" not in json.dumps(spans)  # content capture is off by default


async def test_a_live_run_reaches_phoenix_as_agent_llm_and_tool_spans(phoenix: str) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from agentfootprint.observe import otel

    project = f"agentfootprint-e2e-{uuid.uuid4().hex[:8]}"
    provider = TracerProvider(resource=Resource.create({
        "service.name": "agentfootprint-e2e", "openinference.project.name": project}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=f"{phoenix}/v1/traces")))
    try:
        result = await _agent(observe=otel(tracer_provider=provider)).run("Weather in Oslo?")
        assert provider.force_flush(30_000)
    finally:
        provider.shutdown()
    _check(_spans(phoenix, project, result.run_id, want=4), result.run_id)


def test_cli_export_of_a_stored_run_reaches_phoenix(phoenix: str, tmp_path: Path) -> None:
    from agentfootprint.cli import main as cli
    from agentfootprint.runs import RunStore

    with RunStore(tmp_path / "runs.db") as store:
        result = _agent(run_store=store).run_sync("Weather in Oslo?")
    status = cli(["export", "otel", result.run_id, "--store", str(tmp_path / "runs.db"),
                  "--endpoint", f"{phoenix}/v1/traces"])
    assert status == 0
    _check(_spans(phoenix, "default", result.run_id, want=4), result.run_id)
