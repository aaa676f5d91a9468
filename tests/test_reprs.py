"""Short reprs and notebook HTML for RunResult and the explanation results.

A repr is one line of at most 120 characters whatever the run did; ``_repr_html_`` is a small
summary with every value escaped (a ``<script>`` in an answer is shown, never run).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint import Agent, Limits, Tracing, define_fact, tool
from agentfootprint.explain import (
    backtrack,
    find_dropped_context,
    localize_context_bug,
    recorded_chat,
)
from agentfootprint.explain._whatif import bisect_culprits, rerun_without_sources
from agentfootprint.flow._display import REPR_WIDTH, html_summary, short_repr
from agentfootprint.flow._redact import REDACTED
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.runs import RedactionPolicy

PAYLOAD = "<script>alert('x')</script>"
WRONG = f"{PAYLOAD} BUY everything now."


def _model(request: LLMRequest) -> str:
    return WRONG if "TIP" in (request.system or "") else "HOLD: nothing new."


def _agent(without: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
    facts = [define_fact(id="tip", data="TIP: an insider says buy."),
             define_fact(id="weather", data="The weather is mild.")]
    return Agent(provider=mock(respond=_model), model="m",
                 context=[f for f in facts if f.id not in without])


def _is_wrong(answer: str) -> bool:
    return "BUY" in answer


def _check(shown: Any, kind: str) -> tuple[str, str]:
    """The repr is one short line naming ``kind``; the HTML escapes the payload."""
    text, page = repr(shown), shown._repr_html_()
    assert text.startswith(f"{kind}(") and text.endswith(")"), text
    assert len(text) <= REPR_WIDTH and "\n" not in text, text
    assert "<script>" not in page and page.startswith("<div>"), page[:200]
    return text, page


# -- RunResult --------------------------------------------------------------------------------


async def test_run_result_repr_is_short_and_does_not_grow_with_the_run() -> None:
    """A two-call run and a 25-iteration run with a long answer: both reprs fit 120
    characters and name the run id and status; the HTML stays bounded."""

    @tool
    def step(n: int) -> str:
        """One step."""
        return "done " * 50

    short = await Agent(provider=mock(script=[
        {"tool_calls": [{"name": "step", "args": {"n": 1}}]}, "Done."]), tools=[step]).run("go")
    calls = [{"tool_calls": [{"name": "step", "args": {"n": i}}]} for i in range(24)]
    long_answer = "A very long answer. " * 200
    long = await Agent(provider=mock(script=[*calls, long_answer]), tools=[step],
                       limits=Limits(max_iterations=30)).run("go")
    assert len(long.history) > 40
    for result in (short, long):
        text, page = _check(result, "RunResult")
        assert f"run_id={result.run_id!r}" in text and "status='done'" in text
        assert len(page) < 6000
    assert "content='Done.'" in repr(short)
    assert len(repr(long)) == REPR_WIDTH  # clipped to the width, not grown past it
    assert len(repr(short)) < 120


async def test_run_result_html_escapes_the_answer() -> None:
    """A <script> in the answer is shown escaped in the notebook summary."""
    result = await Agent(provider=mock(reply=PAYLOAD)).run("hi")
    _, page = _check(result, "RunResult")
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert result.run_id in page and "<details>" in page  # the narrative, folded


async def test_run_result_repr_masks_what_the_run_masked() -> None:
    """Under a RedactionPolicy, an answer repeating the redacted message shows the mask in
    the repr and the HTML (a repr ends up in logs and tracebacks)."""
    secret = "sk-live-REPR-0123456789"
    message = f"my key is {secret}"
    agent = Agent(provider=mock(respond=lambda r: r.messages[-1]["content"]),
                  tracing=Tracing(redaction=RedactionPolicy(kinds=frozenset({"user_text"}))))
    result = await agent.run(message)
    assert secret in result.content  # the caller gets the real answer in-process
    assert secret not in repr(result) and REDACTED in repr(result)
    assert secret not in result._repr_html_()


async def test_a_paused_run_shows_its_pause() -> None:
    @tool(check_in=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    result = await Agent(provider=mock(script=[
        {"tool_calls": [{"name": "refund", "args": {"order_id": "A-1"}}]}]),
        tools=[refund]).run("refund A-1")
    text, _ = _check(result, "RunResult")
    assert "status='paused'" in text and "pause='check_in refund'" in text


# -- the explanations -------------------------------------------------------------------------


async def test_every_explanation_result_has_a_short_repr_and_escaped_html() -> None:
    """Backtrack, ContextBugReport, DroppedContextReport, RerunResult, BisectionResult,
    TurnReason and TurnRerun: one short line each, and an escaped summary."""
    agent = _agent()
    result = await agent.run("Should I buy?")
    assert result.content == WRONG

    trail = backtrack(result)
    text, page = _check(trail, "Backtrack")
    assert "suspect=" in text and "&lt;script&gt;" in page

    report = await localize_context_bug(result, is_wrong=_is_wrong)
    text, page = _check(report, "ContextBugReport")
    assert "proven=" in text and "proven=None" not in text and "reruns=" in text
    assert "&lt;script&gt;" in page

    dropped = await find_dropped_context(result)
    _check(dropped, "DroppedContextReport")

    what_if = await rerun_without_sources(result, rebuild=agent.without, sources=["tip"],
                                          is_wrong=_is_wrong)
    text, _ = _check(what_if, "RerunResult")
    assert text.startswith("RerunResult(verdict='CAUSAL'")

    bisection = await bisect_culprits(result, rebuild=agent.without, is_wrong=_is_wrong)
    text, _ = _check(bisection, "BisectionResult")
    assert "culprits=1" in text

    chat = recorded_chat(_agent)
    await chat.send("Should I buy?")
    text, page = _check(chat.reason(1), "TurnReason")
    assert text.startswith("TurnReason(turn=1") and "&lt;script&gt;" in page
    rerun = await chat.rerun_turn(1, ignore=["tip"])
    text, _ = _check(rerun, "TurnRerun")
    assert "verdict=" in text


# -- the helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 10, 100, 10_000])
def test_short_repr_fits_the_width_for_any_text(size: int) -> None:
    """Text fields are clipped (longest first) so the whole fits; short ones stay whole."""
    text = short_repr("Thing", [("a", "x" * size), ("b", "y" * size), ("n", 3)])
    assert len(text) <= REPR_WIDTH and text.startswith("Thing(") and text.endswith(")")
    if size <= 10:
        assert text == f"Thing(a={'x' * size!r}, b={'y' * size!r}, n=3)"


def test_short_repr_keeps_control_characters_on_one_line() -> None:
    assert "\n" not in short_repr("T", [("a", "line\nbreak\x1b[31m")])


def test_html_summary_escapes_names_values_and_detail() -> None:
    page = html_summary("<b>Kind</b>", [("<i>n</i>", PAYLOAD)], detail=PAYLOAD * 3)
    assert "<script>" not in page and "<b>Kind" not in page and "<i>" not in page
    assert page.count("&lt;script&gt;") == 4
