"""Isolated re-runs: a thought experiment that never touches the user's world.

An explanation re-runs the agent many times. Each re-run gets:

* **memory on a private copy** — every memory store is replaced by a :class:`RerunStore`: the
  entries the user's store held for that conversation *before* the explained run's turn (read
  once, read-only, and shared by every re-run of the explanation), copied into a fresh in-memory
  store the re-run may write to and claim turns in. The user's store sees reads only.
* **tools answered from the recording** — by the same replay a killed run's resume uses
  (``tools/_replay.py``, set on the re-run's tool registry): a call whose name and arguments
  match a call the recording holds gets the recorded result, in order. A call the recording
  lacks runs for real only when the tool declares ``side_effects=False``; otherwise the re-run
  records a *miss* and is reported as not completed (INCONCLUSIVE, the tool named), never a
  real side effect. A result the recording holds only redacted is treated as missing (never
  fed to the model). An agent used as a tool is not replayed: it runs again, isolated.
* **no run store, no watchers, a fresh provider** (``provider.fork()``: a script starts afresh).

Every agent of one re-run — a composition's members, side by side in a ``Parallel`` or one after
the other, and agents used as tools — shares that re-run's private copy of each user store (one
copy per backend, as ``distinct_stores`` counts them), so a later member recalls what an earlier
one wrote and claims the next turn, as in the explained run; the user's store is never written.
A composition is re-run under the identity it recorded as run under (:func:`run_identity`);
each agent used as a tool runs under its own, as it did.

The agent itself comes from ``agent.without(ids)`` (or a user's ``rebuild``) and is then mapped
through :meth:`RerunSandbox.isolate`, member by member for a composition.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..flow._commitlog import CommitLog
from ..memory._entry import MemoryEntry, Tier
from ..memory._identity import MemoryIdentity
from ..memory._stages import identity_from_record
from ..memory._store import MemoryPage, ScoredEntry, StoreCapabilities
from ..memory.stores._memory import InMemoryStore
from ..runs import trace
from ..tools._replay import ToolReplay, recorded_calls

if TYPE_CHECKING:
    from ..agent._agent import Agent
    from ..memory._store import MemoryStore

__all__ = ["RerunLog", "RerunSandbox", "RerunStore"]


class RerunLog:
    """One re-run's replay of the recorded tool calls and what it could not do (a miss makes
    the re-run incomplete). Shared by every agent of the re-run, members and agents used as
    tools alike, so a recorded call is answered once."""

    def __init__(self) -> None:
        self.replay: ToolReplay | None = None
        self.stores: dict[object, RerunStore] = {}
        """This re-run's private copy of each user store, by backend: shared by its agents."""

    def replay_of(self, calls: Mapping[tuple[str, str], list[Any]]) -> ToolReplay:
        if self.replay is None:
            self.replay = ToolReplay.from_recording(calls)
        return self.replay

    @property
    def misses(self) -> list[str]:
        return self.replay.misses if self.replay is not None else []

    @property
    def live_calls(self) -> list[str]:
        return self.replay.live_calls if self.replay is not None else []

    @property
    def complete(self) -> bool:
        return not self.misses


