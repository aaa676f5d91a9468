"""A module-level agent whose every run goes to Celery workers — ``Agent(...,
executor=celery_executor(app))`` — imported by the test (after it sets the fleet's environment)
and by the workers, which find it as ``"celery_agent:agent"``. Its run store is a file in the
directory the test shares with the workers (``AF_FLEET_DIR``)."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from fleet_agents import _respond, effect

from agentfootprint import Agent, Tracing
from agentfootprint.distributed import celery_executor
from agentfootprint.providers import mock
from agentfootprint.runs import RunStore

app = Celery("aftest", broker=os.environ["AGENTFOOTPRINT_BROKER_URL"], set_as_current=False)

agent = Agent(provider=mock(respond=_respond), model="mock", tools=[effect],
              tracing=Tracing(run_store=RunStore(Path(os.environ["AF_FLEET_DIR"]) / "agent.db")),
              executor=celery_executor(app, queue=os.environ["AGENTFOOTPRINT_QUEUE"],
                                       timeout=60))
