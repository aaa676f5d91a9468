"""Audit bundles: canonical JSON lines, hash-chained; any edit is named by its first broken record.

The property tests mutate a 50-record bundle's bytes — a single byte changed anywhere, a line
removed (the last record included), a line inserted, two lines swapped — and require
``verify_audit_bundle`` to report the first line that differs from the exported bundle: the
seq that line should carry (0 for the header).
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint import Agent, Limits, tool
from agentfootprint.audit import AuditVerification, audit_export, verify_audit_bundle
from agentfootprint.errors import ConfigurationError
from agentfootprint.providers import mock
from agentfootprint.runs import Recording
from agentfootprint.runs._chain import canonical, jsonable

SECRETISH = "hunter2-PLANTED-7f3a"
RESULT_SECRETISH = "token=RESULT-PLANTED-9c1e"


@tool(name="add")
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(name="lookup")
async def lookup(api_key: str, order_id: str) -> str:
    """Look up an order with a key."""
    return f"{RESULT_SECRETISH} order {order_id} shipped"


def _run(script: list[Any], tools: list[Any]) -> Recording:
    agent = Agent(provider=mock(script=script), model="mock", tools=tools,
                  limits=Limits(max_iterations=20))
    return Recording.of(asyncio.run(agent.run("please do the work")))


def _fifty() -> Recording:
    """A run whose bundle has exactly 50 records: run, 14 iterations of one tool call
    (llm_call, decision, tool_call), one of two tool calls, the final call and its decision,
    and the answer."""
    calls: list[Any] = [{"tool_calls": [{"name": "add", "args": {"a": k, "b": 1}}]}
                        for k in range(14)]
    calls.append({"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}},
                                 {"name": "add", "args": {"a": 3, "b": 4}}]})
    return _run([*calls, "The sums are done."], [add])


RECORDING = _fifty()
BUNDLE = audit_export(RECORDING)
LINES = BUNDLE.split(b"\n")
"""Header, 50 records, and the empty tail after the final newline."""


def _first_difference(mutated: bytes) -> int:
    """The index of the first line of ``mutated`` that is not the exported bundle's line there
    (a line missing counts as different): the seq ``broken_at`` must name."""
    lines = mutated.split(b"\n")
    for index in range(max(len(lines), len(LINES))):
        mine = lines[index] if index < len(lines) else None
        theirs = LINES[index] if index < len(LINES) else None
        if mine != theirs:
            return index
    raise AssertionError("the mutation changed nothing")


def _broken(mutated: bytes) -> AuditVerification:
    found = verify_audit_bundle(mutated)
    assert not found.ok, found
    assert found.broken_at == _first_difference(mutated), found
    assert found.records_checked == max(found.broken_at - 1, 0) if found.broken_at else True
    return found


def test_the_bundle_has_fifty_records_and_verifies() -> None:
    assert len(LINES) == 52 and LINES[-1] == b""
    header = json.loads(LINES[0])
    assert header["records"] == 50 and header["first_seq"] == 1
    found = verify_audit_bundle(BUNDLE)
    assert found.ok and found.records_checked == 50 and found.broken_at is None
    assert found.final_hash == header["final_hash"] == json.loads(LINES[50])["hash"]
    kinds = [json.loads(line)["record"]["type"] for line in LINES[1:51]]
    assert kinds[0] == "run" and kinds[-1] == "answer"
    assert kinds.count("llm_call") == 16 and kinds.count("tool_call") == 16
    assert kinds.count("decision") == 16


def test_every_line_is_its_own_canonical_bytes() -> None:
    for line in LINES[:-1]:
        assert canonical(json.loads(line)) == line


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(0, len(BUNDLE) - 1), byte=st.integers(0, 255))
def test_every_single_byte_change_is_named(position: int, byte: int) -> None:
    if BUNDLE[position] == byte:
        byte ^= 0x01
    mutated = bytearray(BUNDLE)
    mutated[position] = byte
    _broken(bytes(mutated))


def test_a_change_of_every_kind_of_byte_is_named() -> None:
    """Deterministic companions of the property: each line's first, middle and last byte and
    every newline, changed to a space, a newline, an invalid UTF-8 byte and a digit."""
    positions = {len(BUNDLE) - 1}
    start = 0
    for line in LINES[:-1]:
        positions |= {start, start + len(line) // 2, start + len(line) - 1, start + len(line)}
        start += len(line) + 1
    for position in sorted(positions):
        for byte in (0x20, 0x0A, 0xFF, 0x30):
            if BUNDLE[position] != byte:
                mutated = bytearray(BUNDLE)
                mutated[position] = byte
                _broken(bytes(mutated))


@pytest.mark.parametrize("index", range(1, 51))
def test_removing_any_record_is_named(index: int) -> None:
    """The last record (index 50) included: the header's count and final hash catch it."""
    mutated = b"\n".join(LINES[:index] + LINES[index + 1:])
    found = _broken(mutated)
    assert found.broken_at == index
    if index == 50:
        assert "missing" in found.reason


