"""RedisStore specifics the shared conformance suite cannot see: configuration, keys, Redis TTLs,
index repair, batch atomicity, error translation and lifecycle."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
import redis.exceptions
from memory_helpers import Clock, drop_redis_prefix, entry, redis_prefix, redis_url

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory import (
    InvalidCursorError,
    MemoryEntry,
    MemoryIdentity,
    MemoryStoreError,
    UnreadableEntryError,
)
from agentfootprint.memory._store import VectorSearchStore
from agentfootprint.memory.stores._redis import CLEANUP_GRACE_MS, RedisStore

ALICE = MemoryIdentity("c1", principal="alice", tenant="acme")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def raw() -> AsyncIterator[Any]:
    """A plain client on the test server, for looking under the store."""
    client = redis.asyncio.Redis.from_url(redis_url(), decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def store(clock: Clock) -> AsyncIterator[RedisStore]:
    made = RedisStore(redis_url(), prefix=redis_prefix(), clock=clock)
    yield made
    await made.aclose()
    drop_redis_prefix(made.prefix)


async def keys(raw: Any, store: RedisStore) -> set[str]:
    return {k async for k in raw.scan_iter(match=f"{store.prefix}/*")}


# -- configuration (no server needed) ---------------------------------------------------------


def test_needs_exactly_one_of_url_or_client() -> None:
    """Neither or both of url and client is a configuration error that says what to pass."""
    with pytest.raises(ConfigurationError, match="exactly one of url"):
        RedisStore()
    client = redis.asyncio.Redis()
    with pytest.raises(ConfigurationError, match="exactly one of url"):
        RedisStore("redis://localhost", client=client)


@pytest.mark.parametrize("prefix", ["", "a/b", "a{b", "a}b"])
def test_prefix_cannot_hold_key_delimiters(prefix: str) -> None:
    """A prefix that could shift the namespace boundary inside a key is refused."""
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisStore("redis://localhost", prefix=prefix)


def test_bad_url_is_a_configuration_error_without_the_password() -> None:
    """An unusable URL is refused by name, and a password in it never reaches the message."""
    with pytest.raises(ConfigurationError, match="not a Redis URL") as caught:
        RedisStore("http://user:hunter2@localhost:6379/0")
    assert "hunter2" not in str(caught.value)


def test_name_hides_the_password() -> None:
    """The store's name (used in every error) shows where it points but not the password."""
    store = RedisStore("redis://user:hunter2@localhost:6380/3", prefix="p")
    assert store.name == "RedisStore('redis://user:***@localhost:6380/3', prefix='p')"
    described = RedisStore(client=redis.asyncio.Redis(port=6381, db=2))
    assert described.name == "RedisStore('redis://localhost:6381/2')"


