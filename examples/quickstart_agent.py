"""First agent, offline (USAGE.md §1): a scripted model calls a weather tool, then answers.

Run: python examples/quickstart_agent.py
Swap ``mock(...)`` for ``openai(model="gpt-4o-mini")`` to use a real model: the agent names no
model of its own, so it asks for the provider's (USAGE writes ``model="mock"``, which works too).
"""

import asyncio

from agentfootprint import Agent, tool
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
)

result = asyncio.run(agent.run("Weather in Paris?"))
print(result.content)
print(result.run_id)
print(result.narrative())
