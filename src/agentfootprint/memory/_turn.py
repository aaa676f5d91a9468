"""Which turn of a conversation is about to happen — the turn number is a storage KEY.

Entry ids are turn-stamped (``msg-{turn}-{index}``, ``snap-{turn}``, ``beat-{turn}-{index}``),
so two turns sharing a number overwrite each other. A host that builds a fresh agent per request
cannot count turns in a variable; only the store remembers how far the conversation got. Hence
the rule ``turn = max(host_turn, max_stored_turn + 1)`` over every store the run writes to,
resolved once per run.

Beyond that rule, :func:`resolve_turn_number` claims the turn with ``store.claim_turn`` on every
store; when another run already claimed it, the next number is tried. So two runs of one
conversation started at the same moment never get the same turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from agentfootprint.memory._entry import MemoryEntry, turn_of
from agentfootprint.memory._errors import MemoryStoreError
from agentfootprint.memory._identity import MemoryIdentity
from agentfootprint.memory._store import MemoryStore

__all__ = [
    "MAX_CLAIM_ATTEMPTS",
    "MAX_SCAN_PAGES",
    "SCAN_PAGE_SIZE",
    "max_stored_turn",
    "normalize_host_turn",
    "resolve_turn_number",
]

SCAN_PAGE_SIZE = 1000
"""Entries asked for per ``list`` page while scanning for the highest turn."""
MAX_SCAN_PAGES = 100
"""Pages scanned per store at most (100,000 entries); an under-count is safe."""
MAX_CLAIM_ATTEMPTS = 10_000
"""Consecutive taken turns tried before giving up with ``MemoryStoreError``."""


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


async def resolve_turn_number(
    *,
    stores: Sequence[MemoryStore],
    identity: MemoryIdentity,
    host_turn: object = None,
    claim: bool = True,
) -> int:
    """The turn this run stamps on everything it writes: ``max(host, stored + 1)``, at least 1.

    Every store is consulted (the same store object listed twice is scanned once) and the highest
    stored turn wins. A store that raises is not swallowed: a guessed turn is how entries
    overwrite each other. With ``claim`` (the default) the turn is then claimed on every store,
    moving up past turns that concurrent runs claimed first; ``claim=False`` only computes.
    """
    distinct: list[MemoryStore] = []
    for store in stores:
        if not any(store is seen for seen in distinct):
            distinct.append(store)
    turn = normalize_host_turn(host_turn)
    for store in distinct:
        turn = max(turn, await max_stored_turn(store, identity) + 1)
    if not claim or not distinct:
        return turn
    for _ in range(MAX_CLAIM_ATTEMPTS):
        if await _claim_everywhere(distinct, identity, turn):
            return turn
        turn += 1
    raise MemoryStoreError(
        f"{MAX_CLAIM_ATTEMPTS} consecutive turns up to {turn} were already claimed in this "
        "conversation; the stores disagree about its turns — inspect their turn claims.",
        store=", ".join(store.name for store in distinct),
    )


async def _claim_everywhere(
    stores: Sequence[MemoryStore], identity: MemoryIdentity, turn: int
) -> bool:
    for store in stores:
        if not await store.claim_turn(identity, turn):
            return False
    return True