def test_removing_the_header_is_named() -> None:
    assert _broken(b"\n".join(LINES[1:])).broken_at == 0


@settings(max_examples=150, deadline=None)
@given(at=st.integers(0, 51), source=st.one_of(st.integers(0, 50), st.just(-1)))
def test_inserting_a_record_is_named(at: int, source: int) -> None:
    """A copy of any line (or a forged-looking one) put anywhere, the end included."""
    if source >= 0:
        extra = LINES[source]
    else:
        forged = json.loads(LINES[3])
        forged["record"]["answer"] = "[0 chars]"
        extra = canonical(forged)
    lines = [*LINES[:-1]]
    lines.insert(at, extra)
    mutated = b"\n".join(lines) + b"\n"
    if mutated == BUNDLE:
        return
    _broken(mutated)


@settings(max_examples=150, deadline=None)
@given(order=st.permutations(list(range(1, 51))))
def test_reordering_records_is_named(order: list[int]) -> None:
    if order == sorted(order):
        return
    lines = [LINES[0], *(LINES[i] for i in order), b""]
    found = _broken(b"\n".join(lines))
    assert found.broken_at == next(p for p, i in enumerate(order, start=1) if p != i)


@pytest.mark.parametrize("i", [1, 2, 25, 49])
def test_swapping_neighbours_is_named(i: int) -> None:
    lines = list(LINES)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    assert _broken(b"\n".join(lines)).broken_at == i


# -- a valid bundle always verifies ---------------------------------------------------------

_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_TEXT = st.text(st.one_of(st.characters(codec="utf-8"), _SURROGATES), max_size=12)
_SCALARS = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(min_value=-(2**70), max_value=2**70), _TEXT)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=8)


@tool(name="echo")
async def echo(payload: Any = None) -> str:
    """Echo a payload."""
    return repr(payload)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=_VALUES, answer=_TEXT, full=st.booleans(), key=st.one_of(
    st.none(), st.binary(min_size=1, max_size=16)))
def test_a_valid_bundle_always_verifies(payload: Any, answer: str, full: bool,
                                        key: bytes | None) -> None:
    """Whatever the run held (NaN, infinities, huge integers, lone surrogates, any text), its
    bundle verifies — and the same run read back from its JSON gives the same bytes, so the
    head a run store keeps at save matches the run it loads."""
    recording = _run([{"tool_calls": [{"name": "echo", "args": {"payload": payload}}]},
                      answer or "done"], [echo])
    bundle = audit_export(recording, full_content=full, key=key)
    found = verify_audit_bundle(bundle, key=key)
    assert found.ok, found
    again = Recording.from_json(recording.to_json())
    assert audit_export(again, full_content=full, key=key) == bundle


# -- keys, mapping, bounds ------------------------------------------------------------------


