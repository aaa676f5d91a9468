"""``RedisStore``: memory on a Redis server, shared by every process that can reach it.

Keys are ``{prefix}/{{namespace}}/{kind}`` (``seq``, ``idx``, ``sig``, ``turns``, ``claims``) and
``{prefix}/{{namespace}}/e/{id}`` for an entry. A namespace is always three segments with no
``/`` inside one, and the prefix may not hold ``/``, so splitting a key on ``/`` recovers exactly
one (prefix, namespace, kind, id): no id or namespace can compose another namespace's key. The
braces are a Redis Cluster hash tag keeping a namespace's keys on one slot (only a single server
is tested).

Each entry is a hash (``body`` JSON without the vector, ``member``, ``expires_at``, ``tier``,
and for an entry with a vector ``vec``, base64 float32, and ``model``). The namespace's
``idx`` is a sorted set read in lexicographic order, one member per entry:
``updated_at`` (offset by 2**63, 20 digits) + write sequence (20 digits) + id, so a reverse
range is newest first by ``(updated_at, write seq)`` and a keyset cursor is a member prefix. The
write sequence is an ``INCR`` per namespace, taken inside the Lua script that writes the batch,
so batches are atomic and sequences are unique even across processes.

Vector search is exact cosine computed here, not in Redis (plain Redis has no vector index):
a namespace's vectors are read once into a cached index (NumPy when installed, as the SQLite
store does) and re-read only when the namespace's write sequence has moved, which every put and
delete advance, whichever process wrote. The vectors are read from the namespace's ``vblk``
list of packed float32 blocks, pushed by the put script (``_vector_index.py``), so a fresh
process reads them in a few replies instead of one per entry.

Expiry is decided by ``expires_at`` against this store's clock on every read; Redis also drops
an expired entry's hash :data:`CLEANUP_GRACE_MS` after it expired (``PEXPIRE``, relative, so it
never fires before the logical expiry). An index member whose hash is gone or points at a newer
write is stale: reads skip it and remove it.
"""

from __future__ import annotations