def test_missing_redis_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the redis package the store says the exact pip command."""
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[redis\]"'):
        RedisStore("redis://localhost")


def test_capabilities_declare_vector_search_and_atomic_claims() -> None:
    """Vector search is declared (exact cosine, computed client-side); claims are atomic."""
    store = RedisStore("redis://localhost")
    assert store.capabilities.vector_search is True
    assert isinstance(store, VectorSearchStore)
    assert store.capabilities.atomic_turn_claim is True


async def test_an_unreadable_vector_is_named_not_skipped(raw: Any) -> None:
    """A corrupted vector field fails the search naming the entry; the key is left alone."""
    prefix = redis_prefix()
    store = RedisStore(client=raw, prefix=prefix)
    try:
        await store.put(ALICE, MemoryEntry(id="a", value="x", embedding=[1.0, 0.0]))
        key = f"{prefix}/{{{ALICE.namespace}}}/e/a"
        await raw.hset(key, "vec", "not base64!")
        with pytest.raises(UnreadableEntryError, match="entry 'a' has a vector that is not"):
            await store.search(ALICE, [1.0, 0.0])
        assert await raw.hget(key, "vec") == "not base64!"
        await raw.hset(key, "vec", "AAAA")  # 3 bytes: not a whole float32
        with pytest.raises(UnreadableEntryError, match="entry 'a'"):
            await store.search(ALICE, [1.0, 0.0])
    finally:
        drop_redis_prefix(prefix)


async def test_the_vector_index_follows_writes_from_another_process(raw: Any) -> None:
    """The cached index is re-read when the namespace's write sequence moves: a put or a
    delete by another store object (standing in for another process) shows in the next search."""
    prefix = redis_prefix()
    here, there = RedisStore(client=raw, prefix=prefix), RedisStore(client=raw, prefix=prefix)
    try:
        await there.put(ALICE, MemoryEntry(id="a", value="x", embedding=[1.0, 0.0]))
        assert [h.entry.id for h in await here.search(ALICE, [1.0, 0.0], k=5)] == ["a"]
        await there.put(ALICE, MemoryEntry(id="b", value="y", embedding=[0.9, 0.1]))
        assert [h.entry.id for h in await here.search(ALICE, [1.0, 0.0], k=5)] == ["a", "b"]
        await there.delete(ALICE, "a")
        assert [h.entry.id for h in await here.search(ALICE, [1.0, 0.0], k=5)] == ["b"]
    finally:
        drop_redis_prefix(prefix)


async def test_unreachable_server_is_a_store_error_naming_the_store() -> None:
    """Connection refused becomes MemoryStoreError naming the store, with the cause kept."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with RedisStore(f"redis://127.0.0.1:{port}/0") as store:
        with pytest.raises(MemoryStoreError) as caught:
            await store.get(ALICE, "a")
    assert caught.value.store == store.name
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)


class FailingClient:
    """Stands in for redis.asyncio.Redis and raises the driver error it was given."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def register_script(self, script: str) -> Any:
        async def run(**_: object) -> None:
            raise self.error

        return run

    def __getattr__(self, name: str) -> Any:
        async def fail(*_: object, **__: object) -> None:
            raise self.error

        return fail


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.ConnectionError("Connection reset by peer"),
        redis.exceptions.TimeoutError("Timeout reading from socket"),
        redis.exceptions.ResponseError("WRONGTYPE Operation against a key"),
        redis.exceptions.AuthenticationError("invalid password"),
        redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
    ],
)
async def test_driver_errors_become_memory_store_errors(error: Exception) -> None:
    """Every redis-py error from every method becomes MemoryStoreError, cause and text kept."""
    store = RedisStore(client=FailingClient(error))  # type: ignore[arg-type]
    calls = [
        store.get(ALICE, "a"),
        store.put(ALICE, entry("a")),
        store.list(ALICE),
        store.delete(ALICE, "a"),
        store.seen(ALICE, "s"),
        store.record_signature(ALICE, "s"),
        store.claim_turn(ALICE, 1),
    ]
    for call in calls:
        with pytest.raises(MemoryStoreError, match=str(error)) as caught:
            await call
        assert caught.value.__cause__ is error


# -- against the server -----------------------------------------------------------------------


async def test_keys_are_prefixed_and_cannot_compose_another_namespace(
    store: RedisStore, raw: Any
) -> None:
    """Ids and conversation ids holding the old ':e:' separator never reach each other's keys."""
    plain = MemoryIdentity("c")
    tricky = MemoryIdentity("c:e:x")
    await store.put(plain, entry("x:e:y", value="plain"))
    await store.put(tricky, entry("y", value="tricky"))
    await store.put(MemoryIdentity("c}/e/x"), entry("y", value="braces"))
    got = await store.get(plain, "x:e:y")
    assert got is not None and got.value == "plain"
    assert await store.get(plain, "y") is None
    other = await store.get(tricky, "y")
    assert other is not None and other.value == "tricky"
    assert all(k.startswith(f"{store.prefix}/{{") for k in await keys(raw, store))
    assert len([k for k in await keys(raw, store) if "/e/" in k]) == 3