class RerunStore:
    """A re-run's private memory: the user's entries before the explained turn, copied once.

    Reads of the user's store happen once per conversation per explanation (through the
    sandbox's cache) and never write; everything the re-run writes or claims stays here.
    """

    def __init__(self, base: MemoryStore, sandbox: RerunSandbox) -> None:
        self._base = base
        self._sandbox = sandbox
        self._copy = InMemoryStore()
        self._loaded: set[str] = set()
        self._loading = asyncio.Lock()  # members side by side load a conversation once

    @property
    def name(self) -> str:
        return f"isolated copy of {self._base.name}"

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(vector_search=True, atomic_turn_claim=True)

    async def _ready(self, identity: MemoryIdentity) -> InMemoryStore:
        key = identity_key(identity)
        if key in self._loaded:
            return self._copy
        async with self._loading:
            if key not in self._loaded:
                entries = await self._sandbox.entries_before(self._base, identity)
                await self._copy.put_many(identity, entries)
                self._loaded.add(key)
        return self._copy

    async def get(self, identity: MemoryIdentity, entry_id: str) -> MemoryEntry | None:
        return await (await self._ready(identity)).get(identity, entry_id)

    async def put(self, identity: MemoryIdentity, entry: MemoryEntry) -> None:
        await (await self._ready(identity)).put(identity, entry)

    async def put_many(self, identity: MemoryIdentity, entries: Sequence[MemoryEntry]) -> None:
        await (await self._ready(identity)).put_many(identity, entries)

    async def list(self, identity: MemoryIdentity, *, cursor: str | None = None,
                   limit: int | None = None, tiers: Sequence[Tier] | None = None) -> MemoryPage:
        return await (await self._ready(identity)).list(identity, cursor=cursor, limit=limit,
                                                        tiers=tiers)

    async def delete(self, identity: MemoryIdentity, entry_id: str) -> None:
        await (await self._ready(identity)).delete(identity, entry_id)

    async def seen(self, identity: MemoryIdentity, signature: str) -> bool:
        copy = await self._ready(identity)
        return await copy.seen(identity, signature) or await self._base.seen(identity, signature)

    async def record_signature(self, identity: MemoryIdentity, signature: str) -> None:
        await (await self._ready(identity)).record_signature(identity, signature)

    async def claim_turn(self, identity: MemoryIdentity, turn: int) -> bool:
        return await (await self._ready(identity)).claim_turn(identity, turn)

    async def search(self, identity: MemoryIdentity, vector: Sequence[float], *, k: int = 10,
                     tiers: Sequence[Tier] | None = None, min_score: float | None = None,
                     embedder_id: str | None = None) -> builtins.list[ScoredEntry]:
        copy = await self._ready(identity)
        return await copy.search(identity, vector, k=k, tiers=tiers, min_score=min_score,
                                 embedder_id=embedder_id)


def identity_key(identity: object) -> str:
    found = identity_from_record(identity)
    return found.namespace if found is not None else repr(identity)


def store_key(store: object) -> object:
    """One key per backend: two store objects on one SQLite file (one Redis prefix) are one
    store, told apart by their ``backend`` when they name one (as ``distinct_stores`` does)."""
    backend = getattr(store, "backend", None)
    return ("backend", backend) if isinstance(backend, str) else ("object", id(store))


def _logs_of(log: CommitLog) -> list[CommitLog]:
    """``log`` and, recursively, the recordings of the agents its agents ran as tools."""
    from ..runs._recording import Recording

    out = [log]
    last = len(log.records)
    for ns in dict.fromkeys(record.ns for record in log.records):
        kept = log.value_at(trace.SUB_RECORDINGS, last, ns=ns, default=None)
        if not isinstance(kept, Mapping):
            continue
        for body in kept.values():
            if isinstance(body, Mapping):
                try:
                    inner = Recording.model_validate(body).commit_log()
                except ValueError:  # a damaged inner recording: its turns stay unknown
                    continue
                out.extend(_logs_of(inner))
    return out


def _turns_by_identity(log: CommitLog) -> dict[str, int]:
    """The earliest turn each conversation of the run was at (root agent, members and agents
    used as tools alike)."""
    out: dict[str, int] = {}
    for each in _logs_of(log):
        last = len(each.records)
        for ns in dict.fromkeys(record.ns for record in each.records):
            identity = each.value_at(trace.IDENTITY, last, ns=ns, default=None)
            turn = each.value_at(trace.TURN, last, ns=ns, default=None)
            if identity is None or not isinstance(turn, int):
                continue
            key = identity_key(identity)
            out[key] = min(turn, out.get(key, turn))
    return out


def run_identity(log: CommitLog) -> MemoryIdentity | None:
    """The identity to re-run the recorded run under: the one the run recorded in its state.

    An agent with memory records the identity it ran under; a composition with memory members
    run with ``identity=`` records that one (``compose/_base.py`` ``start``), which every
    memory member ran and claimed its turn under. Re-running under it runs each member as
    before, whichever members ran; agents used as tools are not handed it and keep their own.

    Nothing recorded: a composition run without ``identity=`` (each member under its own), or
    one recorded before compositions kept theirs. Only for such a recording is the identity
    inferred, for the older ones' sake, from what the memory members recorded: one identity
    across them all is re-run under (a run identity would have won everywhere, and members
    that own it run the same either way); several, or none, mean no run identity. It is a
    guess: a member that did not run (an untaken branch) recorded nothing to infer from.
    """
    last = len(log.records)
    recorded = identity_from_record(log.value_at(trace.IDENTITY, last, default=None))
    if recorded is not None:
        return recorded
    return _inferred_identity(log)