import base64
import binascii
import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from agentfootprint.errors import ConfigurationError
from agentfootprint.memory._entry import MemoryEntry, Tier, now_ms
from agentfootprint.memory._errors import (
    InvalidCursorError,
    MemoryStoreError,
    UnreadableEntryError,
)
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import (
    MemoryPage,
    ScoredEntry,
    StoreCapabilities,
    check_entries,
    check_k,
    check_limit,
)
from agentfootprint.memory.stores._closing import Closing
from agentfootprint.memory.stores._keyset import decode_cursor, encode_cursor
from agentfootprint.memory.stores._vector_index import (
    REDIS_COMPACT_AT,
    RedisBlocks,
    block_of,
    compact_redis,
    live_seqs,
    packed_index,
    redis_block_text,
    redis_blocks,
)
from agentfootprint.memory.stores._vectors import (
    VectorIndex,
    VectorMeta,
    pack_float32,
    search_filter,
    unpack_float32,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["CLEANUP_GRACE_MS", "RedisStore"]

CLEANUP_GRACE_MS = 60_000
"""How long after its expiry Redis keeps an expired entry's hash (reads already hide it)."""

_MAX_CLEANUP_MS = 2**45
"""Expiries further out than this (about 1,100 years) get no Redis TTL, which could overflow."""
_T = TypeVar("_T")
_OFFSET = 2**63
_WIDTH = 20
_SCAN_BATCH = 128
_VECTOR_BATCH = 1000

# KEYS: seq counter, index, vector blocks list, then one entry hash per entry in write order.
# ARGV: eight per entry — sort prefix, id, body, expires_at, tier, cleanup ttl ('' = none),
# vector (base64 of little-endian float32, '' = none), embedding model ('' = none); then the
# batch's vector block (binary, '' = none; _vector_index.py), pushed with the sequences given.
# Key types are checked before anything is written, so a batch is applied whole or not at all.
# Returns the length of the blocks list.
_PUT_MANY = """
local function kind(key) return redis.call('TYPE', key)['ok'] end
local k = kind(KEYS[1])
if k ~= 'none' and k ~= 'string' then return redis.error_reply('WRONGTYPE ' .. KEYS[1]) end
local seq = redis.call('GET', KEYS[1])
if seq and not string.match(seq, '^%d+$') then
  return redis.error_reply('ERR ' .. KEYS[1] .. ' is not a write sequence')
end
k = kind(KEYS[2])
if k ~= 'none' and k ~= 'zset' then return redis.error_reply('WRONGTYPE ' .. KEYS[2]) end
k = kind(KEYS[3])
if k ~= 'none' and k ~= 'list' then return redis.error_reply('WRONGTYPE ' .. KEYS[3]) end
for i = 4, #KEYS do
  k = kind(KEYS[i])
  if k ~= 'none' and k ~= 'hash' then return redis.error_reply('WRONGTYPE ' .. KEYS[i]) end
end
local seqs = {}
for i = 4, #KEYS do
  local a = (i - 4) * 8
  seq = redis.call('INCR', KEYS[1])
  seqs[#seqs + 1] = seq
  local old = redis.call('HGET', KEYS[i], 'member')
  if old then redis.call('ZREM', KEYS[2], old) end
  local member = ARGV[a + 1] .. string.format('%020d', seq) .. ARGV[a + 2]
  redis.call('DEL', KEYS[i])
  redis.call('HSET', KEYS[i], 'body', ARGV[a + 3], 'member', member,
             'expires_at', ARGV[a + 4], 'tier', ARGV[a + 5])
  if ARGV[a + 7] ~= '' then
    redis.call('HSET', KEYS[i], 'vec', ARGV[a + 7], 'model', ARGV[a + 8])
  end
  redis.call('ZADD', KEYS[2], 0, member)
  if ARGV[a + 6] ~= '' then redis.call('PEXPIRE', KEYS[i], ARGV[a + 6]) end
end
if ARGV[#ARGV] ~= '' then
  redis.call('RPUSH', KEYS[3], table.concat(seqs, ',') .. '|' .. ARGV[#ARGV])
end
return redis.call('LLEN', KEYS[3])
"""

# Turn claims: ``turns`` is the set of claimed turns (SADD lets one caller create a claim) and
# ``claims`` maps a turn to "claimed_at|owner" (owner '' once settled; a turn without a field
# was claimed by an older version: stamped 0, held by nobody).
# KEYS: turns set, claims hash. ARGV: turn, now, owner ('' = none), reclaim_before ('' = none).
_CLAIM = """
local claim = ARGV[2] .. '|' .. ARGV[3]
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], claim)
  return 1
end
local info = redis.call('HGET', KEYS[2], ARGV[1])
local at, holder = 0, ''
if info then
  local sep = string.find(info, '|', 1, true)
  at = tonumber(string.sub(info, 1, sep - 1)) or 0
  holder = string.sub(info, sep + 1)
end
local won = false
if holder ~= '' then
  won = ARGV[3] ~= '' and holder == ARGV[3]
elseif ARGV[4] ~= '' then
  won = at < tonumber(ARGV[4])
end
if not won then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], claim)
return 1
"""

# KEYS: turns set, claims hash. ARGV: turn, now, owner, keep ('1' settles, '0' removes).
_RELEASE = """
local info = redis.call('HGET', KEYS[2], ARGV[1])
if not info then return 0 end
local sep = string.find(info, '|', 1, true)
if string.sub(info, sep + 1) ~= ARGV[3] then return 0 end
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. '|')
else
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('SREM', KEYS[1], ARGV[1])
end
return 1
"""

# KEYS: index, entry hash.
# KEYS: entry hashes; ARGV: field names. One reply per key: its fields (nil where absent).
# One command per batch instead of one HMGET each: packing the commands was most of the time
# of reading many entries.
_READ_FIELDS = """
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('HMGET', KEYS[i], unpack(ARGV))
end
return out
"""

# KEYS: seq counter (advanced so cached vector indexes notice), index, entry hash.
_DELETE = """
local old = redis.call('HGET', KEYS[3], 'member')
if old then
  redis.call('ZREM', KEYS[2], old)
  redis.call('INCR', KEYS[1])
end
return redis.call('DEL', KEYS[3])
"""


class RedisStore(Closing):
    """A ``MemoryStore`` on Redis; needs ``pip install "agentfootprint[redis]"``.

    Pass ``url`` (the store opens and closes its own client) or ``client`` (yours; ``close``
    leaves it open). ``prefix`` separates independent stores on one server. Vector search is
    exact cosine over a cached copy of the namespace's vectors (see the module docstring).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | None = None,
        prefix: str = "agentfootprint",
        clock: Callable[[], int] = now_ms,
    ) -> None:
        if (url is None) == (client is None):
            raise ConfigurationError(
                "RedisStore needs exactly one of url='redis://host:6379/0' or client=<a "
                "redis.asyncio.Redis>."
            )
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "/{}"):
            raise ConfigurationError(
                f"RedisStore(prefix={prefix!r}) must be a non-empty string without '/', '{{' "
                "or '}'; those characters delimit the namespace inside every key."
            )
        self._prefix = prefix
        self._clock = clock
        self._owns_client = client is None
        if client is None:
            try:
                import redis.asyncio
            except ImportError as exc:
                raise ConfigurationError(
                    'RedisStore needs the redis package; run: pip install "agentfootprint[redis]"'
                ) from exc
            try:
                client = redis.asyncio.Redis.from_url(str(url), decode_responses=True)
            except ValueError as exc:
                raise ConfigurationError(
                    f"RedisStore(url={_redact(str(url))!r}) is not a Redis URL ({exc}); use "
                    "redis://host:port/db, rediss://… or unix:///path/to/socket."
                ) from exc
            where = _redact(str(url))
        else:
            where = _describe(client)
        self._name = (
            f"RedisStore({where!r})"
            if prefix == "agentfootprint"
            else f"RedisStore({where!r}, prefix={prefix!r})"
        )
        self._client: Redis | None = client
        self._put_many_script = client.register_script(_PUT_MANY)
        self._delete_script = client.register_script(_DELETE)
        self._read_fields_script = client.register_script(_READ_FIELDS)
        self._claim_script = client.register_script(_CLAIM)
        self._release_script = client.register_script(_RELEASE)
        self._backend = f"redis:{where}/{prefix}"
        self._vectors: dict[str, tuple[str | None, VectorIndex, builtins.list[VectorMeta]]] = {}
        self._blocks: dict[str, RedisBlocks] = {}  # the packed vector blocks read so far

    @property
    def name(self) -> str:
        return self._name

    @property
    def prefix(self) -> str:
        """The first segment of every key this store touches."""
        return self._prefix

    @property
    def backend(self) -> str:
        """Where the data lives (server, database, prefix): two objects naming the same are one
        store."""
        return self._backend

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=True, atomic_turn_claim=True)

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the client this store opened (a passed-in client stays open); later calls
        raise ``MemoryStoreError``."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()


    def _redis(self, operation: str) -> Redis:
        if self._client is None:
            raise MemoryStoreError(
                f"{self.name}.{operation}() after the store was closed; open a new RedisStore.",
                store=self.name,
            )
        return self._client

    async def _call(self, operation: str, call: Awaitable[_T]) -> _T:
        """Await one Redis round trip, translating the driver's errors into ours."""
        from redis.exceptions import AuthenticationError, RedisError
        from redis.exceptions import ConnectionError as Unreachable
        from redis.exceptions import TimeoutError as TimedOut

        try:
            return await call
        except RedisError as exc:
            unreachable = isinstance(exc, Unreachable | TimedOut) and not isinstance(
                exc, AuthenticationError)
            if unreachable:
                message = (f"{self.name}.{operation}() could not reach the server "
                           f"({type(exc).__name__}: {exc}); start Redis there, or pass the url= "
                           "of a running server.")
            else:
                message = f"{self.name}.{operation}() failed: {type(exc).__name__}: {exc}."
            raise MemoryStoreError(message, store=self.name) from exc

    def _key(self, identity: MemoryIdentity, kind: str) -> str:
        return f"{self._prefix}/{{{identity.namespace}}}/{kind}"

    def _entry_key(self, identity: MemoryIdentity, entry_id: str) -> str:
        return f"{self._prefix}/{{{identity.namespace}}}/e/{entry_id}"

    # -- entries -----------------------------------------------------------------------------

    def _decode(self, entry_id: str, body: str | bytes | None,
                vec: str | bytes | None = None) -> MemoryEntry:
        """The entry from its body, with its vector (kept apart, in ``vec``) put back."""
        problem = "it has no body"
        if body is not None:
            try:
                entry = MemoryEntry.model_validate_json(body)
            except ValidationError as exc:
                problem = f"{exc.error_count()} problem(s)"
            else:
                if entry.id == entry_id:
                    if vec:
                        entry = entry.model_copy(update={"embedding": self._vector(entry_id, vec)})
                    return entry
                problem = f"it holds an entry with id {entry.id!r}"
        raise UnreadableEntryError(
            f"{self.name} holds entry {entry_id!r} but cannot read it ({problem}); the key is "
            "left as it is — repair or delete it, nothing was replaced.",
            store=self.name,
            entry_id=entry_id,
        )

    def _expiry(self, entry_id: str, raw: str | bytes | None) -> int | None:
        text = _text(raw)
        if not text:
            return None
        try:
            return int(text)
        except ValueError:
            raise UnreadableEntryError(
                f"{self.name} entry {entry_id!r} has expires_at {text!r}, not a number; the key "
                "is left as it is — repair or delete it.",
                store=self.name,
                entry_id=entry_id,
            ) from None

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        client = self._redis("get")
        key = self._entry_key(identity, entry_id)
        body, expires_at, member, vec = await self._call(
            "get", client.hmget(key, ["body", "expires_at", "member", "vec"])
        )
        if body is None and member is None:
            return None
        expiry = self._expiry(entry_id, expires_at)
        if expiry is not None and expiry <= self._clock():
            return None
        return self._decode(entry_id, body, vec)

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        await self.put_many(identity, [entry])

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        check_entries(entries, store=self.name)
        if not entries:
            return
        client = self._redis("put_many")
        now = self._clock()
        keys = [self._key(identity, "seq"), self._key(identity, "idx"),
                self._key(identity, "vblk")]
        args: list[str | bytes] = []
        for entry in entries:
            keys.append(self._entry_key(identity, entry.id))
            cleanup = (
                ""
                if entry.expires_at is None or entry.expires_at - now > _MAX_CLEANUP_MS
                else str(max(entry.expires_at - now, 0) + CLEANUP_GRACE_MS)
            )
            args += [
                self._sort_prefix(entry),
                entry.id,
                entry.model_dump_json(exclude={"embedding"}),  # the vector goes to 'vec'
                "" if entry.expires_at is None else str(entry.expires_at),
                entry.tier or "",
                cleanup,
                "" if entry.embedding is None else _b64(pack_float32(entry.embedding)),
                entry.embedding_model or "",
            ]
        args.append(redis_block_text([
            (i, e.id, pack_float32(e.embedding), (e.embedding_model or None, e.expires_at,
                                                  e.tier or None))
            for i, e in enumerate(entries) if e.embedding is not None]))
        blocks = await self._call("put_many", self._put_many_script(keys=keys, args=args,
                                                                    client=client))
        if int(blocks) > REDIS_COMPACT_AT:
            await compact_redis(  # _vector_index.py
                client, (self._key(identity, "vblk"), self._key(identity, "vgen"),
                         self._key(identity, "idx")), lambda c: self._call("put_many", c))

    def _sort_prefix(self, entry: MemoryEntry) -> str:
        if not -_OFFSET <= entry.updated_at < _OFFSET:
            raise ValueError(
                f"{self.name} cannot order entry {entry.id!r}: updated_at={entry.updated_at!r} "
                "is outside the 64-bit range; use unix milliseconds."
            )
        return f"{entry.updated_at + _OFFSET:0{_WIDTH}d}"

    async def list(
        self,
        identity: MemoryIdentity,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        tiers: Sequence[Tier] | None = None,
    ) -> MemoryPage:
        size = check_limit(limit)
        after = decode_cursor(cursor, store=self.name) if cursor is not None else None
        if after is not None and not (-_OFFSET <= after[0] < _OFFSET and 0 <= after[1] < _OFFSET):
            raise InvalidCursorError(
                f"{self.name}.list(cursor={cursor!r}) is not a cursor this store returned; "
                "pass None for the first page or the cursor of the previous page."
            )
        client = self._redis("list")
        index = self._key(identity, "idx")
        bound = "+" if after is None else "(" + _member_prefix(*after)
        now = self._clock()
        live: builtins.list[tuple[str, str, str | bytes | None, str | bytes | None]] = []
        stale: builtins.list[str] = []
        while len(live) <= size:
            batch = max(size + 1 - len(live), _SCAN_BATCH)
            members = [
                str(_text(m))
                for m in await self._call(
                    "list", client.zrevrangebylex(index, bound, "-", start=0, num=batch)
                )
            ]
            if not members:
                break
            keys = [self._entry_key(identity, member[2 * _WIDTH :]) for member in members]
            rows = await self._call("list", self._read_fields_script(
                keys=keys, args=["body", "member", "expires_at", "tier", "vec"], client=client))
            for member, (body, current, expires_at, tier, vec) in zip(members, rows,
                                                                     strict=True):
                entry_id = member[2 * _WIDTH :]
                if _text(current) != member:
                    stale.append(member)
                    continue
                expiry = self._expiry(entry_id, expires_at)
                if expiry is not None and expiry <= now:
                    continue
                if tiers is not None and _text(tier) not in tiers:
                    continue
                live.append((member, entry_id, body, vec))
                if len(live) > size:
                    break
            if len(members) < batch:
                break
            bound = "(" + members[-1]
        if stale:
            await self._call("list", client.zrem(index, *stale))
        page = live[:size]
        last = page[-1][0] if len(live) > size else None
        return MemoryPage(
            entries=[self._decode(entry_id, body, vec) for _, entry_id, body, vec in page],
            cursor=None
            if last is None
            else encode_cursor(int(last[:_WIDTH]) - _OFFSET, int(last[_WIDTH : 2 * _WIDTH])),
        )

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        client = self._redis("delete")
        keys = [self._key(identity, "seq"), self._key(identity, "idx"),
                self._entry_key(identity, entry_id)]
        await self._call("delete", self._delete_script(keys=keys, client=client))

    # -- vector search -----------------------------------------------------------------------

    async def search(
        self,
        identity: MemoryIdentity,
        vector: Sequence[float],
        *,
        k: int = 10,
        tiers: Sequence[Tier] | None = None,
        min_score: float | None = None,
        embedder_id: str | None = None,
    ) -> builtins.list[ScoredEntry]:
        """Exact cosine over the namespace's live entries, best first, ties by id."""
        check_k(k)
        index, meta = await self._hydrate(identity)
        live = search_filter(meta, now=self._clock(), tiers=tiers, embedder_id=embedder_id)
        gone: set[str] = set()  # hits whose hash is gone (expired past its grace, deleted)

        def keep(position: int) -> bool:
            return live(position) and (not gone or index.ids[position] not in gone)

        while True:
            hits = index.rank(list(vector), keep=keep, k=k, min_score=min_score)
            if not hits:
                return []
            keys = [self._entry_key(identity, entry_id) for entry_id, _ in hits]
            found = await self._call("search", self._read_fields_script(
                keys=keys, args=["body", "vec"], client=self._redis("search")))
            lost = {entry_id for (entry_id, _), (body, _) in zip(hits, found, strict=True)
                    if body is None}
            if not lost:
                return [ScoredEntry(entry=self._decode(entry_id, body, vec), score=score)
                        for (entry_id, score), (body, vec) in zip(hits, found, strict=True)]
            gone |= lost  # rank again without them, so k live entries come back

    async def _hydrate(self, identity: MemoryIdentity
                       ) -> tuple[VectorIndex, builtins.list[VectorMeta]]:
        """The namespace's vectors and what a search filters on, cached until its write
        sequence moves. Vectors come from the namespace's packed blocks (``_vector_index.py``:
        only elements pushed since the last read); entries no block holds are read one by one.
        A record counts while its write sequence is still an index member.

        The sequence is read before the vectors, so a write racing the read leaves the cache
        labelled older than its content and the next search reads again.
        """
        client = self._redis("search")
        version = _text(await self._call("search", client.get(self._key(identity, "seq"))))
        cached = self._vectors.get(identity.namespace)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        found: Any = await self._call("search", client.zrange(self._key(identity, "idx"), 0, -1))
        members = [str(_text(m)) for m in found]
        blocks = await redis_blocks(
            client, (self._key(identity, "vblk"), self._key(identity, "vgen")),
            self._blocks.get(identity.namespace), lambda c: self._call("search", c))
        self._blocks[identity.namespace] = blocks
        held = {seq for block in blocks.blocks for seq in block.seqs}
        seqs = [int(member[_WIDTH:2 * _WIDTH]) for member in members]
        missing = [m for m, seq in zip(members, seqs, strict=True) if seq not in held]
        rows: builtins.list[tuple[int, str, bytes, VectorMeta]] = []
        for start in range(0, len(missing), _VECTOR_BATCH):
            batch = missing[start:start + _VECTOR_BATCH]
            keys = [self._entry_key(identity, member[2 * _WIDTH:]) for member in batch]
            replies = await self._call("search", self._read_fields_script(
                keys=keys, args=["member", "vec", "model", "expires_at", "tier"], client=client))
            for member, (current, vec, model, expires_at, tier) in zip(batch, replies,
                                                                       strict=True):
                if _text(current) != member or not vec:
                    continue  # gone, rewritten since the index was read, or has no vector
                entry_id = member[2 * _WIDTH:]
                rows.append((int(member[_WIDTH:2 * _WIDTH]), entry_id,
                             pack_float32(self._vector(entry_id, vec)),
                             (_text(model) or None, self._expiry(entry_id, expires_at),
                              _text(tier) or None)))
        index, meta = packed_index([*blocks.blocks, block_of(rows)], live_seqs(seqs))
        self._vectors[identity.namespace] = (version, index, meta)
        return index, meta

    def _vector(self, entry_id: str, raw: str | bytes) -> builtins.list[float]:
        try:
            return unpack_float32(base64.b64decode(raw, validate=True))
        except (ValueError, binascii.Error):
            raise UnreadableEntryError(
                f"{self.name} entry {entry_id!r} has a vector that is not base64 float32; the "
                "key is left as it is — repair or delete it.",
                store=self.name, entry_id=entry_id) from None

    # -- signatures and turn claims ----------------------------------------------------------

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        client = self._redis("seen")
        found = await self._call("seen", client.sismember(self._key(identity, "sig"), signature))
        return bool(found)

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        client = self._redis("record_signature")
        await self._call("record_signature", client.sadd(self._key(identity, "sig"), signature))

    async def claim_turn(
        self,
        identity: MemoryIdentity,
        turn: int,
        *,
        owner: str | None = None,
        reclaim_before: int | None = None,
    ) -> bool:
        """One Lua script: the claim is decided and written atomically across processes."""
        client = self._redis("claim_turn")
        keys = [self._key(identity, "turns"), self._key(identity, "claims")]
        args = [str(turn), str(self._clock()), owner or "",
                "" if reclaim_before is None else str(reclaim_before)]
        won = await self._call("claim_turn",
                               self._claim_script(keys=keys, args=args, client=client))
        return int(won) == 1

    async def release_turn(
        self, identity: MemoryIdentity, turn: int, *, owner: str, keep: bool
    ) -> None:
        client = self._redis("release_turn")
        keys = [self._key(identity, "turns"), self._key(identity, "claims")]
        args = [str(turn), str(self._clock()), owner, "1" if keep else "0"]
        await self._call("release_turn", self._release_script(keys=keys, args=args, client=client))


def _b64(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")


def _member_prefix(updated_at: int, seq: int) -> str:
    return f"{updated_at + _OFFSET:0{_WIDTH}d}{seq:0{_WIDTH}d}"


def _text(value: str | bytes | None) -> str | None:
    """A reply as text whether or not the client decodes responses."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


def _redact(url: str) -> str:
    """The URL without its password, fit for error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
        user = f"{parts.username}:***@" if parts.username else ":***@"
        return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))
    except ValueError:
        return "<unparseable url>"


def _describe(client: Any) -> str:
    """Where a passed-in client points, for the store's name (never its password)."""
    try:
        kwargs = client.connection_pool.connection_kwargs
    except AttributeError:
        return type(client).__name__
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={kwargs.get('db', 0)}"
    host, port = kwargs.get("host", "localhost"), kwargs.get("port", 6379)
    return f"redis://{host}:{port}/{kwargs.get('db', 0)}"
