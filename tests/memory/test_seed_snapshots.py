"""Seed 001 — causal snapshots (``write_snapshot`` / ``load_snapshot``): a test per rule."""

from __future__ import annotations

from typing import Any

from memory_helpers import Clock

from agentfootprint.flow import flow_chart
from agentfootprint.memory import InMemoryStore, MemoryEntry, MemoryIdentity, MemorySource
from agentfootprint.memory._causal import load_snapshot, write_snapshot
from agentfootprint.memory._stages import identity_record
from agentfootprint.memory.embedding import mock_embedder

ALICE = MemoryIdentity("conv-1")
EMBED = mock_embedder(64)


def turn_messages(question: str, answer: str = "done") -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


async def run_stage(stage: Any, **args: Any) -> dict[str, Any]:
    chart = flow_chart("Stage", stage, id="stage").build()
    run = await chart.run({"identity": identity_record(ALICE), **args})
    return dict(run.state)


async def ids(store: InMemoryStore) -> list[str]:
    return sorted(e.id for e in (await store.list(ALICE)).entries)


async def test_writes_one_snap_turn_entry() -> None:
    """One entry per call, id ``snap-{turn}``, holding query, answer and evidence."""
    store = InMemoryStore()
    evidence = {"iterations": 2, "tool_calls": [{"name": "lookup", "args": {"id": 7},
                                                 "result_preview": "ok", "errored": False}]}
    state = await run_stage(write_snapshot(store, EMBED), turn=1,
                            new_messages=turn_messages("refund order 7?", "approved"),
                            run_evidence=evidence)
    assert state["written"] == ["snap-1"]
    entry = await store.get(ALICE, "snap-1")
    assert entry is not None and isinstance(entry.value, dict)
    assert entry.value["query"] == "refund order 7?"
    assert entry.value["final_content"] == "approved"
    assert entry.value["iterations"] == 2 and entry.value["tool_calls"][0]["name"] == "lookup"
    assert entry.source is not None and entry.source.turn == 1 and entry.source.identity == ALICE


async def test_query_is_embedded_with_its_embedder_id() -> None:
    """The QUERY is embedded; the vector is stamped with the embedder's id by default."""
    store = InMemoryStore()
    await run_stage(write_snapshot(store, EMBED), turn=1, new_messages=turn_messages("q one"))
    entry = await store.get(ALICE, "snap-1")
    assert entry is not None
    assert entry.embedding == MemoryEntry(id="x", value=0,
                                          embedding=(await EMBED.embed(["q one"]))[0]).embedding
    assert entry.embedding_model == EMBED.id
    await run_stage(write_snapshot(store, EMBED, embedder_id="pinned"), turn=2,
                    new_messages=turn_messages("q two"))
    assert (await store.get(ALICE, "snap-2")).embedding_model == "pinned"  # type: ignore


async def test_host_turn_is_kept_with_gaps() -> None:
    """A host that numbers turns honestly keeps its numbering: turn 5 → ``snap-5``."""
    store = InMemoryStore()
    await run_stage(write_snapshot(store, EMBED), turn=5, new_messages=turn_messages("q"))
    assert await ids(store) == ["snap-5"]


async def test_stale_host_counter_never_replaces_an_earlier_snapshot() -> None:
    """A stale counter still gets a fresh, ordered id: turn 1 again lands ``snap-2``."""
    store = InMemoryStore()
    await run_stage(write_snapshot(store, EMBED), turn=1, new_messages=turn_messages("first"))
    await run_stage(write_snapshot(store, EMBED), turn=1, new_messages=turn_messages("second"))
    assert await ids(store) == ["snap-1", "snap-2"]
    assert (await store.get(ALICE, "snap-1")).value["query"] == "first"  # type: ignore