async def test_expiring_entries_get_a_redis_ttl_past_their_expiry(
    store: RedisStore, raw: Any, clock: Clock
) -> None:
    """Redis drops an expired entry's hash a grace period after expiry; others never expire."""
    await store.put(ALICE, entry("soon", expires_at=clock.now + 5_000))
    await store.put(ALICE, entry("past", expires_at=clock.now - 5_000))
    await store.put(ALICE, entry("forever"))
    prefix = f"{store.prefix}/{{{ALICE.namespace}}}/e/"
    soon = await raw.pttl(prefix + "soon")
    assert CLEANUP_GRACE_MS < soon <= CLEANUP_GRACE_MS + 5_000
    assert 0 < await raw.pttl(prefix + "past") <= CLEANUP_GRACE_MS
    assert await raw.pttl(prefix + "forever") == -1
    await store.put(ALICE, entry("soon"))
    assert await raw.pttl(prefix + "soon") == -1
    await store.put_many(ALICE, [entry("first"), entry("far", expires_at=10**30)])
    assert await raw.pttl(prefix + "far") == -1
    assert {e.id for e in (await store.list(ALICE)).entries} == {"soon", "forever", "first", "far"}


async def test_list_skips_and_repairs_index_members_whose_entry_redis_dropped(
    store: RedisStore, raw: Any
) -> None:
    """When Redis expires an entry's hash the index member is skipped, removed, paging intact."""
    await store.put_many(ALICE, [entry(f"e{i}", updated_at=i) for i in range(6)])
    prefix = f"{store.prefix}/{{{ALICE.namespace}}}/"
    await raw.delete(prefix + "e/e4", prefix + "e/e1")
    ids, cursor = [], None
    while True:
        page = await store.list(ALICE, cursor=cursor, limit=2)
        ids += [e.id for e in page.entries]
        if page.cursor is None:
            break
        cursor = page.cursor
    assert ids == ["e5", "e3", "e2", "e0"]
    assert await raw.zcard(prefix + "idx") == 4


async def test_overwrite_leaves_one_index_member(store: RedisStore, raw: Any) -> None:
    """Re-putting an id (also twice in one batch) keeps exactly one index member for it."""
    await store.put(ALICE, entry("a", value=1))
    await store.put_many(ALICE, [entry("a", value=2), entry("b"), entry("a", value=3)])
    assert await raw.zcard(f"{store.prefix}/{{{ALICE.namespace}}}/idx") == 2
    assert [(e.id, e.value) for e in (await store.list(ALICE)).entries] == [("a", 3), ("b", "b")]


async def test_put_many_is_all_or_nothing(store: RedisStore, raw: Any) -> None:
    """A batch that cannot be written whole writes nothing, not even its first entries."""
    await raw.set(f"{store.prefix}/{{{ALICE.namespace}}}/e/blocked", "not a hash")
    with pytest.raises(MemoryStoreError, match="WRONGTYPE") as caught:
        await store.put_many(ALICE, [entry("first"), entry("blocked"), entry("last")])
    assert caught.value.store == store.name
    assert await store.get(ALICE, "first") is None
    assert (await store.list(ALICE)).entries == []
    assert not await raw.exists(f"{store.prefix}/{{{ALICE.namespace}}}/seq")
    await raw.delete(f"{store.prefix}/{{{ALICE.namespace}}}/e/blocked")
    await store.put(ALICE, entry("kept"))
    await raw.set(f"{store.prefix}/{{{ALICE.namespace}}}/seq", "not a number")
    with pytest.raises(MemoryStoreError, match="not a write sequence"):
        await store.put_many(ALICE, [entry("kept", value="new"), entry("other")])
    assert [(e.id, e.value) for e in (await store.list(ALICE)).entries] == [("kept", "kept")]


