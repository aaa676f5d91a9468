"""A paused run's resume state sealed with the host's key (``RedactionPolicy(seal_key=...)``).

The resume state of a paused checkpoint (``flow.state``/``args``/``frames``) holds the paused
call's real arguments. With a key it travels as one Fernet token that only an agent holding
the key opens — in another process too; a missing key, another key, a changed token or a
token from another run is refused before anything runs. Without a key it stays plain JSON,
as the docs say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from agentfootprint import Agent, Tracing, check_in_approved, tool
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.runs import RedactionPolicy

SECRET = "sk-live-SEAL-0123456789"
KEY = Fernet.generate_key()


def _agent(saw: list[str], key: bytes | str | None = KEY, *, policy: bool = True) -> Agent:
    @tool(check_in=True)
    def save_key(key: str) -> str:
        """Save an API key in the vault."""
        saw.append(key)
        return "saved"

    calls = {"n": 0}

    def respond(request: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            return {"tool_calls": [{"name": "save_key", "args": {"key": SECRET}}]}
        return "Saved."

    redaction = RedactionPolicy(kinds={"user_text", "tool_args"}, seal_key=key) if policy \
        else None
    return Agent(provider=mock(respond=respond), model="mock", tools=[save_key],
                 tracing=Tracing(redaction=redaction))


def _paused(key: bytes | str | None = KEY, message: str = "save my key") -> dict[str, Any]:
    result = _agent([], key).run_sync(message)
    assert result.paused
    stored: dict[str, Any] = json.loads(json.dumps(result.checkpoint))  # as it would be
    return stored


def _resume_with(checkpoint: dict[str, Any], key: bytes | str | None = KEY) -> list[str]:
    saw: list[str] = []
    again = _agent(saw, key)
    again.spec.provider = mock(respond=lambda request: "Saved.")
    result = again.resume_sync(checkpoint, check_in_approved(by="ops"))
    assert result.content == "Saved."
    return saw


def test_a_keyed_checkpoint_holds_no_resume_state_in_the_clear() -> None:
    checkpoint = _paused()
    flow = checkpoint["flow"]
    assert {"state", "args", "frames"}.isdisjoint(flow)
    assert isinstance(flow["sealed"], str)
    assert SECRET not in json.dumps(checkpoint)
    assert flow["paused_stage"] and flow["log"]  # the record parts stay readable


def test_resume_with_the_same_key_runs_the_real_arguments() -> None:
    assert _resume_with(_paused()) == [SECRET]


def test_a_str_key_seals_and_opens_like_its_bytes() -> None:
    assert _resume_with(_paused(KEY.decode()), KEY) == [SECRET]


def test_resume_in_another_process_with_the_key(tmp_path: Path) -> None:
    """The host keeps the checkpoint and the key; a fresh process resumes the approved call."""
    (tmp_path / "checkpoint.json").write_text(json.dumps(_paused()))
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent('''
        import json, os, sys
        from agentfootprint import Agent, Tracing, check_in_approved, tool
        from agentfootprint.providers import mock
        from agentfootprint.runs import RedactionPolicy

        saw = []

        @tool(check_in=True)
        def save_key(key: str) -> str:
            """Save an API key in the vault."""
            saw.append(key)
            return "saved"

        policy = RedactionPolicy(kinds={"user_text", "tool_args"},
                                 seal_key=os.environ["SEAL_KEY"])
        agent = Agent(provider=mock(respond=lambda request: "Saved."), model="mock",
                      tools=[save_key], tracing=Tracing(redaction=policy))
        checkpoint = json.loads(open(sys.argv[1]).read())
        result = agent.resume_sync(checkpoint, check_in_approved(by="ops"))
        print(json.dumps({"saw": saw, "content": result.content}))
    '''))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "checkpoint.json")],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "SEAL_KEY": KEY.decode()})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"saw": [SECRET],
                                                                 "content": "Saved."}


def test_another_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"another key.*seal_key=KEY"):
        _resume_with(_paused(), Fernet.generate_key())


def test_no_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="sealed and this agent has no key"):
        _resume_with(_paused(), None)


def test_an_agent_without_a_policy_refuses_a_sealed_checkpoint() -> None:
    saw: list[str] = []
    with pytest.raises(ConfigurationError, match="no key"):
        _agent(saw, policy=False).resume_sync(_paused(), check_in_approved(by="ops"))
    assert saw == []


def test_a_changed_token_is_refused() -> None:
    checkpoint = _paused()
    token = checkpoint["flow"]["sealed"]
    middle = len(token) // 2
    checkpoint["flow"]["sealed"] = token[:middle] + ("A" if token[middle] != "A" else "B") \
        + token[middle + 1:]
    with pytest.raises(ConfigurationError, match="changed after it was written"):
        _resume_with(checkpoint)
    checkpoint["flow"]["sealed"] = "not a token ü"
    with pytest.raises(ConfigurationError, match="changed after it was written"):
        _resume_with(checkpoint)


def test_a_token_from_another_paused_run_is_refused() -> None:
    checkpoint, other = _paused(), _paused(message="another request")
    checkpoint["flow"]["sealed"] = other["flow"]["sealed"]
    with pytest.raises(ConfigurationError, match="another paused run"):
        _resume_with(checkpoint)


def test_a_keyed_agent_refuses_an_unsealed_resume_state() -> None:
    """With a key the resume state is authenticated: plain (forgeable) values are refused."""
    with pytest.raises(ConfigurationError, match="not sealed"):
        _resume_with(_paused(None))


def test_without_a_key_the_resume_state_holds_the_real_arguments() -> None:
    """As documented on RunResult.checkpoint and RedactionPolicy.seal_key."""
    checkpoint = _paused(None)
    flow = checkpoint["flow"]
    assert "sealed" not in flow
    assert SECRET in json.dumps(flow["state"])
    assert SECRET not in json.dumps({k: v for k, v in flow.items() if k != "state"})
    assert _resume_with(checkpoint, None) == [SECRET]


def test_without_a_policy_nothing_changes() -> None:
    saw: list[str] = []
    result = _agent(saw, policy=False).run_sync("save my key")
    flow = result.checkpoint["flow"]
    assert "sealed" not in flow and SECRET in json.dumps(flow["state"])
    again = _agent(saw, policy=False)
    again.spec.provider = mock(respond=lambda request: "Saved.")
    resumed = again.resume_sync(json.loads(json.dumps(result.checkpoint)),
                                check_in_approved(by="ops"))
    assert resumed.content == "Saved."
    assert saw == [SECRET]


def test_the_key_is_checked_when_the_policy_is_built_and_never_shown() -> None:
    with pytest.raises(ConfigurationError, match=r"not a Fernet key.*generate_key"):
        RedactionPolicy(kinds={"tool_args"}, seal_key="short")
    policy = RedactionPolicy(kinds={"tool_args"}, seal_key=KEY)
    assert KEY.decode() not in repr(policy) + json.dumps(policy.report())


def test_a_missing_cryptography_package_names_the_extra(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.fernet", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[seal\]"'):
        RedactionPolicy(kinds={"tool_args"}, seal_key=KEY)
