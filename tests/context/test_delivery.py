"""Messages-slot delivery: a test per sentence of the seed-002 contract, rules and in an agent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfootprint import Agent, define_fact, define_injection, define_instruction, tool
from agentfootprint.context import context_report
from agentfootprint.context._delivery import (
    deferral_note,
    deliver,
    delivery_key,
    effective_wire_role,
    fnv1a,
    keys_in_window,
    refusal_for_placement,
)
from agentfootprint.providers import MockProvider, mock

# -- helpers ---------------------------------------------------------------------------------


def user(content: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str = "ok", *call_ids: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if call_ids:
        message["tool_calls"] = [{"id": i, "name": "lookup", "args": {}} for i in call_ids]
    return message


def tool_result(call_id: str, content: str = "found") -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": call_id, "tool_name": "lookup"}


def fnv1a_units(units: list[int]) -> str:
    """FNV-1a spelled out over explicit 16-bit code units, independent of the implementation."""
    value = 0x811C9DC5
    for unit in units:
        value ^= unit
        value = (value * 0x01000193) % 2**32
    return format(value, "x")


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


def lookup(order_id: str = "A-1") -> dict[str, Any]:
    return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": order_id}}]}


def order_agent(context: list[Any], *replies: Any, **options: Any
                ) -> tuple[Agent, MockProvider]:
    provider = mock(script=list(replies))
    agent = Agent(provider=provider, model="mock-model", system="You help with orders.",
                  tools=[lookup_order], context=context, **options)
    return agent, provider


def deliveries(result: Any) -> list[dict[str, Any]]:
    """``messages_delivery`` as each MessagesSlot step left it, read from the recording."""
    log = result.recording.log
    return [log.value_at("messages_delivery", r.idx) for r in log.records
            if r.stage_id == "messages_slot"]


# -- the effective wire role -----------------------------------------------------------------


def test_tool_counts_as_user_on_the_wire() -> None:
    """Sequencing uses the effective wire role: tool is user, every other role is itself."""
    assert effective_wire_role("tool") == "user"
    assert [effective_wire_role(r) for r in ("user", "assistant", "system")] == [
        "user", "assistant", "system"]


def test_user_message_after_tool_result_is_a_role_collision() -> None:
    """A user message right after a tool result collides, because tool counts as user."""
    history = [user(), assistant("", "c1"), tool_result("c1")]
    assert refusal_for_placement(history, "user") == "role-collision"
    assert refusal_for_placement(history, "assistant") is None
    assert refusal_for_placement(history, "system") is None


def test_role_collision_on_the_tail_only() -> None:
    """role-collision compares with the tail's effective role, never with earlier turns."""
    assert refusal_for_placement([user()], "user") == "role-collision"
    assert refusal_for_placement([user(), assistant()], "assistant") == "role-collision"
    assert refusal_for_placement([user(), assistant()], "user") is None
    assert refusal_for_placement([assistant(), user()], "assistant") is None


# -- unanswered-tool-call --------------------------------------------------------------------


def test_unanswered_tool_call_at_the_tail_refuses() -> None:
    """A message may not sit between an assistant tool call and its result."""
    history = [user(), assistant("", "c1")]
    for role in ("user", "assistant", "system"):
        assert refusal_for_placement(history, role) == "unanswered-tool-call"


def test_unanswered_tool_call_anywhere_in_the_window_refuses() -> None:
    """Any assistant tool call anywhere without a result refuses, even far from the tail."""
    history = [user(), assistant("", "c1", "c2"), tool_result("c1"), assistant("thinking"),
               user("still there?")]
    assert refusal_for_placement(history, "assistant") == "unanswered-tool-call"
    history.append(tool_result("c2"))
    assert refusal_for_placement(history, "assistant") is None


def test_unanswered_tool_call_is_reported_before_role_collision() -> None:
    """When both refusals apply the unanswered tool call is the one named."""
    history = [user(), assistant("", "c1", "c2"), tool_result("c1")]
    assert refusal_for_placement(history, "user") == "unanswered-tool-call"


def test_unanswered_tool_call_defers_and_does_not_reorder() -> None:
    """An unanswered-tool-call refusal defers the message and its injection's later messages."""
    history = [user(), assistant("", "c1")]
    before = [dict(m) for m in history]
    pending = [("notes", "fact", [{"role": "assistant", "content": "one"},
                                  {"role": "user", "content": "two"}])]
    delivered, deferred = deliver(pending, history, set(), 2)
    assert delivered == []
    assert deferred == [{"injection_id": "notes", "flavor": "fact", "role": "assistant",
                         "reason": "unanswered-tool-call", "tail_role": "assistant",
                         "note": deferral_note("notes", "assistant", "unanswered-tool-call",
                                               "assistant"),
                         "iteration": 2}]
    assert history == before


