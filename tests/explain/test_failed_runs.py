"""Failed runs are explained as failures: the error, the step that raised it, the failed request
and the context at that moment — from the run store, never as an answer traced to a source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_html_report import by_id, parse

from agentfootprint import Agent, ProviderError, RunError, Tracing, define_fact, tool
from agentfootprint.cli import main
from agentfootprint.explain import backtrack, render_html_report, trace_toolpack
from agentfootprint.explain._toolpack import call_trace_tool
from agentfootprint.flow import flow_chart
from agentfootprint.providers import mock
from agentfootprint.runs import Recording, RunStore


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"Order {order_id}: $240, delivered 95 days ago."


ASK = {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]}


def _agent(store: RunStore, script: list[Any]) -> Agent:
    return Agent(provider=mock(script=script), model="m-large", name="Refunds",
                 tools=[lookup_order], context=[define_fact(id="profile", data="Maya is a VIP.")],
                 tracing=Tracing(run_store=store))


def _provider_failure(tmp_path: Path) -> tuple[Path, str, Any]:
    """A run whose provider answers the first call and raises on the second."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        agent = _agent(store, [ASK, ProviderError("upstream 503: overloaded", status=503,
                                                  provider="mock")])
        with pytest.raises(ProviderError) as raised:
            agent.run_sync("Can Maya get a refund for A-1001?")
        run_id = store.list()[0].run_id
    return path, run_id, raised.value.run


def _tool_batch_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A run whose tool batch raises one of our own errors (not a tool's: that would be a
    result the model reads), as a journal store that cannot be written would."""
    from agentfootprint.tools._registry import ToolRegistry

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RunError("the tool journal could not be written: disk full")

    monkeypatch.setattr(ToolRegistry, "dispatch", broken)
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        with pytest.raises(RunError, match="disk full"):
            _agent(store, [ASK]).run_sync("Can Maya get a refund for A-1001?")
        run_id = store.list()[0].run_id
    return path, run_id


def _load(path: Path, run_id: str) -> Recording:
    with RunStore(path) as store:
        return store.load(run_id)


def test_a_provider_error_is_the_explanation_with_the_request_that_failed(
        tmp_path: Path) -> None:
    """backtrack on the stored failed run names the error, the call step that raised it and
    the request it sent; no ANSWER hop, no answer traced to the tool result."""
    path, run_id, run = _provider_failure(tmp_path)
    recording = _load(path, run_id)
    assert recording.status == "failed"
    for source in (recording, run):
        chain = backtrack(source)
        text = str(chain)
        assert chain.failure is not None and chain.failure.kind == "provider"
        assert text.startswith("RUN FAILED")
        kinds = [hop.kind for hop in chain.hops]
        assert kinds[:3] == ["FAILED", "REQUEST", "CONTEXT"] and "ANSWER" not in kinds
        assert "ProviderError: upstream 503: overloaded" in chain.hops[0].text
        assert chain.hops[0].runtime_stage_id == chain.failure.runtime_stage_id
        assert chain.failure.runtime_stage_id.startswith("call_llm#")
        request = chain.hops[1].text
        assert "model 'm-large'" in request and "3 message(s)" in request
        assert 'last message (tool): "Order A-1001: $240' in request
        assert "fact 'profile'" in chain.hops[2].text
        assert chain.suspect is None and chain.ranked == []
        assert "BORN" not in text and "the result of tool" not in text


def test_a_tool_batch_error_names_the_batch_and_the_call_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A framework error raised by the tool batch: the ToolCalls step, the calls under way and
    the context of the LLM call that asked for them."""
    path, run_id = _tool_batch_failure(tmp_path, monkeypatch)
    chain = backtrack(_load(path, run_id))
    failure = chain.failure
    assert failure is not None and failure.kind == "tool"
    assert failure.error == "RunError: the tool journal could not be written: disk full"
    assert failure.runtime_stage_id is not None
    assert failure.runtime_stage_id.startswith("tool_calls#")
    by_kind = {hop.kind: hop.text for hop in chain.hops}
    assert by_kind["BATCH"] == ('the tool calls under way: lookup_order({"order_id": '
                                '"A-1001"})')
    assert by_kind["CONTEXT"].startswith("the last LLM call before it (call_llm#")
    assert "REQUEST" not in by_kind and "ANSWER" not in by_kind


