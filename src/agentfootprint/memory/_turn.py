"""Which turn of a conversation is about to happen — the turn number is a storage KEY.

Entry ids are turn-stamped (``msg-{turn}-{index}``, ``snap-{turn}``, ``beat-{turn}-{index}``),
so two turns sharing a number overwrite each other. A host that builds a fresh agent per request
cannot count turns in a variable; only the store remembers how far the conversation got. Hence
the rule ``turn = max(host_turn, max_stored_turn + 1)`` over every store the run writes to,
resolved once per run.

Beyond that rule, :func:`resolve_turn_number` claims the turn with ``store.claim_turn`` on every
store; when another run holds it, the next number is tried. So two runs of one conversation
started at the same moment never get the same turn. A claim belongs to its run: the run keeps it
while it can still finish (running, paused, crashed and resumable), settles it when done, and
gives it back when it failed having written nothing; a settled claim expires with its turn's
entries. So claims never outnumber the turns a conversation really holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from agentfootprint.memory._entry import MemoryEntry, now_ms, turn_of
from agentfootprint.memory._errors import MemoryStoreError
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import MemoryStore, TurnClaimStore

__all__ = [
    "CLAIM_SETTLE_GRACE_MS",
    "MAX_CLAIM_ATTEMPTS",
    "MAX_SCAN_PAGES",
    "SCAN_PAGE_SIZE",
    "max_stored_turn",
    "normalize_host_turn",
    "distinct_stores",
    "release_turn_claim",
    "resolve_turn_number",
]

SCAN_PAGE_SIZE = 1000
"""Entries asked for per ``list`` page while scanning for the highest turn."""
MAX_SCAN_PAGES = 100
"""Pages scanned per store at most (100,000 entries); an under-count is safe."""
MAX_CLAIM_ATTEMPTS = 10_000
"""Consecutive held turns tried before giving up with ``MemoryStoreError``."""
CLAIM_SETTLE_GRACE_MS = 60_000
"""A settled claim is taken over only if it settled this long before the scan began, so the
scan saw every entry its run wrote (and clocks of hosts sharing a store may drift this much)."""


async def max_stored_turn(
    store: MemoryStore,
    identity: MemoryIdentity,
    *,
    turn_for: Callable[[MemoryEntry], int] | None = None,
) -> int:
    """The highest turn stored in this identity's namespace; 0 when never written to.

    Only live entries count (``list`` hides expired ones), so an expired turn does not hold
    numbering open. ``turn_for`` says which entries count and as which turn (default
    :func:`turn_of`). Paging stops at :data:`MAX_SCAN_PAGES` or when a cursor repeats.
    """
    count = turn_of if turn_for is None else turn_for
    highest = 0
    cursor: str | None = None
    for _ in range(MAX_SCAN_PAGES):
        page = await store.list(identity, cursor=cursor, limit=SCAN_PAGE_SIZE)
        for entry in page.entries:
            highest = max(highest, count(entry))
        if page.cursor is None or page.cursor == cursor:
            break
        cursor = page.cursor
    return highest


def normalize_host_turn(host_turn: object) -> int:
    """A host turn below 1, or not a number at all, means "I do not know" → 1; else floored."""
    if isinstance(host_turn, bool) or not isinstance(host_turn, int | float):
        return 1
    if not math.isfinite(host_turn):
        return 1
    return max(1, math.floor(host_turn))


def distinct_stores(stores: Sequence[MemoryStore]) -> list[MemoryStore]:
    """``stores`` with each backend once: two objects on one SQLite file (or one Redis prefix,
    one PostgreSQL table set) are one store, told apart by their ``backend`` when they name one
    and by object identity otherwise."""
    distinct: list[MemoryStore] = []
    seen: set[object] = set()
    for store in stores:
        key = _backend_of(store)
        if key not in seen:
            seen.add(key)
            distinct.append(store)
    return distinct


def _backend_of(store: MemoryStore) -> object:
    backend = getattr(store, "backend", None)
    return ("backend", backend) if isinstance(backend, str) else ("object", id(store))


async def resolve_turn_number(
    *,
    stores: Sequence[MemoryStore],
    identity: MemoryIdentity,
    host_turn: object = None,
    claim: bool = True,
    owner: str | None = None,
) -> int:
    """The turn this run stamps on everything it writes: ``max(host, stored + 1)``, at least 1.

    Every store is consulted (one backend listed twice is scanned once) and the highest
    stored turn wins. A store that raises is not swallowed: a guessed turn is how entries
    overwrite each other. With ``claim`` (the default) the turn is then claimed on every store
    for ``owner`` (the run), moving up past turns other runs hold. A claim whose run settled
    before this scan began and whose turn has no live entry (every candidate is above the
    highest live turn) has expired with its entries and is taken over, so expired turns never
    pile up against a conversation. ``claim=False`` only computes.
    """
    distinct = distinct_stores(stores)
    scan_began = now_ms() - CLAIM_SETTLE_GRACE_MS
    turn = normalize_host_turn(host_turn)
    for store in distinct:
        turn = max(turn, await max_stored_turn(store, identity) + 1)
    if not claim or not distinct:
        return turn
    for _ in range(MAX_CLAIM_ATTEMPTS):
        if await _claim_everywhere(distinct, identity, turn, owner, scan_began):
            return turn
        turn += 1
    raise MemoryStoreError(
        f"{MAX_CLAIM_ATTEMPTS} consecutive turns up to {turn} are held by runs that have not "
        "finished (paused or crashed); resume or discard those runs, or release their turns "
        "with store.release_turn().",
        store=", ".join(store.name for store in distinct),
    )


async def release_turn_claim(
    *,
    stores: Sequence[MemoryStore],
    identity: MemoryIdentity,
    turn: int,
    owner: str,
    keep: bool,
) -> None:
    """End ``owner``'s hold on ``turn`` on every store: settle it (``keep``, the run wrote its
    turn) or remove it (the run wrote nothing, so the number is free). Stores without
    ``release_turn`` keep their claims, as before."""
    for store in distinct_stores(stores):
        if isinstance(store, TurnClaimStore):
            await store.release_turn(identity, turn, owner=owner, keep=keep)


async def _claim_everywhere(
    stores: Sequence[MemoryStore],
    identity: MemoryIdentity,
    turn: int,
    owner: str | None,
    reclaim_before: int,
) -> bool:
    won: list[MemoryStore] = []
    for store in stores:
        if isinstance(store, TurnClaimStore):
            claimed = await store.claim_turn(identity, turn, owner=owner,
                                             reclaim_before=reclaim_before)
        else:  # a store whose claims belong to nobody: claimed once, kept for good
            claimed = await store.claim_turn(identity, turn)
        if claimed:
            won.append(store)
            continue
        if owner is not None:  # a half-won claim is given back, never left held
            await release_turn_claim(stores=won, identity=identity, turn=turn, owner=owner,
                                     keep=False)
        return False
    return True