# -- deferral: never reordered, others continue, retried unchanged ---------------------------


def test_refused_message_holds_back_the_rest_of_its_injection() -> None:
    """A later message of the same injection waits behind a refused one, even if placeable."""
    history = [user()]
    pending = [("pair", "custom", [{"role": "user", "content": "first"},
                                   {"role": "assistant", "content": "second"}])]
    delivered, deferred = deliver(pending, history, set(), 1)
    assert delivered == []
    assert [(d["injection_id"], d["role"], d["reason"]) for d in deferred] == [
        ("pair", "user", "role-collision")]
    assert history == [user()]


def test_other_injections_continue_past_a_refusal() -> None:
    """One injection's refusal does not stop the next injection from delivering."""
    history = [user()]
    pending = [("pair", "custom", [{"role": "user", "content": "first"},
                                   {"role": "assistant", "content": "second"}]),
               ("ack", "fact", [{"role": "assistant", "content": "Noted."}])]
    delivered, deferred = deliver(pending, history, set(), 1)
    assert [(d["injection_id"], d["wire_index"]) for d in delivered] == [("ack", 1)]
    assert [d["injection_id"] for d in deferred] == ["pair"]
    assert history[-1] == {"role": "assistant", "content": "Noted.", "injected_by": "ack"}


def test_deferred_message_is_retried_unchanged_at_the_next_boundary() -> None:
    """Deferred messages are tried again next boundary with the same content, in order."""
    pending = [("pair", "custom", [{"role": "user", "content": "first"},
                                   {"role": "assistant", "content": "second"}])]
    history = [user()]
    ledger: set[str] = set()
    _, deferred_1 = deliver(pending, history, ledger, 1)
    _, deferred_2 = deliver(pending, history, ledger, 2)  # nothing changed: refused the same way
    assert [{**d, "iteration": 0} for d in deferred_1] == [
        {**d, "iteration": 0} for d in deferred_2]
    assert history == [user()]
    history.append(assistant("A reply."))  # the boundary moved: now the user turn fits
    delivered, deferred_3 = deliver(pending, history, ledger, 3)
    assert deferred_3 == []
    assert [(m["role"], m["content"]) for m in history[2:]] == [
        ("user", "first"), ("assistant", "second")]
    assert [d["wire_index"] for d in delivered] == [2, 3]
    assert ledger == {delivery_key("pair", "user", "first"),
                      delivery_key("pair", "assistant", "second")}


# -- the delivery key ------------------------------------------------------------------------


def test_fnv1a_known_values() -> None:
    """fnv1a is 32-bit FNV-1a: offset basis for the empty string, the published value for 'a'."""
    assert fnv1a("") == "811c9dc5"
    assert fnv1a("a") == "e40c292c"
    assert fnv1a("a") == fnv1a_units([0x61])


def test_fnv1a_hashes_utf16_code_units_not_code_points_or_utf8() -> None:
    """A non-BMP character is hashed as its two UTF-16 surrogates (as JavaScript charCodeAt)."""
    code_point = 0x1F600  # 😀
    high = 0xD800 + ((code_point - 0x10000) >> 10)
    low = 0xDC00 + ((code_point - 0x10000) & 0x3FF)
    assert (high, low) == (0xD83D, 0xDE00)
    assert fnv1a("😀") == fnv1a_units([0xD83D, 0xDE00]) == "cb31c4b8"
    assert fnv1a("😀") != fnv1a_units([code_point])  # not per code point
    assert fnv1a("😀") != fnv1a_units(list("😀".encode()))  # not per UTF-8 byte
    assert fnv1a("é") == fnv1a_units([0xE9]) == "6c0b6c44"  # one unit, not two UTF-8 bytes


def test_fnv1a_is_unpadded_lowercase_hex() -> None:
    """A hash below 0x10000000 is written without leading zeros, in lower case."""
    assert fnv1a("akd") == "d368b73"
    assert fnv1a("akd") == fnv1a_units([ord(c) for c in "akd"])


