"""A real model for the e2e tests: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server.

One server does both things the tests need: forced tool calls, and token usage on streamed calls
(``.ci/llm_server.py`` adds the latter). It lives in its own virtualenv (``.ci/venvs/llm``, built by
``.ci/llm-server.sh install``), so its FastAPI and Starlette pins never meet ours.

``llm_base_url`` is ``$AGENTFOOTPRINT_LLM_BASE_URL`` when set (CI starts the server with
``.ci/llm-server.sh start``); otherwise the fixture starts the server itself with that same script
on a free port and stops it when the session ends, so ``pytest tests/e2e`` works on its own.
Without the server's virtualenv the tests are skipped locally, but fail under CI: CI must never
skip them.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "llm-server.sh"
SERVER_PYTHON = Path(os.environ.get("LLM_PYTHON", ROOT / ".ci/venvs/llm/bin/python"))
INSTALL = ".ci/llm-server.sh install"
MODEL = "smollm2"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI never skips the e2e tests)", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def llm_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The configured base URL, or a server started (and stopped) for the session."""
    if importlib.util.find_spec("openai") is None:
        _unavailable('the openai SDK is not installed: pip install -e ".[dev]"')
    configured = os.environ.get("AGENTFOOTPRINT_LLM_BASE_URL")
    if configured:
        yield configured.rstrip("/")
        return
    if not SERVER_PYTHON.exists():
        _unavailable(f"the local model server is not installed ({SERVER_PYTHON}): {INSTALL}")
    port = _free_port()
    env = {**os.environ, "LLM_PYTHON": str(SERVER_PYTHON), "AGENTFOOTPRINT_LLM_PORT": str(port),
           "LLM_SERVER_STATE_DIR": str(tmp_path_factory.mktemp("llm-server"))}
    started = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True,
                             timeout=300, check=False)
    if started.returncode != 0:
        pytest.fail(f"could not start the local LLM server:\n{started.stdout}{started.stderr}",
                    pytrace=False)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, text=True,
                       timeout=60, check=False)
