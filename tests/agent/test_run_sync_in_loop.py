"""``run_sync`` inside a running event loop (a notebook cell): it runs, it does not deadlock.

Each test calls ``run_sync`` from inside ``asyncio.run(...)``, as a Jupyter cell does under
the kernel's loop, and guards against a deadlock by running the scenario on a thread it joins
with a timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from agentfootprint import Agent, ProviderError, tool
from agentfootprint.flow import flow_chart
from agentfootprint.providers import LLMRequest, mock

T = TypeVar("T")
WHO: contextvars.ContextVar[str] = contextvars.ContextVar("WHO", default="nobody")


def in_a_running_loop(scenario: Callable[[], T], timeout: float = 30.0) -> T:
    """``scenario()`` called inside ``asyncio.run`` (on a thread joined with ``timeout``, so a
    deadlock fails the test instead of hanging it)."""
    outcome: list[Any] = []

    async def cell() -> T:
        asyncio.get_running_loop()  # the point: a loop is running here
        return scenario()

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(cell())))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"run_sync inside a running loop hung for {timeout}s"
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


def test_agent_run_sync_inside_a_running_loop_returns_the_result() -> None:
    """The notebook case: a turn runs to completion and its result comes back."""
    provider = mock(script=["Sunny.", "Bye."])
    agent = Agent(provider=provider)

    def cell() -> tuple[str, str]:
        first = agent.run_sync("Weather?").content
        return first, agent.follow_up_sync("Thanks").content

    assert in_a_running_loop(cell) == ("Sunny.", "Bye.")
    assert provider.requests[-1].messages[-1] == {"role": "user", "content": "Thanks"}


def test_calls_share_one_worker_loop_and_carry_context_variables() -> None:
    """Consecutive calls run on one worker loop (an SDK client bound to it keeps working),
    never the caller's; the caller's context variables are visible inside the run."""
    seen: list[tuple[asyncio.AbstractEventLoop, int, str]] = []

    def respond(request: LLMRequest) -> str:
        seen.append((asyncio.get_running_loop(), threading.get_ident(), WHO.get()))
        return "ok"

    agent = Agent(provider=mock(respond=respond))

    def cell() -> int:
        WHO.set("the notebook")
        agent.run_sync("one")
        agent.run_sync("two")
        return threading.get_ident()

    caller = in_a_running_loop(cell)
    assert len(seen) == 2 and seen[0][0] is seen[1][0]
    assert all(thread != caller for _, thread, _ in seen)
    assert [who for _, _, who in seen] == ["the notebook", "the notebook"]


def test_errors_come_back_as_themselves() -> None:
    """A provider failure inside the worker is raised to the caller unchanged."""
    agent = Agent(provider=mock(script=[ProviderError("quota", provider="mock", status=400)]))
    with pytest.raises(ProviderError, match="quota") as caught:
        in_a_running_loop(lambda: agent.run_sync("hi"))
    assert caught.value.status == 400


def test_a_sync_call_inside_a_sync_call_does_not_deadlock() -> None:
    """A tool that itself calls another agent's run_sync, under an outer run_sync made inside
    a running loop: both finish."""
    inner = Agent(provider=mock(reply="inner answer"))

    @tool
    def ask_inner(question: str) -> str:
        """Ask the inner agent."""
        return inner.run_sync(question).content

    @tool
    async def ask_inner_async(question: str) -> str:
        """Ask the inner agent from an async tool (on the worker loop itself)."""
        return inner.run_sync(question).content

    outer = Agent(provider=mock(script=[
        {"tool_calls": [{"name": "ask_inner", "args": {"question": "q"}},
                        {"name": "ask_inner_async", "args": {"question": "q"}}]}, "done"]),
        tools=[ask_inner, ask_inner_async])
    result = in_a_running_loop(lambda: outer.run_sync("go"))
    assert result.content == "done"
    tool_messages = [m for m in result.history if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["inner answer", "inner answer"]


def test_a_flowchart_run_sync_inside_a_running_loop() -> None:
    """The same helper serves every *_sync twin: a plain chart runs too."""
    chart = flow_chart("Double", lambda scope: scope.args["v"] * 2).build()
    run = in_a_running_loop(lambda: chart.run_sync({"v": 21}))
    assert (run.output, run.status) == (42, "done")


async def test_inside_a_pytest_asyncio_loop_too() -> None:
    """Directly inside an async test (the loop pytest runs): no refusal, the answer."""
    assert Agent(provider=mock(reply="fine")).run_sync("hi").content == "fine"
