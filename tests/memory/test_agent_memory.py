"""Memory inside an agent: turns resolved once, recall as a tracked injection, writes at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentfootprint import Agent, tool
from agentfootprint.context._record import context_report
from agentfootprint.errors import ConfigurationError
from agentfootprint.explain._backtrack import backtrack
from agentfootprint.memory import (
    InMemoryStore,
    MemoryIdentity,
    SQLiteStore,
    budget,
    define_memory,
    summarize,
    top_k,
    window,
)
from agentfootprint.memory._strategies import list_memory_strategies
from agentfootprint.memory.embedding import mock_embedder
from agentfootprint.providers import mock

CONV = MemoryIdentity("conv-7", principal="alice")


def chat_agent(store: Any, reply: str = "ok", **memory: Any) -> Agent:
    options = {"type": "episodic", "strategy": window(10), **memory}
    chat = define_memory(id="chat", store=store, **options)
    return Agent(provider=mock(reply=reply), model="m", memory=[chat], identity=CONV)


async def test_fresh_agents_on_one_file_number_turns_from_the_store(tmp_path: Path) -> None:
    """The seed bug: a fresh agent per turn still writes msg-1-* … msg-5-*, none overwritten."""
    for n in range(1, 6):
        with SQLiteStore(tmp_path / "memory.db") as store:
            result = await chat_agent(store, reply=f"answer {n}").run(f"question {n}")
            assert result.turn == n
    with SQLiteStore(tmp_path / "memory.db") as store:
        page = await store.list(CONV)
    by_id = {e.id: e.value for e in page.entries}
    assert sorted(by_id) == sorted(f"msg-{t}-{i}" for t in range(1, 6) for i in (0, 1))
    assert by_id["msg-3-0"] == {"role": "user", "content": "question 3"}
    assert by_id["msg-5-1"] == {"role": "assistant", "content": "answer 5"}


async def test_recall_is_a_tracked_injection_naming_entries_and_turns() -> None:
    """The recall lands in the system prompt; its record says "recalled from turn N" + ids."""
    store = InMemoryStore()
    await chat_agent(store, reply="Your order ships Monday.").run("When does order 9 ship?")
    agent = chat_agent(store, reply="Monday, as I said.")
    result = await agent.run("Remind me when it ships?")
    assert result.turn == 2
    system = result.recording.state["system_prompt"]
    assert '<memory role="assistant" turn="1"' in system and "ships Monday" in system
    [call] = context_report(result.recording)
    rows = {r["id"]: r for r in call["injections"] if r["flavor"] == "memory"}
    assert list(rows) == ["memory:chat#msg-1-0", "memory:chat#msg-1-1"]
    row = rows["memory:chat#msg-1-1"]
    assert row["who"]["fired"] and row["who"]["reason"] == "recalled from turn 1: msg-1-1"
    assert row["how"][0]["slot"] == "system" and "ships Monday" in row["what"][0]
    assert "When does order 9 ship?" not in row["what"][0]
    sent = agent.spec.provider.requests[-1]  # type: ignore[attr-defined]
    assert "ships Monday" in (sent.system or "")


async def test_backtrack_born_hop_names_the_store_entries() -> None:
    """ANSWER ← … ← BORN: a recalled fact is traced to its entries and turn."""
    store = InMemoryStore()
    await chat_agent(store, reply="Noted: your plan is Gold tier.").run("I am on the Gold tier")
    result = await chat_agent(store, reply="You are on the Gold tier.").run("Which tier am I?")
    chain = backtrack(result)
    assert chain.suspect is not None and chain.suspect.id == "memory:chat#msg-1-1"
    born = chain.hops[-1]
    assert born.kind == "BORN"
    assert "entries msg-1-1 of InMemoryStore" in born.text and "turn(s) 1" in born.text
    assert born.runtime_stage_id is not None
    assert born.runtime_stage_id.startswith("memory_read_chat#")


async def test_tool_loops_write_once_after_the_final_answer() -> None:
    """Memory is read once at turn start and written once, after Finalize — never per tool."""

    @tool
    def lookup(order: int) -> str:
        """Look an order up."""
        return f"order {order}: paid"

    store = InMemoryStore()
    provider = mock(script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "args": {"order": 1}}]},
        {"tool_calls": [{"id": "c2", "name": "lookup", "args": {"order": 2}}]},
        "both paid",
    ])
    chat = define_memory(id="chat", type="episodic", strategy=window(10), store=store)
    agent = Agent(provider=provider, model="m", tools=[lookup], memory=[chat], identity=CONV)
    result = await agent.run("check 1 and 2")
    stages = [r.stage_id for r in result.recording.log.records]
    assert stages.count("memory_read_chat") == 2  # one mount: enter + exit records
    assert stages.count("memory_write_chat") == 2
    assert stages.index("memory_write_chat") > stages.index("finalize")
    page = await store.list(CONV)
    assert sorted(e.id for e in page.entries) == ["msg-1-0", "msg-1-1"]


async def test_read_only_memory_has_no_write_and_claims_no_turn() -> None:
    """``read_only=True`` drops the write chart: the store is never written to."""
    store = InMemoryStore()
    memo = define_memory(id="kb", type="episodic", strategy=window(5), store=store,
                         read_only=True)
    assert memo.write is None
    agent = Agent(provider=mock(reply="hi"), model="m", memory=[memo], identity=CONV)
    await agent.run("hello")
    assert (await store.list(CONV)).entries == []


async def test_identity_is_required_and_can_be_given_per_run() -> None:
    """An agent with memory refuses to guess whose conversation it is."""
    store = InMemoryStore()
    chat = define_memory(id="chat", type="episodic", strategy=window(5), store=store)
    agent = Agent(provider=mock(reply="x"), model="m", memory=[chat])
    with pytest.raises(ConfigurationError, match="identity=MemoryIdentity"):
        await agent.run("hi")
    other = MemoryIdentity("someone-else")
    result = await agent.run("hi", identity=other)
    assert result.turn == 1 and len((await store.list(other)).entries) == 2


async def test_budget_keeps_newest_and_a_turn_in_order() -> None:
    """The budget picker keeps the newest entries that fit, user before assistant."""
    store = InMemoryStore()
    for n in range(1, 4):
        await chat_agent(store, reply=f"a{n}", strategy=budget(max_entries=3)).run(f"q{n}")
    result = await chat_agent(store, strategy=budget(max_entries=3)).run("q4")
    recall = result.recording.state["memory_recall_chat"]
    assert recall["entry_ids"] == ["msg-2-1", "msg-3-0", "msg-3-1"]


async def test_semantic_top_k_recalls_by_similarity_with_near_misses() -> None:
    """A top_k memory recalls the similar message and records the ones just below threshold."""
    store = InMemoryStore()
    strategy = top_k(k=1, embedder=mock_embedder(128), threshold=0.3)
    await chat_agent(store, reply="Paris is the capital of France.", type="semantic",
                     strategy=strategy).run("What is the capital of France?")
    await chat_agent(store, reply="Use a wrench.", type="semantic",
                     strategy=strategy).run("How do I fix a bike chain?")
    result = await chat_agent(store, type="semantic", strategy=strategy).run(
        "capital of France again?")
    state = result.recording.state
    assert state["memory_recall_chat"]["entry_ids"] == ["msg-1-0"]
    evidence = state["memory_retrieved_chat"]
    assert evidence["admitted"] == ["msg-1-0"]
    assert all(c["score"] < 0.3 for c in evidence["near_misses"])
    entry = await store.get(CONV, "msg-1-0")
    assert entry is not None and entry.embedding_model == mock_embedder(128).id


async def test_causal_memory_recalls_a_past_run_by_question() -> None:
    """A causal memory snapshots each turn and recalls the closest past question."""
    store = InMemoryStore()
    strategy = top_k(k=1, embedder=mock_embedder(128), threshold=0.5)
    await chat_agent(store, reply="Refund approved.", type="causal", strategy=strategy).run(
        "Can I get a refund for order 12?")
    result = await chat_agent(store, type="causal", strategy=strategy).run(
        "Can I get a refund for order 12 today?")
    recall = result.recording.state["memory_recall_chat"]
    assert recall["entry_ids"] == ["snap-1"]
    assert "Final answer: Refund approved." in recall["text"]
    assert await store.get(CONV, "snap-2") is not None


async def test_narrative_memory_recalls_beats() -> None:
    """A narrative memory writes beats and recalls them as one short story."""
    store = InMemoryStore()
    await chat_agent(store, reply="Nice to meet you.", type="narrative",
                     strategy=window(4)).run("My name is Ada")
    result = await chat_agent(store, type="narrative", strategy=window(4)).run("Who am I?")
    recall = result.recording.state["memory_recall_chat"]
    assert recall["entry_ids"] == ["beat-1-0", "beat-1-1"]
    assert "From earlier: User said: My name is Ada. Assistant replied: Nice to meet you." \
        in recall["text"]


async def test_summarize_folds_old_turns_and_writes_the_summary_back() -> None:
    """Old turns fold into ``msg-summary-{from}-{to}`` that lists the ids it covers."""
    store = InMemoryStore()
    summarizer = mock(reply="Earlier: greetings.")
    strategy = summarize(recent=2, provider=summarizer, model="small", size=6)
    for n in range(1, 4):
        await chat_agent(store, reply=f"long answer number {n} " * 5,
                         strategy=strategy).run(f"long question number {n} " * 5)
    result = await chat_agent(store, strategy=strategy).run("and now?")
    summary = await store.get(CONV, "msg-summary-1-2")
    assert summary is not None and summary.metadata is not None
    assert summary.metadata["summarizes"]["covered_ids"] == [  # type: ignore[index]
        "msg-1-0", "msg-1-1", "msg-2-0", "msg-2-1"]
    recall = result.recording.state["memory_recall_chat"]
    assert recall["entry_ids"] == ["msg-summary-1-2", "msg-3-0", "msg-3-1"]
    assert "[summary of earlier turns 1–2" in recall["text"]
    assert await store.get(CONV, "msg-1-0") is not None  # originals are kept


def test_catalogue_and_refusals() -> None:
    """Every declared (strategy, type) pair builds; undeclared pairs are refused by name."""
    store = InMemoryStore()
    embedder = mock_embedder(16)
    made = {"window": window(3), "budget": budget(), "top_k": top_k(embedder=embedder),
            "summarize": summarize(recent=1, provider=mock(reply="s"), model="m", size=4)}
    for info in list_memory_strategies():
        for kind in ("episodic", "semantic", "narrative", "causal"):
            build = lambda: define_memory(  # noqa: E731
                id="m", type=kind, strategy=made[info.kind], store=store)  # type: ignore[arg-type]
            if kind in info.types:
                assert build().type == kind
            else:
                with pytest.raises(ConfigurationError, match="cannot use"):
                    build()
    with pytest.raises(ConfigurationError, match="recent=3, size=3"):
        summarize(recent=3, provider=mock(reply="s"), model="m", size=3)
    with pytest.raises(ConfigurationError, match="not a MemoryStore"):
        define_memory(id="m", type="episodic", strategy=window(3), store=object())  # type: ignore


async def test_localize_names_a_stale_memory_entry_as_causal() -> None:
    """The culprit is a stale entry recalled from turn 1; ablation names its id and turn."""
    from agentfootprint.explain import localize_context_bug
    from agentfootprint.memory import MemoryEntry, MemorySource

    history = [
        ("msg-1-0", {"role": "user", "content": "Ship my orders to 1 Old Street."}, 1, 1),
        ("msg-1-1", {"role": "assistant", "content": "Noted the address."}, 1, 2),
        ("msg-2-0", {"role": "user", "content": "I like blue mugs."}, 2, 3),
        ("msg-2-1", {"role": "assistant", "content": "Blue mugs it is."}, 2, 4),
    ]

    async def seeded() -> InMemoryStore:
        store = InMemoryStore()
        await store.put_many(CONV, [
            MemoryEntry(id=i, value=v, source=MemorySource(turn=t), created_at=at)
            for i, v, t, at in history])
        return store

    def answer(request: Any) -> str:
        old = "Old Street" in (request.system or "")
        return "Shipping to 1 Old Street." if old else "Shipping to your profile address."

    async def build(without: frozenset[str] = frozenset(), seed: int = 0) -> Agent:
        exclude = [s.split("#", 1)[1] for s in without if s.startswith("memory:chat#")]
        chat = define_memory(id="chat", type="episodic", strategy=window(10),
                             store=await seeded(), read_only=True, exclude=exclude)
        return Agent(provider=mock(respond=answer), model="m", memory=[chat], identity=CONV)

    result = await (await build()).run("Where will my order ship?")
    assert result.content == "Shipping to 1 Old Street."
    report = await localize_context_bug(
        result, rebuild=build, is_wrong=lambda a: "Old Street" in a)
    culprit = report.find("memory:chat#msg-1-0")
    assert culprit.verdict == "CAUSAL"
    assert report.verdict_of("memory:chat#msg-2-0") == "NOT CONFIRMED"
    assert report.baseline_stable
    chain = backtrack(result, suspect="memory:chat#msg-1-0")
    assert "msg-1-0" in chain.hops[-1].text and "turn(s) 1" in chain.hops[-1].text


def test_strategy_by_name_with_options() -> None:
    """``strategy="window", keep_turns=N`` is window(2N); unknown names and stray options are
    refused by name; the id defaults to the type."""
    store = InMemoryStore()
    made = define_memory(type="episodic", strategy="window", store=store, keep_turns=10)
    assert made.id == "episodic" and made.strategy == window(20)
    picked = define_memory(type="semantic", strategy="top_k", store=store, k=2,
                           embedder=mock_embedder(8))
    assert picked.strategy.kind == "top_k"
    with pytest.raises(ConfigurationError, match="strategy='sliding' is not a strategy"):
        define_memory(type="episodic", strategy="sliding", store=store)
    with pytest.raises(ConfigurationError, match="keep_turns but strategy= is already built"):
        define_memory(type="episodic", strategy=window(3), store=store, keep_turns=2)
    with pytest.raises(ConfigurationError, match="needs keep_turns=N"):
        define_memory(type="episodic", strategy="window", store=store, turns=2)
    with pytest.raises(ConfigurationError, match="list_memory_strategies"):
        define_memory(type="episodic", strategy="budget", store=store, turns=2)


def test_type_and_store_are_checked_before_the_strategy() -> None:
    """A wrong type or a path for a store is named as such, never as a strategy's TypeError or
    a bare KeyError."""
    with pytest.raises(ConfigurationError, match=r"is not a memory type; use one of episodic"):
        define_memory(type="chat", strategy=window(10), store=InMemoryStore())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="type='chat'"):
        define_memory(type="chat", strategy="window", store=InMemoryStore())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"store=SQLiteStore\('chat.db'\)"):
        define_memory(type="episodic", strategy="window", store="chat.db",  # type: ignore[arg-type]
                      keep_turns=2)
