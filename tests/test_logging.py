"""``logging``: a run speaks under ``agentfootprint.*``, masked as recorded, free when off."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentfootprint import Agent, ProviderError, Tracing, tool
from agentfootprint.events import _logging as run_logging
from agentfootprint.flow._redact import REDACTED
from agentfootprint.providers import mock, with_fallback, with_retry
from agentfootprint.runs import RedactionPolicy

SECRET = "sk-live-LOGS-0123456789"


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


def _agent(**options: Any) -> Agent:
    provider = mock(script=[{"tool_calls": [{"name": "lookup", "args": {"order_id": "A-1"}}]},
                            "It shipped."])
    return Agent(provider=options.pop("provider", provider), tools=[lookup], **options)


def _lines(caplog: pytest.LogCaptureFixture, logger: str, level: int | None = None) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == logger and (level is None or r.levelno == level)]


def test_the_package_logger_has_a_null_handler() -> None:
    """The library never configures logging: a NullHandler, no level, no other handler."""
    package = logging.getLogger("agentfootprint")
    assert any(isinstance(h, logging.NullHandler) for h in package.handlers)
    assert all(isinstance(h, logging.NullHandler) for h in package.handlers)


async def test_a_run_logs_its_start_end_llm_calls_and_tool_calls(
        caplog: pytest.LogCaptureFixture) -> None:
    """At INFO: run started/ended (agent), each LLM call answered (providers), each tool call
    (tools); at DEBUG also the call shapes, the tool's arguments and result, other events."""
    caplog.set_level(logging.DEBUG, logger="agentfootprint")
    result = await _agent().run("Where is A-1?")
    agent = _lines(caplog, "agentfootprint.agent", logging.INFO)
    assert agent[0].endswith(f"run {result.run_id} started")
    assert agent[1].endswith(f"run {result.run_id} turn 1: 'Where is A-1?'")
    assert f"run {result.run_id} ended after 2 iteration(s)" in agent[-1]
    calls = _lines(caplog, "agentfootprint.providers", logging.INFO)
    assert len(calls) == 2 and all("(model mock) answered" in c for c in calls)
    assert "1 tool call(s)" in calls[0] and "stop tool_use" in calls[0]
    tools = _lines(caplog, "agentfootprint.tools")
    assert any(t.endswith("tool lookup (call_1) success") for t in tools)
    assert any('called with {"order_id": "A-1"}' in t for t in tools)
    assert any("result: 'order A-1 shipped'" in t for t in tools)
    debug = _lines(caplog, "agentfootprint.agent", logging.DEBUG)
    assert any("agent.route_decided" in d for d in debug)
    assert any("answer: 'It shipped.'" in d for d in debug)


async def test_info_leaves_the_text_out(caplog: pytest.LogCaptureFixture) -> None:
    """INFO says what happened; answers, arguments and results are DEBUG only."""
    caplog.set_level(logging.INFO, logger="agentfootprint")
    await _agent().run("Where is A-1?")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "order A-1 shipped" not in text and "It shipped." not in text
    assert all(r.levelno >= logging.INFO for r in caplog.records)


async def test_retries_and_fallbacks_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A retried 503 is INFO under agentfootprint.providers; a fallback is a WARNING."""
    caplog.set_level(logging.INFO, logger="agentfootprint")

    async def no_wait(delay: float) -> None:
        return None

    flaky = mock(script=[ProviderError("busy", provider="mock", status=503), "fine"])
    await Agent(provider=with_retry(flaky, sleep=no_wait)).run("hi")
    retried = [line for line in _lines(caplog, "agentfootprint.providers")
               if "attempt 2 of 3" in line]
    assert len(retried) == 1 and "status 503" in retried[0]
    caplog.clear()
    down = mock(script=[ProviderError("down", provider="mock", status=500)])
    await Agent(provider=with_fallback(down, mock(reply="spare"))).run("hi")
    warned = _lines(caplog, "agentfootprint.providers", logging.WARNING)
    assert len(warned) == 1 and "falling back" in warned[0]


async def test_a_failed_run_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The run's end is logged when it fails too, with the error."""
    caplog.set_level(logging.INFO, logger="agentfootprint")
    with pytest.raises(ProviderError):
        await Agent(provider=mock(script=[ProviderError("boom", provider="mock",
                                                          status=400)])).run("hi")
    assert any("failed: " in line and "boom" in line
               for line in _lines(caplog, "agentfootprint.agent"))


async def test_logs_are_masked_as_the_recording_is(caplog: pytest.LogCaptureFixture) -> None:
    """Under a RedactionPolicy the secret in the message and the tool arguments is logged as
    the mask, at every level (tests/test_leaks.py checks every form of it)."""
    caplog.set_level(logging.DEBUG, logger="agentfootprint")
    provider = mock(script=[{"tool_calls": [{"name": "lookup", "args": {"order_id": SECRET}}]},
                            "Done."])
    agent = _agent(provider=provider, tracing=Tracing(
        redaction=RedactionPolicy(kinds=frozenset({"user_text", "tool_args"}))))
    await agent.run(f"My key is {SECRET}")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET not in text
    assert REDACTED in text and "tool lookup" in text


async def test_no_logger_listening_costs_no_recorder(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every agentfootprint logger above INFO, a run attaches no logging recorder (the
    check is a few isEnabledFor calls); enabling one attaches exactly one per run."""
    made: list[str] = []

    class Counting(run_logging.RunLogger):
        def __init__(self, name: str) -> None:
            made.append(name)
            super().__init__(name)

    monkeypatch.setattr(run_logging, "RunLogger", Counting)
    package = logging.getLogger("agentfootprint")
    level = package.level
    try:
        package.setLevel(logging.WARNING)
        assert run_logging.run_loggers("a") == []
        await _agent().run("hi")
        assert made == []
        logging.getLogger("agentfootprint.tools").setLevel(logging.INFO)
        await _agent().run("hi")
        assert made == ["Agent"]
    finally:
        package.setLevel(level)
        logging.getLogger("agentfootprint.tools").setLevel(logging.NOTSET)


async def test_a_composition_logs_its_run_and_its_members_calls(
        caplog: pytest.LogCaptureFixture) -> None:
    """A Sequence logs its own start and end, and every member's LLM calls."""
    from agentfootprint.compose import Sequence

    caplog.set_level(logging.INFO, logger="agentfootprint")
    pipeline = Sequence(("writer", Agent(provider=mock(reply="draft"))),
                        ("editor", Agent(provider=mock(reply="final"))))
    result = await pipeline.run("write")
    agent = _lines(caplog, "agentfootprint.agent")
    assert any(f"run {result.run_id} started" in line for line in agent)
    assert any(f"run {result.run_id} ended" in line for line in agent)
    assert len(_lines(caplog, "agentfootprint.providers")) == 2
