"""Sessions on a Redis server, shared by every process and host that can reach it.

Keys (``{prefix}`` holds no ``/``): ``{prefix}/s/{id}`` is the session's hash (``owner``,
``agent``, times, ``turns``, ``status``, ``checkpoint``, ``holder`` — ``''`` when free —,
``lease_until`` and ``okey``, the owner's list key), ``{prefix}/t/{id}`` its transcript (a list
of JSON lines), ``{prefix}/o/{owner}`` the owner's sessions (a sorted set scored by
``updated_at``; the owner percent-escaped, so no owner composes another's key) and
``{prefix}/u`` every session by ``updated_at``, for retention. Every operation is one Lua script,
so a claim, a turn's outcome with its transcript lines, a deletion and a purge are each atomic,
whichever process runs them. The owner field is written by the create script and by nothing else.

Durability is the server's, stated here because the store does not change it: with
``appendonly yes`` and ``appendfsync everysec`` (Redis's recommendation) a crash of the server
loses at most about a second of finished turns, with ``appendfsync always`` none; with RDB
snapshots alone, every turn since the last snapshot. Pick it in the server's configuration.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..errors import ConfigurationError, SessionStoreError
from ..memory._identity import encode_identity_field
from ..memory.stores._redis import _describe, _redact
from ._sessions import (
    NamedStore,
    SessionRecord,
    SessionUpdate,
    TranscriptEntry,
    check_record,
    parse_entry,
    taken,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisSessionStore", "redis_sessions"]

_T = TypeVar("_T")
_FIELDS: Final = ("owner", "agent", "created_at", "updated_at", "turns", "status", "checkpoint",
                  "holder", "lease_until")

# KEYS: hash, owner zset, all zset. ARGV: id, then field/value pairs (okey included).
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
return 1
"""

# KEYS: hash. ARGV: holder, until, now.
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local holder = redis.call('HGET', KEYS[1], 'holder')
local lease = tonumber(redis.call('HGET', KEYS[1], 'lease_until')) or 0
if holder and holder ~= '' and lease >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'lease_until', ARGV[2])
return 1
"""

# KEYS: hash. ARGV: holder, until.
_RENEW = """
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'lease_until', ARGV[2])
return 1
"""

# KEYS: hash, transcript, all zset. ARGV: id, holder, '1' with an update / '0',
# turns, status, checkpoint, updated_at, then one JSON line per transcript entry.
_RELEASE = """
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'holder', '', 'lease_until', '0')
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'turns', ARGV[4], 'status', ARGV[5], 'checkpoint', ARGV[6],
             'updated_at', ARGV[7])
  redis.call('ZADD', redis.call('HGET', KEYS[1], 'okey'), ARGV[7], ARGV[1])
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[1])
  for i = 8, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
end
return 1
"""

# KEYS: hash, transcript, all zset. ARGV: id.
_DELETE = """
local okey = redis.call('HGET', KEYS[1], 'okey')
if okey then redis.call('ZREM', okey, ARGV[1]) end
redis.call('ZREM', KEYS[3], ARGV[1])
return redis.call('DEL', KEYS[1], KEYS[2])
"""

# KEYS: all zset. ARGV: before, now, key prefix ('{prefix}/').
_PURGE = """
local gone = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])) do
  local hash = ARGV[3] .. 's/' .. id
  local holder = redis.call('HGET', hash, 'holder')
  local lease = tonumber(redis.call('HGET', hash, 'lease_until')) or 0
  if not holder or holder == '' or lease < tonumber(ARGV[2]) then
    local okey = redis.call('HGET', hash, 'okey')
    if okey then redis.call('ZREM', okey, id) end
    redis.call('ZREM', KEYS[1], id)
    redis.call('DEL', hash, ARGV[3] .. 't/' .. id)
    gone = gone + 1
  end
end
return gone
"""

# KEYS: owner zset. ARGV: limit, key prefix. One reply per session: id, then its fields.
_LIST = """
local out = {}
for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  local row = redis.call('HMGET', ARGV[2] .. 's/' .. id, unpack(ARGV, 3))
  table.insert(row, 1, id)
  table.insert(out, row)
