"""The Celery app workers start: ``celery -A agentfootprint.distributed.worker worker``.

Configured from the environment, so one command serves every deployment:

* ``AGENTFOOTPRINT_BROKER_URL`` — the broker (default ``redis://localhost:6379/0``);
* ``AGENTFOOTPRINT_RESULT_BACKEND`` — where results go (default: the broker);
* ``AGENTFOOTPRINT_QUEUE`` — the queue served (default ``agentfootprint``; ``celery_executor``
  must send to the same one);
* ``AGENTFOOTPRINT_VISIBILITY_TIMEOUT`` — seconds before a dead worker's message is handed out
  again (default 3600; keep it above the longest run);
* ``AGENTFOOTPRINT_SEAL_KEY`` — a Fernet key: payloads and results cross the broker sealed
  (``celery_executor(seal_key=...)`` must hold the same key).

The agent factories a job names (``"myapp:make_agent"``) must be importable by the worker: start
it where ``myapp`` is on ``PYTHONPATH``.
"""

from __future__ import annotations

import os

from ._celery import DEFAULT_QUEUE, celery_app

app = celery_app(
    os.environ.get("AGENTFOOTPRINT_BROKER_URL", "redis://localhost:6379/0"),
    os.environ.get("AGENTFOOTPRINT_RESULT_BACKEND") or None,
    queue=os.environ.get("AGENTFOOTPRINT_QUEUE", DEFAULT_QUEUE),
    visibility_timeout=float(os.environ.get("AGENTFOOTPRINT_VISIBILITY_TIMEOUT", "3600")),
    seal_key=os.environ.get("AGENTFOOTPRINT_SEAL_KEY") or None)
"""The app ``celery -A agentfootprint.distributed.worker`` finds."""

__all__ = ["app"]