def test_delivery_key_is_id_colon_fnv1a_of_role_colon_content() -> None:
    """key = injection id + ':' + fnv1a(role + ':' + content)."""
    assert delivery_key("vip", "user", "hello") == "vip:" + fnv1a("user:hello")
    assert fnv1a("user:hello") == fnv1a_units([ord(c) for c in "user:hello"]) == "4a4f8420"
    assert delivery_key("vip", "user", "hello") != delivery_key("vip", "assistant", "hello")
    assert delivery_key("vip", "user", "hello") != delivery_key("other", "user", "hello")


def test_position_is_not_part_of_the_key() -> None:
    """The same message at different window positions has one key."""
    marked = {"role": "assistant", "content": "Noted.", "injected_by": "ack"}
    early = [user(), marked]
    late = [user(), assistant(), user("more"), assistant("", "c1"), tool_result("c1"), marked]
    assert keys_in_window(early) == keys_in_window(late) == {
        delivery_key("ack", "assistant", "Noted.")}


def test_same_sentence_declared_twice_is_said_once() -> None:
    """One injection declaring the same sentence twice delivers it once."""
    history = [user()]
    pending = [("twice", "custom", [{"role": "assistant", "content": "Same."},
                                    {"role": "assistant", "content": "Same."}])]
    delivered, deferred = deliver(pending, history, set(), 1)
    assert len(delivered) == 1
    assert deferred == []  # a key already delivered is skipped silently, never a refusal
    assert [m["content"] for m in history].count("Same.") == 1


def test_keys_recovered_from_markers_deliver_nothing_twice() -> None:
    """Keys recovered from injected_by markers in a restored history block re-delivery."""
    restored = [user(), {"role": "assistant", "content": "Noted.", "injected_by": "ack"},
                user("again")]
    ledger = keys_in_window(restored)  # a fresh run: no ledger of its own
    delivered, deferred = deliver([("ack", "fact", [{"role": "assistant",
                                                     "content": "Noted."}])],
                                  restored, ledger, 1)
    assert delivered == [] and deferred == []
    assert len(restored) == 3


def test_messages_without_marker_are_not_keys() -> None:
    """Only messages carrying injected_by contribute keys; a user typing the text does not."""
    assert keys_in_window([user("Noted."), assistant("Noted.")]) == set()


# -- the empty window ------------------------------------------------------------------------


def test_empty_window_accepts_anything() -> None:
    """With no messages there is no tail to collide with and no call left unanswered."""
    for role in ("user", "assistant", "system"):
        assert refusal_for_placement([], role) is None
    history: list[Any] = []
    delivered, deferred = deliver([("hello", "fact", [{"role": "user", "content": "Hi."}])],
                                  history, set(), 1)
    assert deferred == [] and [d["wire_index"] for d in delivered] == [0]


# -- in an agent -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["dynamic", "classic"])
async def test_assistant_fact_is_delivered_after_a_tool_result(mode: str) -> None:
    """An assistant-role messages-slot fact lands right after a tool result, in either mode."""
    ack = define_fact(id="ack", data="I have the order details.", slot="messages",
                      role="assistant", active_when=lambda ctx: bool(ctx.tool_results))
    agent, provider = order_agent([ack], lookup(), "Order A-1 has shipped.", react_mode=mode)
    result = await agent.run("Where is A-1?")
    assert result.content == "Order A-1 has shipped."
    sent = provider.requests[1].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant"]
    assert sent[-1] == {"role": "assistant", "content": "I have the order details."}
    assert result.history[3]["injected_by"] == "ack"
    second = deliveries(result)[1]
    assert second["deferred"] == []
    assert [(d["injection_id"], d["role"], d["wire_index"], d["iteration"])
            for d in second["delivered"]] == [("ack", "assistant", 3, 2)]
    assert second["delivered"][0]["key"] == delivery_key("ack", "assistant",
                                                         "I have the order details.")
    rows = [call["injections"][0] for call in context_report(result.recording)]
    assert [row["how"] for row in rows] == [[], [{"slot": "messages", "messages": [
        {"index": 3, "role": "assistant", "content": "I have the order details."}]}]]


