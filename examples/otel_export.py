"""OpenTelemetry export: an agent run as GenAI spans, live and from its recording.

Offline: spans go to the OpenTelemetry SDK's in-memory exporter and are printed as a tree. To
send them to Phoenix, Langfuse or any OTLP collector instead, give ``otel()`` a tracer provider
with an ``OTLPSpanExporter`` (or set the global one), or run
``agentfootprint export otel RUN_ID --endpoint http://127.0.0.1:6006/v1/traces``.

Needs ``pip install "agentfootprint[otel]"``. Run: python examples/otel_export.py
"""

import asyncio

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentfootprint import Agent, Tracing, define_fact, tool
from agentfootprint.observe import export_otel, otel
from agentfootprint.providers import mock

SHOWN = ("gen_ai.provider.name", "gen_ai.request.model", "gen_ai.usage.input_tokens",
         "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "gen_ai.tool.name",
         "gen_ai.tool.call.id", "agentfootprint.run_id")


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 22°C, sunny"


def print_tree(spans: tuple[ReadableSpan, ...]) -> None:
    """Each span under its parent, in start order, with its main attributes and events."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        attributes = span.attributes or {}
        shown = ", ".join(f"{key}={attributes[key]}" for key in SHOWN if key in attributes)
        print(f"{'  ' * depth}{span.name}  [{attributes.get('openinference.span.kind')}] {shown}")
        for event in span.events:
            print(f"{'  ' * depth}  * {event.name} {dict(event.attributes or {})}")
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    agent = Agent(
        provider=mock(script=[{"tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
                              "It is 22°C and sunny in Paris."]),
        model="mock", name="forecaster", tools=[weather],
        context=[define_fact(id="units", data="Answer in degrees Celsius.")],
        tracing=Tracing(observe=otel(tracer_provider=provider)),   # live, content off
    )
    result = await agent.run("What's the weather in Paris?")
    print(result.content)
    print("\nLive spans:")
    print_tree(exporter.get_finished_spans())

    exporter.clear()
    count = export_otel(result, tracer_provider=provider)          # the same tree, afterwards
    print(f"\nExported from the recording: {count} spans")
    print_tree(exporter.get_finished_spans())


if __name__ == "__main__":
    asyncio.run(main())
