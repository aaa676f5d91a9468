"""Every example in examples/ runs offline and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

EXPECTED = {
    "context_support_agent.py": [
        "Done, Maya: order A-1001 was refunded 42.00 EUR.",
        "The last LLM call (iteration 4, call_llm#",
        "    who:  always -> fired: always on",
        "    who:  on_tool_return(lookup_order) -> not fired: the previous batch ran refund_tool,"
        " not on_tool_return(lookup_order)",
        "    when: iteration 4, judged against [refund_tool], first fired at iteration 2",
        "    how:  system prompt, position 1, chars 26-69, cache always",
        "    who:  llm_activated(read_skill) -> fired: the model activated it with read_skill",
        "    when: iteration 4, judged against [refund_tool], first fired at iteration 3",
        "    how:  system prompt, position 3, chars 128-188, cache while_active",
        "    how:  tool list, refund_tool at position(s) 2",
    ],
    "flow_loan.py": [
        '[Condition]: It evaluated "Low credit": credit_score 580 lt 620 ✓, and chose Reject.',
        "Reject (reject#3)",
        "← [control: Low credit]",
    ],
    "systems_of_agents.py": [
        "Escalated to the priority queue: VIP customer.",
        "READ     respond/urgent/call_llm#",
        "BORN     define_fact('tier')",
    ],
    "conversation_memory.py": [
        "turn 1: Booked: a table for two on Friday.",
        "turn 2: Done: the table on Friday is now for three.",
        "ALLOWED  trigger memory recall (episodic, window) — recalled from turn 1: msg-1-0",
        "BORN     store entries msg-1-0 of SQLiteStore(",
    ],
    "consent_checkin.py": [
        "asks to run: issue_refund {'order_id': 'A-9', 'amount': 5000.0}",
        "goodwill (",
        "Done — refund of 5000.00 issued on A-9.",
    ],
    "loop_until_approved.py": [
        "Final: Your refund for order",
        "Passes: 5",
        '"Your refund for order" from body/finalize#',
    ],
    "pattern_debate.py": [
        " opponent: Invalidation bugs are the usual outage cause.",
        "Verdict: add the cache with a 30 s TTL — 4 arguments weighed.",
        "judge/call_llm#",
    ],
    "pattern_map_reduce.py": [
        "negative  The screen cracked in a week.",
        "2 positive, 1 negative; the complaint is about the screen.",
    ],
    "pattern_reflection.py": [
        "Answer: Your order A-1001 has shipped and arrives on Friday.",
        "Rounds: 2, accepted: True",
        'It examined "rejected in round 1 of 3"',
        "and chose Accepted.",
    ],
    "pattern_self_consistency.py": [
        "Answer: 408",
        "Votes: {'418': 2, '408': 3} (winner: sample-2)",
        "READ     sample-",
        "BORN     define_fact('method')",
    ],
    "pattern_swarm.py": [
        "Relay: triage -> billing (1 hand-off)",
        "Answer: Refund of 42.00 EUR for order A-1001 approved; it is within the 30-day window.",
        "READ     billing/call_llm#",
        "BORN     define_fact('refund-window')",
    ],
    "pattern_tree_of_thoughts.py": [
        "Answer: 10 * 2 = 20 (level 3, score 0)",
        "Path: 2 + 3 = 5 -> 5 * 2 = 10 -> 10 * 2 = 20",
        'It examined "best score 0 reached stop_at=0"',
    ],
    "rag_agent.py": [
        "indexed: added 3, embedded 3",
        "re-indexed: unchanged 3, embedded 0",
        "after an edit: updated 1, unchanged 2, embedded 1",
        "To reset your password, open Settings, choose Security and press Reset password. "
        "[account.md#0]",
        "injected memory:kb#account.md#0 (rank 1, score 0.45)",
        "near miss account.md#1: score 0.33 (below-threshold)",
        "BORN     ",
    ],
    "stream_events.py": [
        "[injection]   units -> system (always, iteration 1)",
        "[tool call]   weather {'city': 'Paris'}",
        'event: tool_call\ndata: {"type":"tool_call","run_id":"',
        "[tool result] weather -> Paris: 22°C, sunny",
        "It is 22°C and sunny in Paris.\n[result]      done: 'It is 22°C and sunny in Paris.'",
        "run.result is the RunResult: True",
    ],
    "mcp_usage_cost.py": [
        "tool lookup_order from MCP server 'orders' (safe to repeat: True)",
        "tool refund from MCP server 'orders' (safe to repeat: False)",
        "Refunded 42.00 EUR on order A-1001: it was delivered 3 days ago, within the 30-day "
        "window.",
        "3 LLM call(s): 3900 input tokens (2000 read from cache, 1000 written to it), "
        "93 output tokens, cost $0.008445",
        " mock/claude-sonnet-4-5: ",
        "in 1200 (cache read 0, written 1000), out 30, $0.004800",
        "in 1400 (cache read 1000, written 0), out 28, $0.001920",
        "BORN     the result of tool 'lookup_order' from MCP server 'orders' (its tool "
        "'lookup_order')",
    ],
    "audit_bundle.py": [
        "exported 7 records; record types: run, llm_call, decision, tool_call, llm_call, "
        "decision, answer",
        '"arguments": ["order_id"], "name": "lookup_order", "result": "[34 chars]"',
        "verify: ok=True, records checked 7\nthe head to publish elsewhere: final_hash, 64 hex",
        "after one changed byte: ok=False, broken_at=4",
        "  record 4's hash does not match its content: it was edited",
    ],
    "otel_export.py": [
        "Live spans:\ninvoke_agent forecaster  [AGENT] agentfootprint.run_id=",
        "  * agentfootprint.context.injected {'injection_id': 'units', 'slot': 'system', "
        "'trigger': 'always', 'iteration': 1}",
        "  chat mock  [LLM] gen_ai.provider.name=mock, gen_ai.request.model=mock, "
        "gen_ai.usage.input_tokens=14, gen_ai.usage.output_tokens=0, "
        "gen_ai.response.finish_reasons=('tool_call',)",
        "  execute_tool weather  [TOOL] gen_ai.tool.name=weather, gen_ai.tool.call.id=call_1",
        "Exported from the recording: 4 spans\ninvoke_agent forecaster  [AGENT]",
    ],
    "lint_catalog.py": [
        "warning enum-in-prose        set_priority.level: the description of 'level' lists its "
        "values (low, normal, high)",
        "warning thin-description     ship: the description 'Ships.' (1 word)",
        "warning undocumented-param   refund_order.note: the optional parameter 'note'",
        "twin rule: ",  # "ran (all-MiniLM-L6-v2, ...)", or "not run: ... pip install ..."
        "$ agentfootprint lint-tools tools.json",
        "exit code 1",
        "called lookup_order; ",  # its nearest other tool, or that the twin rule did not run
        "Order A-1001 was delivered.",
    ],
    "context_integrity.py": [
        "CONTEXT ERRORS — 1 finding(s) from 1 of 4 checks",
        "The answer says balance is 250.00, but the tool 'balance' result it was given says "
        "120.0.",
        "    sources: step:call_llm#12, tool_call:call-1, step:tool_calls#7",
        "  dangling-tool-offer                COULD NOT RUN — no grounds declared",
        "  answer-contradicts-source          FOUND 1 — over 1 stated value(s)",
        "INTEGRITY: 1 contradiction(s) in the run:",
        "PROOF: not proven yet",
    ],
    "typed_answers_and_deps.py": [
        "approved: True (delivered 12 days ago, within the 30-day window)",
        "FIELD    approved = true — of the output RefundDecision, from answer 1",
        "BORN     the result of tool 'lookup_order'",
        "[tool call]   lookup_order {'order_id': 'A-1001'}",
        "[tool result] A-1001: running shoes, delivered 12 days ago",
        "run.result.output.approved: True",
        "unit test, no agent: A-1001: a test pair, delivered 45 days ago",
        "deps in the recording or checkpoint: False",
    ],
    "serve_conversation.py": [
        "turn 1: noted 'My order A-1001 arrived broken.' (1 messages from you so far)",
        "turn 2: noted 'It is the blue one.' (2 messages from you so far)",
        "202 paused: check_in before issue_refund",
        "200 resumed: Done: refund issued for A-1001.",
        "transcript: 6 lines, turns [1, 2, 3]",
        "bob asks for alice's session: 404 no session",
    ],
    "scaling_out.py": [
        "batch-a1: Shipped by express, at no charge. [in-process, attempts 1]",
        "sent again: reused 2 of 2, shipped 2 orders in all",
        "recorded with the run: factory __main__:agent, 1 attempt(s)",
        "proven: [('promo',)]",
    ],
    "quickstart_agent.py": [
        "It is 22°C and sunny in Paris.",
        'It examined "the model asked for tools"',
        "and chose ToolCalls.",
        "Write final_content = \"It is 22°C and sunny in Paris.\"",
    ],
}


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs(name: str) -> None:
    """The example exits 0 and its output contains the lines it is there to show."""
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for line in EXPECTED.get(name, []):
        assert line in done.stdout, done.stdout


def test_every_example_has_expectations() -> None:
    """An example without expected output would pass while printing nonsense."""
    assert sorted(EXPECTED) == sorted(p.name for p in EXAMPLES.glob("*.py"))
