"""A live event stream (USAGE.md §8), offline: iterate a run's typed events as they happen.

Run: python examples/stream_events.py

``agent.run_stream(...)`` takes the same options as ``agent.run(...)`` and yields, in order,
the context that fired, each tool call and result, the answer's text as it streams (whatever
``stream=`` says), and ``RunFinished`` last. Every event is a Pydantic model: ``event.sse()``
is a Server-Sent Events frame, so a Starlette/FastAPI endpoint is a few lines:

    async def chat(request):
        async def frames():
            async with agent.run_stream(request.query_params["q"]) as run:
                async for event in run:
                    yield event.sse()
        return StreamingResponse(frames(), media_type="text/event-stream")

A client that goes away cancels the run (the ``async with`` is left early).
"""

import asyncio

from agentfootprint import Agent, define_fact, tool
from agentfootprint.events import (
    InjectionFired,
    RunFinished,
    TextDelta,
    ToolCalled,
    ToolReturned,
)
from agentfootprint.providers import mock


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 22°C, sunny"


agent = Agent(
    provider=mock(script=[
        {"tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
        "It is 22°C and sunny in Paris.",
    ]),
    system="You answer weather questions with the weather tool.",
    tools=[weather],
    context=[define_fact(id="units", data="Give temperatures in Celsius.")],
)


async def main() -> None:
    async with agent.run_stream("Weather in Paris?") as run:
        async for event in run:
            match event:
                case InjectionFired():
                    print(f"[injection]   {event.injection_id} -> {event.slot} "
                          f"({event.trigger}, iteration {event.iteration})")
                case ToolCalled():
                    print(f"[tool call]   {event.tool_name} {event.args}")
                    print(event.sse(), end="")
                case ToolReturned():
                    print(f"[tool result] {event.tool_name} -> {event.result}")
                case TextDelta():
                    print(event.text, end="", flush=True)
                case RunFinished():
                    print(f"\n[result]      {event.status}: {event.content!r}")
    print(f"run.result is the RunResult: {run.result.run_id == event.run_id}")


asyncio.run(main())