def _inferred_identity(log: CommitLog) -> MemoryIdentity | None:
    """The one identity the memory members of an older composition recording ran under."""
    last = len(log.records)
    found: dict[str, MemoryIdentity] = {}
    for ns in dict.fromkeys(record.ns for record in log.records if record.ns):
        identity = identity_from_record(log.value_at(trace.IDENTITY, last, ns=ns, default=None))
        if identity is not None:
            found.setdefault(identity_key(identity), identity)
    return next(iter(found.values())) if len(found) == 1 else None


class RerunSandbox:
    """What every re-run of one explanation shares: store snapshots and the recorded calls."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self.calls = recorded_calls(log)
        self.turns = _turns_by_identity(log)
        self._snapshots: dict[tuple[int, str], list[MemoryEntry]] = {}
        self.store_reads = 0

    async def entries_before(self, store: MemoryStore, identity: MemoryIdentity
                             ) -> list[MemoryEntry]:
        """The user's entries of ``identity`` written before the explained run's turn, oldest
        first (so a copy lists them in the store's own order)."""
        key = (id(store), identity_key(identity))
        cached = self._snapshots.get(key)
        if cached is None:
            cutoff = self.turns.get(key[1])
            newest_first: list[MemoryEntry] = []
            cursor: str | None = None
            while True:
                page = await store.list(identity, cursor=cursor)
                self.store_reads += 1
                newest_first.extend(page.entries)
                cursor = page.cursor
                if cursor is None:
                    break
            cached = [e for e in reversed(newest_first)
                      if cutoff is None or e.source is None or e.source.turn is None
                      or e.source.turn < cutoff]
            self._snapshots[key] = cached
        return list(cached)

    def isolate(self, agent: Agent, log: RerunLog, *, fork: bool = True,
                seed: int | None = None) -> Agent:
        """``agent`` as one re-run may run it: private memory, replayed tools, no run store
        (with ``fork``, its provider forked: a script starts afresh; with ``seed``, a sampling
        server is asked for that draw, so the explanation can be repeated)."""
        from ..agent._options import Tracing
        from ..agent._rebuild import rebuild_memory

        kwargs = agent._init_kwargs
        stores = log.stores  # one private copy per user store for every agent of the re-run

        def private(store: MemoryStore) -> RerunStore:
            key = store_key(store)
            if key not in stores:
                stores[key] = RerunStore(store, self)
            return stores[key]

        replay = log.replay_of(self.calls)
        tracing = kwargs.get("tracing")
        quiet = Tracing(redaction=getattr(tracing, "redaction", None))
        provider = kwargs["provider"]
        forked = getattr(provider, "fork", None) if fork else None
        settings = kwargs.get("settings")
        if seed is not None and settings is not None and not getattr(provider, "deterministic",
                                                                       False):
            kwargs = {**kwargs, "settings": dataclasses.replace(settings, seed=seed)}
            agent = agent._replace(settings=kwargs["settings"])
        tools = []
        for tool in kwargs["tools"]:
            if callable(getattr(tool, "_map_agents", None)):
                # an agent used as a tool runs again, isolated itself, on the same replay
                replay.runs_itself.add(tool.name)
                tools.append(tool._map_agents(lambda inner: self.isolate(inner, log, seed=seed)))
            else:  # a re-run never asks a person: its calls are replayed or not made
                tools.append(dataclasses.replace(tool, check_in=None))
        isolated = agent._replace(
            provider=forked() if callable(forked) else provider,
            # a memory that only reads (a RAG corpus, a read-only memory) keeps its store
            memory=tuple(m if m.write is None else rebuild_memory(m, store=private(m.store))
                         for m in kwargs["memory"]),
            tools=tuple(tools), tracing=quiet)
        # the one replay rule of resumes and re-runs (tools/_replay.py), at dispatch
        isolated.spec.registry.replay = replay
        return isolated
