"""Seed 004 — ``write_messages``: one test per rule, named after it."""

from __future__ import annotations

from typing import Any

import pytest
from memory_helpers import Clock

from agentfootprint.flow import flow_chart
from agentfootprint.memory import InMemoryStore, MemoryIdentity, MemoryStoreError, SQLiteStore
from agentfootprint.memory._stages import identity_record, write_messages

ALICE = MemoryIdentity("conv-1", principal="alice", tenant="acme")
TURN = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


async def run_stage(stage: Any, **args: Any) -> dict[str, Any]:
    chart = flow_chart("Stage", stage, id="stage").build()
    run = await chart.run({"identity": identity_record(ALICE), **args})
    return dict(run.state)


class CountingStore(InMemoryStore):
    """Counts the calls a stage makes."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.calls: list[str] = []

    async def put_many(self, identity: Any, entries: Any) -> None:
        self.calls.append("put_many")
        await super().put_many(identity, entries)

    async def put(self, identity: Any, entry: Any) -> None:
        self.calls.append("put")
        await super().put(identity, entry)

    async def record_signature(self, identity: Any, signature: str) -> None:
        self.calls.append("record_signature")
        await super().record_signature(identity, signature)


async def test_ids_are_msg_turn_index() -> None:
    """One entry per new message, id ``msg-{turn}-{index}``."""
    store = InMemoryStore()
    state = await run_stage(write_messages(store), turn=3, new_messages=TURN)
    assert state["written"] == ["msg-3-0", "msg-3-1"]
    assert (await store.get(ALICE, "msg-3-0")).value == TURN[0]  # type: ignore[union-attr]
    assert (await store.get(ALICE, "msg-3-1")).value == TURN[1]  # type: ignore[union-attr]


async def test_every_entry_carries_source_turn_and_identity() -> None:
    """``source.turn`` and ``source.identity`` let recall say "from turn N" of whom."""
    store = InMemoryStore()
    await run_stage(write_messages(store), turn=5, new_messages=TURN)
    entry = await store.get(ALICE, "msg-5-1")
    assert entry is not None and entry.source is not None
    assert entry.source.turn == 5 and entry.source.identity == ALICE


async def test_signatures_are_recorded_so_seen_recognises_content() -> None:
    """With ``signature_from`` each message's signature is recorded; ``seen`` then says True."""
    store = CountingStore()
    stage = write_messages(store, signature_from=lambda m: "sig:" + m["content"])
    await run_stage(stage, turn=1, new_messages=TURN)
    assert await store.seen(ALICE, "sig:hi") and await store.seen(ALICE, "sig:hello")
    assert not await store.seen(ALICE, "sig:other")
    assert store.calls == ["put_many", "record_signature", "record_signature"]


async def test_without_signature_from_no_signature_is_recorded() -> None:
    """Recognition is opt-in: without ``signature_from`` no signature call is made."""
    store = CountingStore()
    await run_stage(write_messages(store), turn=1, new_messages=TURN)
    assert store.calls == ["put_many"]


async def test_rerun_of_a_turn_overwrites_instead_of_growing() -> None:
    """Deterministic ids make a re-run of the same turn idempotent."""
    store = InMemoryStore()
    await run_stage(write_messages(store), turn=2, new_messages=TURN)
    again = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "retry"}]
    await run_stage(write_messages(store), turn=2, new_messages=again)
    page = await store.list(ALICE)
    assert sorted(e.id for e in page.entries) == ["msg-2-0", "msg-2-1"]
    assert (await store.get(ALICE, "msg-2-1")).value["content"] == "retry"  # type: ignore


async def test_id_from_gives_app_level_ids() -> None:
    """``id_from(turn, index, message)`` replaces the default id shape."""
    store = InMemoryStore()
    stage = write_messages(store, id_from=lambda t, i, m: f"{m['role']}-{t}.{i}")
    state = await run_stage(stage, turn=4, new_messages=TURN)
    assert state["written"] == ["user-4.0", "assistant-4.1"]


async def test_content_is_stored_verbatim() -> None:
    """No redaction touches what the store holds (memory is working state)."""
    store = InMemoryStore()
    secret = [{"role": "user", "content": "my card is 4111 1111 1111 1111"}]
    await run_stage(write_messages(store), turn=1, new_messages=secret)
    assert (await store.get(ALICE, "msg-1-0")).value == secret[0]  # type: ignore[union-attr]


async def test_ttl_expires_entries_ttl_after_now_one_clock_read() -> None:
    """``ttl_ms``: every entry expires ``now + ttl``, with one ``now`` for the whole batch."""
    clock = Clock(10_000)
    store = InMemoryStore(clock=clock)
    await run_stage(write_messages(store, ttl_ms=500, clock=clock), turn=1, new_messages=TURN)
    first, second = await store.get(ALICE, "msg-1-0"), await store.get(ALICE, "msg-1-1")
    assert first is not None and second is not None
    assert first.expires_at == second.expires_at == 10_500
    assert first.created_at == first.updated_at == second.updated_at == 10_000
    clock.now = 10_500
    assert await store.get(ALICE, "msg-1-0") is None


async def test_tier_is_stamped() -> None:
    """``tier`` tags every written entry; tier-filtered reads then find them."""
    store = InMemoryStore()
    await run_stage(write_messages(store, tier="hot"), turn=1, new_messages=TURN)
    assert len((await store.list(ALICE, tiers=["hot"])).entries) == 2
    assert (await store.list(ALICE, tiers=["cold"])).entries == []


async def test_empty_new_messages_makes_no_store_call() -> None:
    """Nothing new this turn: the stage returns without touching the store."""
    store = CountingStore()
    state = await run_stage(write_messages(store), turn=1, new_messages=[])
    assert store.calls == [] and "written" not in state


async def test_one_put_many_per_invocation() -> None:
    """All of a turn's messages go in one batch."""
    store = CountingStore()
    await run_stage(write_messages(store), turn=1, new_messages=TURN * 3)
    assert store.calls == ["put_many"]


async def test_store_errors_propagate(tmp_path: Any) -> None:
    """A failing store fails the stage loudly; nothing is guessed around."""
    store = SQLiteStore(tmp_path / "m.db")
    store.close_sync()
    with pytest.raises(Exception) as caught:
        await run_stage(write_messages(store), turn=1, new_messages=TURN)
    assert isinstance(caught.value.__cause__, MemoryStoreError)