async def test_user_fact_defers_forever_in_a_tool_loop() -> None:
    """A user-role messages-slot fact never fits a tool loop: each boundary says role-collision."""
    vip = define_fact(id="vip", data="The customer is a VIP.", slot="messages", role="user")
    agent, provider = order_agent([vip], lookup("A-1"), lookup("A-2"), "Both have shipped.")
    result = await agent.run("Where are A-1 and A-2?")
    expected = [{"iteration": i, "delivered": [],
                 "deferred": [{"injection_id": "vip", "flavor": "fact", "role": "user",
                               "reason": "role-collision", "tail_role": "user",
                               "note": deferral_note("vip", "user", "role-collision", "user"),
                               "iteration": i}]}
                for i in (1, 2, 3)]
    assert deliveries(result) == expected
    assert result.recording.state["messages_delivery"] == expected[-1]
    assert all(m["content"] != "The customer is a VIP." for r in provider.requests
               for m in r.messages)
    assert "delivered_keys" not in result.recording.state


async def test_always_on_message_is_delivered_once_per_run() -> None:
    """An always-on messages-slot fact is appended once, not again at every iteration."""
    note = define_fact(id="note", data="Orders ship from Lyon.", slot="messages",
                       role="assistant")
    agent, provider = order_agent([note], lookup(), lookup("A-2"), "Done.")
    result = await agent.run("Where is A-1?")
    assert [m["content"] for m in result.history].count("Orders ship from Lyon.") == 1
    assert [len(d["delivered"]) for d in deliveries(result)] == [1, 0, 0]
    assert result.recording.state["delivered_keys"] == [
        delivery_key("note", "assistant", "Orders ship from Lyon.")]
    assert provider.requests[0].messages[-1] == {"role": "assistant",
                                                 "content": "Orders ship from Lyon."}


async def test_markers_are_stripped_from_the_wire() -> None:
    """No request the provider receives carries injected_by, and no message is dropped."""
    context = [
        define_fact(id="note", data="Orders ship from Lyon.", slot="messages", role="assistant"),
        define_instruction(id="after-lookup", prompt="Quote the tracking number.",
                           slot="messages", role="system", on_tool_return="lookup_order"),
    ]
    agent, provider = order_agent(context, lookup(), "Shipped.")
    result = await agent.run("Where is A-1?")
    assert len(provider.requests) == 2
    for request in provider.requests:
        assert all("injected_by" not in m for m in request.messages)
    marked = [m for m in result.history if "injected_by" in m]
    assert [(m["injected_by"], m["role"]) for m in marked] == [
        ("note", "assistant"), ("after-lookup", "system")]
    assert provider.requests[-1].messages == [
        {k: v for k, v in m.items() if k != "injected_by"} for m in result.history]


async def test_replay_from_a_restored_history_delivers_nothing_twice() -> None:
    """A run continued from a checkpoint that already holds a delivery does not deliver it again."""
    def build(*replies: Any) -> tuple[Agent, MockProvider]:
        note = define_instruction(id="after-lookup", prompt="Let me read that order back.",
                                  slot="messages", role="assistant",
                                  on_tool_return="lookup_order")
        return order_agent([note], *replies)

    first_agent, _ = build(lookup(), "A-1 has shipped.")
    first = await first_agent.run("Where is A-1?")
    assert [m.get("injected_by") for m in first.history].count("after-lookup") == 1
    checkpoint = json.loads(json.dumps(first.checkpoint))  # as if stored and reloaded

    replay_agent, provider = build(lookup(), "Still shipped.")
    replay = await replay_agent.run("And now?", continue_from=checkpoint)
    assert replay.content == "Still shipped."
    assert all(d["delivered"] == [] for d in deliveries(replay))
    fired = [call["injections"][0]["who"]["fired"] for call in context_report(replay.recording)]
    assert fired == [False, True]  # it was active again: only the marker kept it out
    assert [m.get("injected_by") for m in replay.history].count("after-lookup") == 1
    assert [m["content"] for m in provider.requests[-1].messages].count(
        "Let me read that order back.") == 1  # the restored one, on the wire once
    assert all("injected_by" not in m for r in provider.requests for m in r.messages)


async def test_raw_injection_messages_deliver_in_declared_order() -> None:
    """define_injection messages land in the order declared, each marked with the injection id."""
    seed = define_injection(id="seed-notes", messages=[
        {"role": "assistant", "content": "Looking into it."},
        {"role": "user", "content": "Thanks, take your time."},
    ])
    agent, provider = order_agent([seed], "Done.")
    result = await agent.run("Where is A-1?")
    assert [(m["role"], m["content"]) for m in provider.requests[0].messages] == [
        ("user", "Where is A-1?"), ("assistant", "Looking into it."),
        ("user", "Thanks, take your time.")]
    assert [m.get("injected_by") for m in result.history] == [None, "seed-notes", "seed-notes"]