def test_an_hmac_key_must_match() -> None:
    keyed = audit_export(RECORDING, key=b"the-audit-key")
    assert verify_audit_bundle(keyed, key=b"the-audit-key").ok
    wrong = verify_audit_bundle(keyed, key=b"another-key")
    assert not wrong.ok and wrong.broken_at == 0 and "key is wrong" in wrong.reason
    missing = verify_audit_bundle(keyed)
    assert not missing.ok and missing.broken_at == 0 and "pass its key" in missing.reason
    unkeyed = verify_audit_bundle(BUNDLE, key=b"the-audit-key")
    assert not unkeyed.ok and unkeyed.broken_at == 0 and "not keyed" in unkeyed.reason
    header = json.loads(keyed.split(b"\n")[0])
    assert header["keyed"] is True and header["hash_algorithm"] == "hmac-sha256"
    assert header["final_hash"] != json.loads(LINES[0])["final_hash"]


def test_values_rfc8785_refuses_are_mapped_as_documented() -> None:
    """NaN and the infinities as the recording spells them, big integers as decimal text, a
    lone surrogate as its escape; the mapped value is canonical and the bundle verifies."""
    mapped = jsonable({"nan": math.nan, "inf": math.inf, "ninf": -math.inf,
                       "big": 2**53, "neg": -(2**60), "safe": 2**53 - 1, "lone": "a\ud800b",
                       1: "int key", None: "null key"})
    assert mapped == {"nan": "NaN", "inf": "Infinity", "ninf": "-Infinity",
                      "big": "9007199254740992", "neg": str(-(2**60)),
                      "safe": 2**53 - 1, "lone": "a\\ud800b", "1": "int key",
                      "null": "null key"}
    assert canonical({"x": math.nan}) == b'{"x":"NaN"}'
    recording = _run([{"tool_calls": [{"name": "echo", "args": {"payload": {
        "nan": math.nan, "inf": math.inf, "big": 2**64}}}]}, "done"], [echo])
    bundle = audit_export(recording, full_content=True)
    assert verify_audit_bundle(bundle).ok
    tool_call = next(json.loads(line)["record"] for line in bundle.split(b"\n")[1:-1]
                     if json.loads(line)["record"]["type"] == "tool_call")
    assert tool_call["arguments"] == {"payload": {"nan": "NaN", "inf": "Infinity",
                                                  "big": "18446744073709551616"}}


def test_bounded_payloads_hold_no_content() -> None:
    """A secret-ish tool argument and result are not in the default bundle (names, types and
    counts are); full_content=True keeps them (so the default really bounds them)."""
    recording = _run([{"tool_calls": [{"name": "lookup", "args": {
        "api_key": SECRETISH, "order_id": "A-1"}}]}, f"Shipped; your key {SECRETISH} works."],
        [lookup])
    bounded = audit_export(recording)
    for needle in (SECRETISH, RESULT_SECRETISH, "A-1", "Shipped"):
        assert needle.encode() not in bounded, needle
    records = [json.loads(line)["record"] for line in bounded.split(b"\n")[1:-1]]
    tool_call = next(r for r in records if r["type"] == "tool_call")
    assert tool_call["arguments"] == ["api_key", "order_id"]
    assert tool_call["result_type"] == "string"
    assert tool_call["result"] == f"[{len(RESULT_SECRETISH) + 18} chars]"
    answer = next(r for r in records if r["type"] == "answer")
    assert answer["answer"] == f"[{len(f'Shipped; your key {SECRETISH} works.')} chars]"
    full = audit_export(recording, full_content=True)
    assert SECRETISH.encode() in full and RESULT_SECRETISH.encode() in full
    assert json.loads(full.split(b"\n")[0])["content"] == "full"


def test_kept_proofs_extend_the_chain_after_the_answer() -> None:
    proof = {"kind": "rerun", "verdict": "CAUSAL", "labels": ["fact 'x'"], "runs": 3,
             "answer_without": "a different answer"}
    bundle = audit_export(RECORDING, proofs=[proof])
    lines = bundle.split(b"\n")
    assert verify_audit_bundle(bundle).ok and json.loads(lines[0])["records"] == 51
    assert lines[1:51] == LINES[1:51]  # the run's chain is unchanged; the proof follows it
    kept = json.loads(lines[51])["record"]
    assert kept["type"] == "proof" and kept["proof"]["verdict"] == "CAUSAL"
    assert kept["proof"]["labels"] == ["fact 'x'"]
    assert kept["proof"]["answer_without"] == "[18 chars]"