@pytest.mark.parametrize("body", ["{not json", '{"id": "other", "value": 1}', None])
async def test_unreadable_entry_raises_and_is_left_alone(
    store: RedisStore, raw: Any, body: str | None
) -> None:
    """A hash that does not hold this entry raises UnreadableEntryError; nothing replaces it."""
    await store.put(ALICE, entry("bad"))
    key = f"{store.prefix}/{{{ALICE.namespace}}}/e/bad"
    if body is None:
        await raw.hdel(key, "body")
    else:
        await raw.hset(key, "body", body)
    before = await raw.hgetall(key)
    with pytest.raises(UnreadableEntryError) as caught:
        await store.get(ALICE, "bad")
    assert caught.value.entry_id == "bad" and caught.value.store == store.name
    with pytest.raises(UnreadableEntryError):
        await store.list(ALICE)
    assert await raw.hgetall(key) == before


async def test_cursor_out_of_range_is_refused(store: RedisStore) -> None:
    """A well-formed cursor no store could have made is refused, not read as page one."""
    with pytest.raises(InvalidCursorError):
        await store.list(ALICE, cursor=f"{2**64}:1")
    with pytest.raises(InvalidCursorError):
        await store.list(ALICE, cursor="1:-1")


async def test_updated_at_outside_64_bits_is_refused(store: RedisStore) -> None:
    """An updated_at the index cannot order is refused before anything is written."""
    with pytest.raises(ValueError, match="updated_at"):
        await store.put(ALICE, entry("far", updated_at=2**63))
    assert await store.get(ALICE, "far") is None


async def test_write_order_is_shared_by_every_client(clock: Clock) -> None:
    """Two stores (two clients) on one prefix interleave writes into one newest-first order."""
    prefix = redis_prefix()
    try:
        async with (
            RedisStore(redis_url(), prefix=prefix, clock=clock) as one,
            RedisStore(redis_url(), prefix=prefix, clock=clock) as two,
        ):
            await one.put(ALICE, entry("a", updated_at=7))
            await two.put(ALICE, entry("b", updated_at=7))
            await one.put(ALICE, entry("c", updated_at=7))
            assert [e.id for e in (await two.list(ALICE)).entries] == ["c", "b", "a"]
            claims = await asyncio.gather(one.claim_turn(ALICE, 1), two.claim_turn(ALICE, 1))
            assert sorted(claims) == [False, True]
    finally:
        drop_redis_prefix(prefix)


async def test_close_is_final_and_leaves_a_passed_client_open(raw: Any) -> None:
    """After close every call raises naming the store; a caller's own client keeps working."""
    prefix = redis_prefix()
    store = RedisStore(client=raw, prefix=prefix)
    await store.record_signature(ALICE, "s")
    await store.aclose()
    with pytest.raises(MemoryStoreError, match="after the store was closed"):
        await store.seen(ALICE, "s")
    assert await raw.ping()
    async with RedisStore(client=raw, prefix=prefix) as again:
        assert await again.seen(ALICE, "s")
    drop_redis_prefix(prefix)


async def test_responses_decoded_or_not_read_the_same(clock: Clock) -> None:
    """A passed-in client with decode_responses=False reads exactly what a decoding one wrote."""
    prefix = redis_prefix()
    raw_bytes = redis.asyncio.Redis.from_url(redis_url())
    try:
        async with RedisStore(redis_url(), prefix=prefix, clock=clock) as text_store:
            await text_store.put(ALICE, entry("é/ü", value={"k": "ß"}, tier="hot"))
        bytes_store = RedisStore(client=raw_bytes, prefix=prefix, clock=clock)
        got = await bytes_store.get(ALICE, "é/ü")
        assert got is not None and got.value == {"k": "ß"}
        assert [e.id for e in (await bytes_store.list(ALICE, tiers=["hot"])).entries] == ["é/ü"]
    finally:
        await raw_bytes.aclose()
        drop_redis_prefix(prefix)