def test_explain_and_report_commands_say_the_run_failed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`explain RUN_ID` and `report RUN_ID` on the stored failed run lead with the failure; the
    failing call is never "the call that produced the answer"."""
    path, run_id, _ = _provider_failure(tmp_path)
    assert main(["--store", str(path), "explain", run_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith("RUN FAILED")
    assert "FAILED   ProviderError: upstream 503: overloaded — raised by stage" in out
    assert "REQUEST  the request that failed: model 'm-large'" in out
    assert "Nothing to prove" in out and "ANSWER" not in out
    target = tmp_path / "why.html"
    assert main(["--store", str(path), "report", run_id, "-o", str(target)]) == 0
    html = target.read_text(encoding="utf-8")
    root = parse(html)
    banner = by_id(root, "failure")
    assert "RUN FAILED" in banner.text and "ProviderError: upstream 503" in banner.text
    assert "the call that produced the answer" not in html
    failed_view = [v for v in by_id(root, "model-view").find_all("article", cls="call-view")
                   if "the call that failed" in v.text]
    assert len(failed_view) == 1 and "hidden" not in failed_view[0].attrs
    assert failed_view[0].one("pre", cls="failed").text.startswith("ProviderError")
    assert "Why did Refunds fail?" in root.one("h1").text
    assert by_id(root, "board").find_all("li", cls="suspect") == []


def test_the_report_of_a_tool_batch_failure(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The page names the batch error and shows the last call before it, not as an answer."""
    path, run_id = _tool_batch_failure(tmp_path, monkeypatch)
    root = parse(render_html_report(_load(path, run_id)))
    assert "disk full" in by_id(root, "failure").text
    board = by_id(root, "board")
    assert [h.attrs["data-kind"] for h in board.find_all("li", cls="hop")][:2] == [
        "FAILED", "BATCH"]
    assert "the last LLM call before the failure" in board.text
    assert "the call that produced the answer" not in root.text


def test_the_trace_overview_names_the_failure(tmp_path: Path) -> None:
    """A model debugging the run with the trace tools reads the error first."""
    path, run_id, _ = _provider_failure(tmp_path)
    overview = call_trace_tool(trace_toolpack(_load(path, run_id)), "run_overview")
    second = overview.splitlines()[1]
    assert second.startswith("FAILED: ProviderError: upstream 503: overloaded — raised by")
    assert "trace_node('call_llm#" in second


def test_a_failed_flow_without_a_model_call_is_explained_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain flow that raised: the error and the state its step read, exit 0."""

    def seed(scope: Any) -> None:
        scope["amount"] = 240

    def charge(scope: Any) -> None:
        raise ValueError(f"cannot charge {scope['amount']}: card declined")

    with pytest.raises(RunError) as raised:
        flow_chart("Seed", seed).then("Charge", charge).build().run_sync()
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        store.save(raised.value.run)
    chain = backtrack(raised.value.run)
    assert chain.failure is not None and chain.failure.kind == "stage"
    assert "ValueError: cannot charge 240: card declined" in chain.hops[0].text
    assert any(h.kind == "STATE" and "amount = 240" in h.text for h in chain.hops)
    assert main(["--store", str(path), "explain", raised.value.run.run_id]) == 0
    assert "RUN FAILED" in capsys.readouterr().out


async def test_a_member_of_a_composition_that_fails_is_named_with_its_request() -> None:
    """In a Sequence the failing member's call is named, with the message it was handed."""
    from agentfootprint import ProviderError
    from agentfootprint.compose import Sequence

    first = Agent(provider=mock(reply="sky: blue"), model="m")
    second = Agent(provider=mock(script=[ProviderError("rate limited", status=429,
                                                       provider="mock")]), model="m2")
    with pytest.raises(ProviderError) as raised:
        await Sequence(("first", first), ("second", second)).run("What colour is the sky?")
    chain = backtrack(raised.value.run)
    assert chain.failure is not None and chain.failure.scope.startswith("second")
    assert chain.hops[0].text.endswith("in second")
    assert "model 'm2'" in chain.hops[1].text and '(user): "sky: blue"' in chain.hops[1].text
    html = render_html_report(Recording.of(raised.value.run))
    assert "RUN FAILED" in html and "the call that produced the answer" not in html


async def test_a_timeout_names_the_run_error_not_a_bare_cancellation() -> None:
    """A run stopped by its timeout: the run's own error, and the step that was under way."""
    import asyncio

    async def slow(request: Any) -> str:
        await asyncio.sleep(2)
        return "late"

    with pytest.raises(RunError) as raised:
        await Agent(provider=mock(respond=slow), model="m").run("hi", timeout=0.1)
    failure = backtrack(raised.value.run).failure
    assert failure is not None
    assert "timed out after 0.1s" in failure.error and "under way was cancelled" in failure.error
    assert failure.runtime_stage_id is not None
    assert failure.runtime_stage_id.startswith("call_llm#")
