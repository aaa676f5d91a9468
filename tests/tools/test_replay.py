"""One replay for killed-run resumes and explanation re-runs (``tools/_replay.py``).

Both answer a call from what was recorded; a call without a recorded outcome runs for real
only when its tool declares repeating it safe. The two differ in one place, pinned here: an
``idempotent=True`` tool may run again on a resume (the same idempotency key comes back), but
never in a re-run (its calls have new ids, so the key cannot deduplicate).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentfootprint import Agent, define_fact, define_tool, tool
from agentfootprint.explain._isolation import RerunLog, RerunSandbox
from agentfootprint.explain._suspects import log_of
from agentfootprint.flow._redact import REDACTED
from agentfootprint.providers import mock
from agentfootprint.tools._replay import OUTCOME_UNKNOWN, ToolReplay, canonical_args

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def _tool(name: str, **declared: Any) -> Any:
    return define_tool(name, f"{name} does a thing.", SCHEMA, lambda args: "ran",
                       blocking=False, **declared)


JOURNAL = [
    {"phase": "started", "iteration": 2, "index": 0, "call": "c1", "tool": "pay"},
    {"phase": "done", "iteration": 2, "index": 0, "call": "c1", "tool": "pay",
     "outcome": {"content": "paid", "error": False, "status": "success"}},
    {"phase": "started", "iteration": 2, "index": 1, "call": "c2", "tool": "pay"},
    {"phase": "started", "iteration": 1, "index": 0, "call": "old", "tool": "pay"},
]


def test_a_resume_answers_recorded_calls_and_reports_an_interrupted_unsafe_one() -> None:
    known = ToolReplay.from_journal(JOURNAL, 2)
    assert known.started == {"c1", "c2"}  # the earlier batch's entries are not this batch's
    recorded = known.recorded({"id": "c1", "name": "pay", "args": {"x": 1}})
    assert recorded is not None and recorded.content == "paid" and not recorded.error
    assert known.recorded({"id": "c2", "name": "pay", "args": {"x": 1}}) is None
    unknown = known.unrecorded(_tool("pay"), {"x": 1})
    assert unknown is not None and unknown.status == OUTCOME_UNKNOWN
    assert "Outcome unknown" in unknown.content and "pay" in unknown.content


def test_a_resume_runs_again_a_tool_that_is_idempotent_or_free_of_side_effects() -> None:
    known = ToolReplay.from_journal(JOURNAL, 2)
    assert known.unrecorded(_tool("pay", idempotent=True), {"x": 1}) is None
    assert known.unrecorded(_tool("look", side_effects=False), {"x": 1}) is None


def test_a_rerun_never_runs_an_idempotent_tool_the_recording_lacks() -> None:
    known = ToolReplay.from_recording({("pay", canonical_args({"x": 1})): ["paid"]})
    assert known.answer(_tool("pay", idempotent=True), {"x": 1}).content == "paid"  # type: ignore[union-attr]
    refused = known.answer(_tool("pay", idempotent=True), {"x": 1})  # the queue is used up
    assert refused is not None and refused.status == OUTCOME_UNKNOWN
    assert known.misses and "does not declare side_effects=False" in known.misses[0]
    assert known.answer(_tool("look", side_effects=False), {"x": 2}) is None
    assert known.live_calls == ["look"]


def test_a_rerun_never_feeds_a_redacted_result_to_the_model() -> None:
    key = ("pay", canonical_args({"x": 1}))
    known = ToolReplay.from_recording({key: [f"card {REDACTED}"]})
    refused = known.answer(_tool("pay"), {"x": 1})
    assert refused is not None and REDACTED not in refused.content
    assert "only redacted" in known.misses[0]
    safe = ToolReplay.from_recording({key: [f"card {REDACTED}"]})
    assert safe.answer(_tool("pay", side_effects=False), {"x": 1}) is None  # runs live instead


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_canonical_arguments_ignore_key_order_and_json_encoding(args: dict[str, Any]) -> None:
    reordered = dict(reversed(list(args.items())))
    assert canonical_args(args) == canonical_args(reordered)
    assert canonical_args(json.dumps(args)) == canonical_args(args)


async def test_an_explanation_rerun_answers_through_the_registry_replay() -> None:
    """The re-run's agent carries the replay on its tool registry (no wrapped tools), and a
    side-effecting idempotent tool the recording lacks is not run."""
    effects: list[str] = []

    @tool(idempotent=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        effects.append(order_id)
        return f"refunded {order_id}"

    def agent(order: str) -> Agent:
        return Agent(provider=mock(script=[
            {"tool_calls": [{"id": "t1", "name": "refund", "args": {"order_id": order}}]},
            "done"]), tools=[refund], context=[define_fact(id="f", data="a fact")])

    first = await agent("A-1").run("refund A-1")
    assert effects == ["A-1"]
    sandbox = RerunSandbox(log_of(first))
    same, other = RerunLog(), RerunLog()
    replayed = sandbox.isolate(agent("A-1"), same)
    assert replayed.spec.registry.replay is same.replay
    assert (await replayed.run("refund A-1")).content == "done"
    assert effects == ["A-1"] and same.complete  # answered from the recording
    await sandbox.isolate(agent("B-2"), other).run("refund B-2")
    assert effects == ["A-1"] and not other.complete
    assert "'refund'" in other.misses[0]