async def test_expired_snapshots_do_not_hold_numbering_open() -> None:
    """TTL-expired snapshots are ignored by the scan, as by every read."""
    clock = Clock(1_000)
    store = InMemoryStore(clock=clock)
    await run_stage(write_snapshot(store, EMBED, ttl_ms=10, clock=clock), turn=3,
                    new_messages=turn_messages("old"))
    clock.now = 2_000
    await run_stage(write_snapshot(store, EMBED, clock=clock), turn=1,
                    new_messages=turn_messages("new"))
    assert await ids(store) == ["snap-1"]


async def test_scan_is_narrowed_to_snap_ids() -> None:
    """This turn's messages already in a shared store must not push the snapshot to N+1."""
    store = InMemoryStore()
    await store.put(ALICE, MemoryEntry(id="msg-4-0", value={"role": "user", "content": "q"},
                                       source=MemorySource(turn=4)))
    await run_stage(write_snapshot(store, EMBED), turn=4, new_messages=turn_messages("q"))
    assert "snap-4" in await ids(store)


async def test_under_a_resolved_turn_the_scan_changes_nothing() -> None:
    """When the run's turn already satisfies the rule, the self-defense re-answers it."""
    store = InMemoryStore()
    for turn in (1, 2, 3):
        await run_stage(write_snapshot(store, EMBED), turn=turn,
                        new_messages=turn_messages(f"q{turn}"))
    assert await ids(store) == ["snap-1", "snap-2", "snap-3"]


async def test_no_new_messages_is_a_no_op() -> None:
    """No final answer (say, a paused run): nothing is written; the re-run captures it."""
    store = InMemoryStore()
    state = await run_stage(write_snapshot(store, EMBED), turn=1, new_messages=[])
    assert await ids(store) == [] and "written" not in state
    await run_stage(write_snapshot(store, EMBED), turn=1,
                    new_messages=[{"role": "user", "content": "   "}])
    assert await ids(store) == []


async def test_ttl_and_tier_are_stamped() -> None:
    """``ttl_ms`` and ``tier`` apply to the snapshot like to any entry."""
    clock = Clock(5_000)
    store = InMemoryStore(clock=clock)
    await run_stage(write_snapshot(store, EMBED, ttl_ms=100, tier="warm", clock=clock), turn=1,
                    new_messages=turn_messages("q"))
    entry = await store.get(ALICE, "snap-1")
    assert entry is not None and entry.expires_at == 5_100 and entry.tier == "warm"


async def test_load_recalls_similar_past_queries_only() -> None:
    """A new question close to a past one recalls that run; an unrelated one recalls nothing."""
    store = InMemoryStore()
    await run_stage(write_snapshot(store, EMBED), turn=1,
                    new_messages=turn_messages("refund for order 7 please", "approved"),
                    run_evidence={"tool_calls": [{"name": "lookup", "args": {"order": 7},
                                                  "result_preview": "paid", "errored": False}]})
    stage = load_snapshot(store, EMBED, top_k=1, min_score=0.5)
    state = await run_stage(stage, messages=[{"role": "user",
                                              "content": "refund for order 7 please now"}])
    recall = state["recall"]
    assert recall["entry_ids"] == ["snap-1"] and recall["turns"] == [1]
    assert recall["text"].startswith('[Past run · query: "refund for order 7 please" · score:')
    assert 'lookup({"order": 7}) → paid' in recall["text"]
    assert recall["text"].endswith("Final answer: approved")
    far = await run_stage(stage, messages=[{"role": "user", "content": "weather in Oslo"}])
    assert far["recall"]["entry_ids"] == []


async def test_load_skips_snapshots_of_another_embedder() -> None:
    """An embedder swap does not cross-pollute: vectors of another model are never compared."""
    store = InMemoryStore()
    await run_stage(write_snapshot(store, EMBED, embedder_id="old-model"), turn=1,
                    new_messages=turn_messages("refund order 7"))
    state = await run_stage(load_snapshot(store, EMBED, min_score=0.0),
                            messages=[{"role": "user", "content": "refund order 7"}])
    assert state["recall"]["entry_ids"] == []