def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="needs a Recording"):
        audit_export("not a recording")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty bytes"):
        audit_export(RECORDING, key="text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        verify_audit_bundle(BUNDLE.decode())  # type: ignore[arg-type]
    empty = verify_audit_bundle(b"")
    assert not empty.ok and empty.broken_at == 0 and "empty" in empty.reason


def test_without_rfc8785_export_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "rfc8785", None)
    with pytest.raises(ConfigurationError, match=r"agentfootprint\[audit\]"):
        audit_export(RECORDING)


# -- the records a governed run leaves ----------------------------------------------------


def _records(bundle: bytes) -> list[dict[str, Any]]:
    return [json.loads(line)["record"] for line in bundle.split(b"\n")[1:-1]]


def test_a_governed_run_records_its_verdicts_rejections_and_costs() -> None:
    """Permission verdicts, act() decisions, bad tool arguments, a structured answer that
    failed its type, and each call's usage and cost are records — bounded, without the words."""
    from pydantic import BaseModel

    from agentfootprint import Budget, Governance
    from agentfootprint.agent._moments import act, allow, deny
    from agentfootprint.agent._permissions import PermissionPolicy, PermissionRule
    from agentfootprint.providers import Price

    class Refund(BaseModel):
        approved: bool
        reason: str

    policy = PermissionPolicy(rules=[PermissionRule(
        id="no-secret", tool="lookup", result="deny", rationale="never for secret keys",
        when=lambda given: given.get("api_key") == SECRETISH)])
    refuse_a2 = act("before_tool", lambda c: deny("not A-2") if c.args.get("order_id") == "A-2"
                    else allow(), id="no-a2")
    agent = Agent(
        provider=mock(script=[
            {"tool_calls": [{"name": "lookup", "args": {"api_key": SECRETISH, "order_id": "A-1"}},
                            {"name": "lookup", "args": {"api_key": "k", "order_id": "A-2"}},
                            {"name": "lookup", "args": {"order_id": 7}}]},
            '{"approved": "perhaps", "reason": "x"}',
            '{"approved": false, "reason": "the key is secret"}']),
        model="mock", tools=[lookup], output_type=Refund, budget=Budget(
            max_cost_usd=10.0, prices={"mock": Price(input=1.0, output=2.0)}),
        governance=Governance(permissions=policy, act=[refuse_a2]))
    recording = Recording.of(asyncio.run(agent.run("refund?")))
    bundle = audit_export(recording)
    assert verify_audit_bundle(bundle).ok and SECRETISH.encode() not in bundle
    records = _records(bundle)
    kinds = {r["type"] for r in records}
    assert {"permission", "act_decision", "validation_rejection", "tool_call", "llm_call",
            "decision", "answer"} <= kinds, kinds
    verdicts = [r for r in records if r["type"] == "permission"]
    assert [v["result"] for v in verdicts][:1] == ["deny"]
    assert verdicts[0]["policy_rule_id"] == "no-secret"
    assert verdicts[0]["rationale"] == f"[{len('never for secret keys')} chars]"
    acted = [r for r in records if r["type"] == "act_decision"]
    assert any(a["rule"] == "no-a2" and a["decision"] == "deny" for a in acted)
    assert all(a.get("reason") is None or a["reason"].endswith("chars]") for a in acted)
    statuses = [r["status"] for r in records if r["type"] == "tool_call"]
    assert statuses == ["denied", "denied", "invalid"]
    rejected = [r for r in records if r["type"] == "validation_rejection"]
    assert {r["what"] for r in rejected} == {"tool_arguments", "output"}
    output = next(r for r in rejected if r["what"] == "output")
    assert output["fields"] == ["approved"] and output["text"].endswith("chars]")
    calls = [r for r in records if r["type"] == "llm_call"]
    assert len(calls) == 3 and all("input_tokens" in c and "cost_usd" in c for c in calls)

