"""Recorded chat: frozen turns, byte-exact re-runs of a turn, reasons from evidence, forks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from typing import Any

import pytest

from agentfootprint import Agent, ConfigurationError, define_fact, define_instruction
from agentfootprint.explain._chat import ChatTurn, RecordedChat, TurnRerun, recorded_chat
from agentfootprint.providers import LLMRequest, MockProvider, mock

# -- the advisor scenario --------------------------------------------------------------------------

BASE = "You are a cautious stock advisor."
INSIDER = "An insider tip says ACME will double next week."
QUARTERLY = "ACME quarterly results were flat."
RISK = "Remind the user that past performance is no guarantee."
TURNS = ("Hi, I hold some ACME shares.", "How did ACME do last quarter?",
         "Should I buy more ACME?")
BUY = "BUY more ACME now: an insider tip says ACME will double."
HOLD = "HOLD ACME: the quarterly results were flat."
CAVEAT = " Past performance is no guarantee."


def advisor_model(seed: int, hold_seeds: Collection[int], slow: bool) -> MockProvider:
    """A fake advisor: buys on the insider tip, holds without it; echoes the risk reminder."""

    async def respond(request: LLMRequest) -> str:
        if slow:
            await asyncio.sleep(0.01)
        system = request.system or ""
        asked = [m["content"] for m in request.messages if m["role"] == "user"][-1]
        if "last quarter" in asked:
            return "ACME quarterly results were flat last quarter."
        if "buy" not in asked.lower():
            return f"Noted: {asked}"
        reply = BUY if INSIDER in system and seed not in hold_seeds else HOLD
        reminded = any(m["content"] == RISK for m in request.messages)
        return reply + (CAVEAT if reminded else "")

    return mock(respond=respond)


class Advisor:
    """``make_agent`` for the chat: records every build and keeps each build's provider."""

    def __init__(self, *, risk: bool = False, hold_seeds: Collection[int] = (),
                 slow: bool = False) -> None:
        self.risk = risk
        self.hold_seeds = hold_seeds
        self.slow = slow
        self.builds: list[tuple[frozenset[str], int, MockProvider]] = []

    def __call__(self, without: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
        context = [define_fact(id="insider-tip", data=INSIDER),
                   define_fact(id="quarterly", data=QUARTERLY)]
        if self.risk:
            context.append(define_instruction(
                id="risk-warning", prompt=RISK, slot="messages", role="system",
                active_when=lambda ctx: "buy" in ctx.user_message.lower()))
        provider = advisor_model(seed, self.hold_seeds, self.slow)
        self.builds.append((without, seed, provider))
        return Agent(provider=provider, model="m", system=BASE,
                     context=[c for c in context if c.id not in without])

    def requests_of(self, build: int) -> list[LLMRequest]:
        return self.builds[build][2].requests


async def three_turns(advisor: Advisor) -> RecordedChat:
    chat = recorded_chat(advisor)
    for message in TURNS:
        await chat.send(message)
    return chat


def wire(request: LLMRequest) -> str:
    """The messages a provider received, as the exact bytes of their JSON."""
    return json.dumps(request.messages, ensure_ascii=False)


# -- the acceptance: turn k replayed byte for byte ------------------------------------------------


async def test_rerun_turn_sends_byte_identical_history_for_the_earlier_turns() -> None:
    """Re-running turn 3 without the tip sends turn 3's exact messages; only the tip leaves."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    assert chat.turn(3).reply == BUY
    original = advisor.requests_of(2)
    assert len(original) == 1
    rerun = await chat.rerun_turn(3, ignore=["insider-tip"])
    replays = advisor.builds[3:]
    assert [(without, seed) for without, seed, _ in replays] == [
        (frozenset(), 0), (frozenset(), 1), (frozenset(), 2),
        (frozenset({"insider-tip"}), 0), (frozenset({"insider-tip"}), 1),
        (frozenset({"insider-tip"}), 2)]
    history = original[0].messages[:4]  # turns 1-2: user, assistant, user, assistant
    assert [m["content"] for m in history[::2]] == list(TURNS[:2])
    for without, _, provider in replays:
        assert len(provider.requests) == 1  # turns 1-2 were replayed, never re-generated
        sent = provider.requests[0]
        assert wire(sent) == wire(original[0])
        assert json.dumps(sent.messages[:4]) == json.dumps(history)
        system = original[0].system or ""
        expected = system.replace(f"\n\n{INSIDER}", "") if without else system
        assert sent.system == expected
    assert INSIDER not in (advisor.requests_of(-1)[0].system or "")
    assert (rerun.verdict, rerun.probe.fraction) == ("CAUSAL", "3/3")
    assert rerun.baseline is not None and rerun.baseline.answers == (BUY,) * 3
    assert rerun.answers == (HOLD,) * 3 and rerun.differs and rerun.tier == "causal"


async def test_a_messages_slot_source_leaves_exactly_its_own_message() -> None:
    """Ignoring a rule-fired message drops that one message; system and history stay the same."""
    advisor = Advisor(risk=True)
    chat = await three_turns(advisor)
    assert chat.turn(3).reply == BUY + CAVEAT
    original = advisor.requests_of(2)[0]
    rerun = await chat.rerun_turn(3, ignore="risk-warning", reruns=2)
    sent = advisor.requests_of(-1)[0]
    assert sent.system == original.system
    assert sent.messages == [m for m in original.messages if m["content"] != RISK]
    assert len(sent.messages) == len(original.messages) - 1
    assert rerun.answers == (BUY, BUY) and rerun.verdict == "CAUSAL"


async def test_an_innocent_source_is_not_confirmed_and_the_baseline_reproduces_the_reply() -> None:
    """Without the quarterly fact turn 3 still buys: NOT CONFIRMED, nothing differs."""
    chat = await three_turns(Advisor())
    rerun = await chat.rerun_turn(3, ignore=["quarterly"])
    assert rerun.baseline is not None and rerun.baseline.answers == (BUY,) * 3
    assert (rerun.verdict, rerun.differs, rerun.answer) == ("NOT CONFIRMED", False, BUY)


async def test_an_unstable_baseline_gives_no_verdict_beyond_inconclusive() -> None:
    """A model that holds on seed 1 whatever is removed convicts nothing (rerun.py's rules)."""
    chat = await three_turns(Advisor(hold_seeds={1}))
    rerun = await chat.rerun_turn(3, ignore=["insider-tip"])
    assert rerun.baseline is not None and rerun.baseline.fraction == "1/3"
    assert rerun.verdict == "INCONCLUSIVE" and "1 of 3 with nothing removed" in rerun.why


async def test_a_single_rerun_gives_the_answer_and_no_verdict() -> None:
    """reruns=1 builds one agent (no baseline) and says one run is not a verdict."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    rerun = await chat.rerun_turn(3, ignore=["insider-tip"], reruns=1)
    assert len(advisor.builds) == 4
    assert (rerun.answers, rerun.differs, rerun.verdict, rerun.baseline) == (
        (HOLD,), True, None, None)
    assert "ONE RE-RUN" in rerun.why


async def test_same_answer_decides_what_counts_as_unchanged() -> None:
    """A paraphrase counts as the recorded reply when same_answer says so; a bad one is refused."""
    chat = await three_turns(Advisor(risk=True))
    rerun = await chat.rerun_turn(3, ignore=["risk-warning"],
                                  same_answer=lambda answer: answer.startswith("BUY"))
    assert (rerun.verdict, rerun.differs) == ("NOT CONFIRMED", False)
    with pytest.raises(ConfigurationError, match="own recorded reply"):
        await chat.rerun_turn(3, ignore=["risk-warning"], same_answer=lambda a: False)


# -- reason(k): from frozen evidence ---------------------------------------------------------------


async def test_reason_names_the_injection_that_drove_each_reply() -> None:
    """Reply 3 backtracks to the insider tip, reply 2 to the quarterly fact (proxy tier)."""
    chat = await three_turns(Advisor())
    why = chat.reason(3)
    assert why.suspect is not None and why.suspect.id == "insider-tip"
    assert [hop.kind for hop in why.backtrack.hops] == [
        "ANSWER", "READ", "LANDED", "ALLOWED", "BORN"]
    assert why.backtrack.hops[-1].text == "define_fact('insider-tip')"
    assert why.backtrack.sentence == INSIDER
    assert why.ranked[0].suspect.id == "insider-tip" and why.tier == "proxy"
    second = chat.reason(2).suspect
    assert second is not None and second.id == "quarterly"


async def test_reason_reads_the_frozen_turn_never_live_state() -> None:
    """Later turns, re-runs and forks leave reason(k) as it was; it builds no agent."""
    advisor = Advisor()
    chat = recorded_chat(advisor)
    await chat.send(TURNS[0])
    await chat.send(TURNS[1])
    early = str(chat.reason(2))
    await chat.send(TURNS[2])
    await chat.rerun_turn(3, ignore=["insider-tip"], reruns=1)
    chat.fork(2)
    builds = len(advisor.builds)
    assert str(chat.reason(2, strategy="lexical_overlap", suspect=None)) == early
    assert chat.turn(1).recording.output == chat.turn(1).reply == f"Noted: {TURNS[0]}"
    loaded = RecordedChat.from_json(chat.to_json())
    assert str(loaded.reason(2)) == early
    assert str(loaded.reason(3)) == str(chat.reason(3))
    assert len(advisor.builds) == builds


async def test_each_turn_keeps_the_exact_history_it_was_given() -> None:
    """checkpoint_before of turn k is what turn k's model saw before the k-th message."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    assert chat.turn(1).checkpoint_before() is None and chat.turn(1).history_before() == []
    for k in (2, 3):
        sent = advisor.requests_of(k - 1)[0].messages
        assert [dict(m) for m in chat.turn(k).history_before()] == sent[:-1]
        assert chat.turn(k).before_json == chat.turn(k - 1).after_json
    copy = chat.turn(3).checkpoint_before()
    assert copy is not None
    copy["history"].clear()  # a caller's copy; the frozen turn is untouched
    assert len(chat.turn(3).history_before()) == 4
    with pytest.raises(ValueError, match="frozen"):
        chat.turn(3).reply = "rewritten"


# -- fork: branch, never rewrite -------------------------------------------------------------------


async def test_fork_from_a_rerun_branches_and_the_original_is_untouched() -> None:
    """The fork's turn 3 is the re-run's HOLD; the original keeps its BUY and its next turn."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    before = chat.to_json()
    rerun = await chat.rerun_turn(3, ignore=["insider-tip"])
    branch = chat.fork(3, from_rerun=rerun)
    assert branch.id != chat.id and branch.removed == frozenset({"insider-tip"})
    assert branch.forked_from is not None
    assert (branch.forked_from.parent, branch.forked_from.turn, branch.forked_from.via_rerun,
            branch.forked_from.ignored) == (chat.id, 3, True, ("insider-tip",))
    assert branch.turns[:2] == chat.turns[:2]
    assert branch.turn(3).reply == HOLD and branch.turn(3).removed == ("insider-tip",)
    assert branch.turn(3).before_json == chat.turn(3).before_json
    await branch.send("And what now?")
    assert advisor.builds[-1][0] == frozenset({"insider-tip"})
    assert [m["content"] for m in advisor.requests_of(-1)[0].messages][4:6] == [TURNS[2], HOLD]
    assert chat.to_json() == before and len(chat) == 3
    await chat.send("And what now?")
    assert [m["content"] for m in advisor.requests_of(-1)[0].messages][4:6] == [TURNS[2], BUY]
    assert advisor.builds[-1][0] == frozenset()
    assert (len(chat), len(branch)) == (4, 4)
    held = branch.reason(3).suspect
    assert held is not None and held.id == "quarterly"


async def test_fork_without_a_rerun_continues_after_turn_k() -> None:
    """fork(2) holds turns 1-2 and its next turn continues from turn 2's checkpoint."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    branch = chat.fork(2)
    assert len(branch) == 2 and branch.turn(2) is chat.turn(2)
    await branch.send("Should I buy ACME instead?")
    sent = advisor.requests_of(-1)[0].messages
    assert json.dumps(sent[:4]) == json.dumps(advisor.requests_of(2)[0].messages[:4])
    assert len(chat) == 3 and chat.turn(3).message == TURNS[2]


async def test_fork_refuses_a_rerun_made_elsewhere() -> None:
    """Only this session's rerun_turn(k) result may seed fork(k)."""
    chat = await three_turns(Advisor())
    other = await three_turns(Advisor())
    foreign = await other.rerun_turn(3, ignore=["insider-tip"], reruns=1)
    with pytest.raises(ConfigurationError, match="made elsewhere"):
        chat.fork(3, from_rerun=foreign)
    own = await chat.rerun_turn(3, ignore=["insider-tip"], reruns=1)
    with pytest.raises(ConfigurationError, match="re-run of turn 3"):
        chat.fork(2, from_rerun=own)


# -- bad input -------------------------------------------------------------------------------------


async def test_ignoring_an_unknown_id_is_refused_listing_the_valid_ids() -> None:
    """An id that never reached reply k is named, with every removable id, before any re-run."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    with pytest.raises(ConfigurationError, match=r"'insider-tip-typo'.*insider-tip, quarterly"):
        await chat.rerun_turn(3, ignore=["insider-tip-typo"])
    with pytest.raises(ConfigurationError, match="cannot be removed"):
        await chat.rerun_turn(3, ignore=["user"])
    with pytest.raises(ConfigurationError, match=r"ignore= is empty.*insider-tip, quarterly"):
        await chat.rerun_turn(3, ignore=[])
    with pytest.raises(ConfigurationError, match="reruns=0"):
        await chat.rerun_turn(3, ignore=["quarterly"], reruns=0)
    assert len(advisor.builds) == 3


async def test_a_turn_out_of_range_names_the_range() -> None:
    """reason, rerun_turn and fork refuse a turn number the session does not have."""
    chat = await three_turns(Advisor())
    for call in (lambda: chat.reason(0), lambda: chat.fork(4)):
        with pytest.raises(ConfigurationError, match=r"turn .* turns: 1\.\.3"):
            call()
    with pytest.raises(ConfigurationError, match=r"turns: 1\.\.3"):
        await chat.rerun_turn(4, ignore=["quarterly"])
    with pytest.raises(ConfigurationError, match="none yet"):
        recorded_chat(Advisor()).reason(1)


async def test_one_send_at_a_time() -> None:
    """A second send while the first is running is refused; the first one still lands."""
    chat = recorded_chat(Advisor(slow=True))
    first, second = await asyncio.gather(chat.send(TURNS[0]), chat.send(TURNS[1]),
                                         return_exceptions=True)
    assert isinstance(second, ConfigurationError) and "already running" in str(second)
    assert not isinstance(first, BaseException) and len(chat) == 1


async def test_make_agent_must_return_an_agent() -> None:
    """A factory that returns something else is named in a clear error; nothing is recorded."""
    chat = recorded_chat(lambda without, seed=0: "not an agent")
    with pytest.raises(ConfigurationError, match="must return an Agent"):
        await chat.send("hi")
    assert len(chat) == 0
    with pytest.raises(ConfigurationError, match="make_agent"):
        recorded_chat(None)  # type: ignore[arg-type]


async def test_a_failed_turn_records_nothing() -> None:
    """A provider failure raises and the session keeps only the turns that finished."""
    state = {"fail": False}

    def make(without: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
        reply: Any = RuntimeError("model down") if state["fail"] else "fine"
        return Agent(provider=mock(reply=reply), model="m")

    chat = recorded_chat(make)
    await chat.send("one")
    state["fail"] = True
    with pytest.raises(Exception, match="model down"):
        await chat.send("two")
    assert len(chat) == 1


# -- another process -------------------------------------------------------------------------------


async def test_a_session_round_trips_through_json_and_replays_from_it() -> None:
    """from_json restores the turns exactly; with make_agent it re-runs byte for byte."""
    advisor = Advisor()
    chat = await three_turns(advisor)
    text = chat.to_json()
    loaded = RecordedChat.from_json(text)
    assert loaded.to_json() == text and loaded.id == chat.id
    assert all(isinstance(t, ChatTurn) and t.result is None for t in loaded.turns)
    assert chat.turn(3).result is not None
    with pytest.raises(ConfigurationError, match="make_agent"):
        await loaded.rerun_turn(3, ignore=["insider-tip"])
    with pytest.raises(ConfigurationError, match="make_agent"):
        await loaded.send("hi")
    replayed = RecordedChat.from_json(text, make_agent=advisor)
    rerun = await replayed.rerun_turn(3, ignore=["insider-tip"], reruns=1)
    assert isinstance(rerun, TurnRerun) and rerun.answers == (HOLD,)
    assert wire(advisor.requests_of(-1)[0]) == wire(advisor.requests_of(2)[0])


async def test_a_broken_export_is_refused_not_replaced() -> None:
    """Malformed JSON, another format, or an altered history raise a clear error."""
    chat = await three_turns(Advisor())
    with pytest.raises(ConfigurationError, match="not a recorded chat"):
        RecordedChat.from_json("{not json")
    data = json.loads(chat.to_json())
    data["format"] = "something.else"
    with pytest.raises(ConfigurationError, match="not a recorded chat"):
        RecordedChat.from_json(json.dumps(data))
    data = json.loads(chat.to_json())
    data["turns"][1]["before_json"] = data["turns"][1]["before_json"].replace("Hi", "Hello")
    with pytest.raises(ConfigurationError, match="turn 2 does not continue from turn 1"):
        RecordedChat.from_json(json.dumps(data))


def test_sync_twins_work_from_plain_code() -> None:
    """send_sync and rerun_turn_sync run to completion outside an event loop."""
    chat = recorded_chat(Advisor())
    for message in TURNS:
        chat.send_sync(message)
    rerun = chat.rerun_turn_sync(3, ignore=["insider-tip"], reruns=2)
    assert rerun.verdict == "CAUSAL"
