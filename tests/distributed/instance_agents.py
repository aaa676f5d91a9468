"""Agents assigned at module level, found by reference (``"instance_agents:AGENT"``) by the
executors of the tests: in this process, and on the Celery workers that import this module."""

from __future__ import annotations

from fleet_agents import _respond, effect

from agentfootprint import Agent
from agentfootprint.providers import mock

AGENT = Agent(provider=mock(respond=_respond), model="mock", tools=[effect], name="effects")
"""One tool call (the counted side effect), then ``done: <message>`` (as ``make_agent``)."""

SCRIPTED = Agent(provider=mock(script=["first", "second"]), model="mock", name="scripted")
"""A scripted model: each run of a job starts the script afresh (the provider is forked)."""