end
return out
"""


def redis_sessions(url: str | None = None, *, client: Redis | None = None,
                   prefix: str = "agentfootprint-sessions") -> RedisSessionStore:
    """A session store on Redis: ``url`` (the store opens and closes its client) or
    ``client`` (a ``redis.asyncio.Redis`` you own, made with ``decode_responses=True``).
    ``prefix`` separates independent stores on one server. Durability: see the module."""
    return RedisSessionStore(url, client=client, prefix=prefix)


class RedisSessionStore(NamedStore):
    """A ``SessionStore`` on Redis (see ``redis_sessions``)."""

    def __init__(self, url: str | None = None, *, client: Redis | None = None,
                 prefix: str = "agentfootprint-sessions") -> None:
        if (url is None) == (client is None):
            raise ConfigurationError(
                "redis_sessions needs exactly one of url='redis://host:6379/0' or "
                "client=<a redis.asyncio.Redis>")
        if not isinstance(prefix, str) or not prefix or "/" in prefix:
            raise ConfigurationError(
                f"redis_sessions(prefix={prefix!r}) must be a non-empty string without '/'")
        self._owns = client is None
        if client is None:
            try:
                import redis.asyncio
            except ImportError as exc:
                raise ConfigurationError(
                    'redis_sessions needs the redis package; run: pip install '
                    '"agentfootprint[redis]"') from exc
            try:
                client = redis.asyncio.Redis.from_url(str(url), decode_responses=True)
            except ValueError as exc:
                raise ConfigurationError(
                    f"redis_sessions(url={_redact(str(url))!r}) is not a Redis URL ({exc}); "
                    "use redis://host:port/db") from exc
            where = _redact(str(url))
        else:
            where = _describe(client)
        self._client: Redis | None = client
        self._prefix = prefix
        self._name = f"redis_sessions({where!r}, prefix={prefix!r})"
        self._scripts = {name: client.register_script(text) for name, text in (
            ("create", _CREATE), ("claim", _CLAIM), ("renew", _RENEW), ("release", _RELEASE),
            ("delete", _DELETE), ("purge", _PURGE), ("list", _LIST))}

    @property
    def prefix(self) -> str:
        return self._prefix

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}/{kind}/{name}"

    async def _call(self, operation: str, call: Awaitable[_T]) -> _T:
        from redis.exceptions import RedisError

        try:
            return await call
        except RedisError as exc:
            raise SessionStoreError(
                f"{self._name}.{operation}() failed ({type(exc).__name__}: {exc}); check that "
                "Redis is running there and the prefix holds only sessions",
                store=self._name) from exc

    def _live(self, operation: str) -> Redis:
        if self._client is None:
            raise SessionStoreError(
                f"{self._name}.{operation}() after the store was closed; make a new one",
                store=self._name)
        return self._client

    async def _script(self, operation: str, keys: list[str], args: list[Any]) -> Any:
        self._live(operation)
        return await self._call(operation, self._scripts[operation](keys=keys, args=args))

    def _record(self, session_id: str, values: list[Any]) -> SessionRecord:
        fields = dict(zip(_FIELDS, values, strict=True))
        try:
            return check_record(SessionRecord(
                id=session_id, owner=str(fields["owner"]), agent=str(fields["agent"]),
                created_at=float(fields["created_at"]), updated_at=float(fields["updated_at"]),
                turns=int(fields["turns"]), status=fields["status"],
                checkpoint=fields["checkpoint"], holder=fields["holder"] or None,
                lease_until=float(fields["lease_until"] or 0)), self._name)
        except (TypeError, ValueError) as exc:
            raise SessionStoreError(
                f"session {session_id!r} in {self._name} is unreadable ({exc}); it was altered "
                "— the hash is left as it is", store=self._name) from exc

    async def create(self, record: SessionRecord) -> None:
        okey = self._key("o", encode_identity_field(record.owner))
        pairs: list[Any] = ["owner", record.owner, "agent", record.agent, "created_at",
                            repr(record.created_at), "updated_at", repr(record.updated_at),
                            "turns", record.turns, "status", record.status, "holder",
                            record.holder or "", "lease_until", repr(record.lease_until),
                            "okey", okey]
        if record.checkpoint is not None:
            pairs += ["checkpoint", record.checkpoint]
        made = await self._script(
            "create", [self._key("s", record.id), okey, f"{self._prefix}/u"],
            [record.id, repr(record.updated_at), *pairs])
        if not made:
            raise taken(record.id, self._name)

    async def get(self, session_id: str) -> SessionRecord | None:
        values = await self._call("get", self._live("get").hmget(
            self._key("s", session_id), list(_FIELDS)))
        if all(v is None for v in values):
            return None
        return self._record(session_id, list(values))

    async def claim(self, session_id: str, holder: str, *, now: float, until: float) -> bool:
        return bool(await self._script("claim", [self._key("s", session_id)],
                                       [holder, repr(until), repr(now)]))

    async def renew(self, session_id: str, holder: str, *, until: float) -> bool:
        return bool(await self._script("renew", [self._key("s", session_id)],
                                       [holder, repr(until)]))

    async def release(self, session_id: str, holder: str,
                      update: SessionUpdate | None = None) -> bool:
        args: list[Any] = [session_id, holder, "0"]
        if update is not None:
            args = [session_id, holder, "1", update.turns, update.status, update.checkpoint,
                    repr(update.updated_at), *(e.model_dump_json() for e in update.entries)]
        return bool(await self._script(
            "release", [self._key("s", session_id), self._key("t", session_id),
                        f"{self._prefix}/u"], args))

    async def transcript(self, session_id: str) -> list[TranscriptEntry]:
        bodies = await self._call("transcript", self._live("transcript").lrange(
            self._key("t", session_id), 0, -1))
        return [parse_entry(session_id, str(body), self._name) for body in bodies]

    async def list(self, owner: str, *, limit: int) -> list[SessionRecord]:
        rows = await self._script(
            "list", [self._key("o", encode_identity_field(owner))],
            [limit, f"{self._prefix}/", *_FIELDS])
        return [self._record(str(row[0]), list(row[1:])) for row in rows
                if not all(v is None for v in row[1:])]

    async def delete(self, session_id: str) -> None:
        await self._script("delete", [self._key("s", session_id), self._key("t", session_id),
                                      f"{self._prefix}/u"], [session_id])

    async def purge(self, *, before: float, now: float) -> int:
        return int(await self._script("purge", [f"{self._prefix}/u"],
                                      [repr(before), repr(now), f"{self._prefix}/"]))

    async def aclose(self) -> None:
        """Close the client this store opened (a passed-in one stays open)."""
        client, self._client = self._client, None
        if client is not None and self._owns:
            await client.aclose()
