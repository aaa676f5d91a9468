"""Memory store throughput: put, list, vector search at 10k and 100k entries, and turn cost.

    python bench/memory_stores.py            # every store it can reach (10k and 100k)
    python bench/memory_stores.py --quick    # 2k and 10k, for a smoke run
    python bench/memory_stores.py --fresh    # 100k, then the first search in a fresh process

Stores: InMemoryStore and SQLiteStore always; RedisStore when ``AGENTFOOTPRINT_REDIS_URL`` is
set; PostgresStore when ``AGENTFOOTPRINT_PG_URL`` is set (``.ci/run`` starts both).

For each store and size N (one fresh conversation per size):

* **put** — N entries written in batches of 500 with ``put_many`` (entries/s);
* **list** — the whole conversation paged newest first, 1,000 per page (entries/s), and the
  median time of one first page of 100 (what a window memory reads each turn);
* **search** — the median time of one top-10 cosine search over N 128-dimensional vectors
  (stores that declare vector search; the first search, which loads vectors, is timed apart);
* **turn** — ``resolve_turn_number`` (scan + claim) on a conversation of 1,000 turns
  (2,000 entries), median of 5.

With ``--fresh``: each store is filled with 100,000 vectors (batches of 500), closed, and a new
process opens it and times its first top-10 search (what every new worker pays); the median of
``--rounds`` such processes. InMemoryStore keeps nothing across processes: its row is the first
search after the puts, in the same process.

The machine is noisy: read medians and the ratios between stores, not absolute times. Each
line is also appended as JSON to ``bench/results/memory_stores.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentfootprint.memory import (
    InMemoryStore,
    MemoryEntry,
    MemoryIdentity,
    MemorySource,
    MemoryStore,
    SQLiteStore,
    resolve_turn_number,
)
from agentfootprint.memory._store import VectorSearchStore

DIMS = 128
BATCH = 500
RESULTS = Path(__file__).parent / "results" / "memory_stores.jsonl"


def vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(DIMS)]


def entries(n: int, *, with_vectors: bool, seed: int = 7) -> list[MemoryEntry]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turn, index = i // 2 + 1, i % 2
        out.append(MemoryEntry(
            id=f"msg-{turn}-{index}",
            value={"role": "user" if index == 0 else "assistant", "content": f"message {i}"},
            source=MemorySource(turn=turn), created_at=1_000 + i,
            embedding=vector(rng) if with_vectors else None,
            embedding_model="bench" if with_vectors else None))
    return out


@asynccontextmanager
async def open_store(kind: str, directory: Path) -> AsyncIterator[MemoryStore]:
    store: Any
    if kind == "memory":
        store = InMemoryStore()
    elif kind == "sqlite":
        store = SQLiteStore(directory / f"bench-{time.time_ns()}.db")
    elif kind == "redis":
        from agentfootprint.memory import RedisStore

        store = RedisStore(os.environ["AGENTFOOTPRINT_REDIS_URL"],
                           prefix=f"bench{time.time_ns()}")
    else:
        from agentfootprint.memory import PostgresStore

        store = PostgresStore(os.environ["AGENTFOOTPRINT_PG_URL"],
                              table_prefix=f"bench{time.time_ns() % 10**9}")
    async with store:  # every built-in store closes the same way
        yield store


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def median_of(fn: Callable[[], Awaitable[Any]], reps: int) -> float:
    return statistics.median([await timed(fn) for _ in range(reps)])


async def bench_size(kind: str, store: MemoryStore, n: int) -> dict[str, Any]:
    who = MemoryIdentity(f"bench-{n}-{time.time_ns()}")
    searchable = isinstance(store, VectorSearchStore) and store.capabilities.vector_search
    batch = entries(n, with_vectors=searchable)

    async def put_all() -> None:
        for start in range(0, n, BATCH):
            await store.put_many(who, batch[start:start + BATCH])

    put_s = await timed(put_all)

    async def list_all() -> None:
        cursor: str | None = None
        while True:
            page = await store.list(who, cursor=cursor, limit=1000)
            cursor = page.cursor
            if cursor is None:
                return

    list_s = await timed(list_all)
    first_page_s = await median_of(lambda: store.list(who, limit=100), 7)
    row: dict[str, Any] = {"store": kind, "n": n, "put_per_s": n / put_s,
                           "list_per_s": n / list_s, "first_page_ms": first_page_s * 1e3}
    if searchable:
        assert isinstance(store, VectorSearchStore)
        query = vector(random.Random(99))
        row["first_search_ms"] = await timed(lambda: store.search(who, query, k=10)) * 1e3
        row["search_ms"] = await median_of(lambda: store.search(who, query, k=10), 5) * 1e3
    return row


async def bench_turn(kind: str, store: MemoryStore) -> float:
    who = MemoryIdentity(f"turns-{time.time_ns()}")
    await store.put_many(who, entries(2_000, with_vectors=False))
    samples = []
    for _ in range(5):
        samples.append(await timed(lambda: resolve_turn_number(stores=[store], identity=who)))
    return statistics.median(samples) * 1e3


async def main(quick: bool) -> None:
    sizes = (2_000, 10_000) if quick else (10_000, 100_000)
    kinds = ["memory", "sqlite"]
    if os.environ.get("AGENTFOOTPRINT_REDIS_URL"):
        kinds.append("redis")
    if os.environ.get("AGENTFOOTPRINT_PG_URL"):
        kinds.append("postgres")
    rows: list[dict[str, Any]] = []
    turns: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            for n in sizes:
                async with open_store(kind, Path(tmp)) as store:
                    rows.append(await bench_size(kind, store, n))
                    print(f"  {kind:<9} n={n:>7,} done", flush=True)
            async with open_store(kind, Path(tmp)) as store:
                turns[kind] = await bench_turn(kind, store)
    print()
    print(f"{'store':<9} {'N':>8} {'put/s':>10} {'list/s':>10} {'page100 ms':>11} "
          f"{'search ms':>10} {'1st search':>11}")
    for r in rows:
        search = f"{r['search_ms']:10.1f}" if "search_ms" in r else f"{'—':>10}"
        first = f"{r['first_search_ms']:11.1f}" if "first_search_ms" in r else f"{'—':>11}"
        print(f"{r['store']:<9} {r['n']:>8,} {r['put_per_s']:>10,.0f} {r['list_per_s']:>10,.0f} "
              f"{r['first_page_ms']:>11.2f} {search} {first}")
    print()
    print("resolve_turn_number on a 1,000-turn conversation (scan + claim), median of 5:")
    base = turns.get("memory")
    for kind, ms in turns.items():
        ratio = f"  ({ms / base:,.1f}× InMemoryStore)" if base else ""
        print(f"  {kind:<9} {ms:8.1f} ms{ratio}")
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as out:
        for r in rows:
            out.write(json.dumps({**r, "quick": quick}) + "\n")
        out.write(json.dumps({"resolve_turn_ms": turns, "quick": quick}) + "\n")


FRESH_N = 100_000


def _fresh_store(kind: str, where: str, prefix: str) -> Any:
    if kind == "sqlite":
        return SQLiteStore(where)
    if kind == "redis":
        from agentfootprint.memory import RedisStore

        return RedisStore(where, prefix=prefix)
    from agentfootprint.memory import PostgresStore

    return PostgresStore(where, table_prefix=prefix)


async def first_search_here(kind: str, where: str, prefix: str, conversation: str) -> str:
    """In a fresh process: open the store and time its first search (ms, then the hits)."""
    async with _fresh_store(kind, where, prefix) as store:
        query = vector(random.Random(99))
        found: list[Any] = []

        async def search() -> None:
            found.extend(await store.search(MemoryIdentity(conversation), query, k=10))

        took = await timed(search) * 1e3
    return f"{len(found)} {took}"


async def fresh(rounds: int) -> None:
    import subprocess
    import sys

    kinds = ["memory", "sqlite"]
    urls = {"redis": os.environ.get("AGENTFOOTPRINT_REDIS_URL"),
            "postgres": os.environ.get("AGENTFOOTPRINT_PG_URL")}
    kinds += [k for k, url in urls.items() if url]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            batch = entries(FRESH_N, with_vectors=True)
            where, prefix = urls.get(kind) or str(Path(tmp) / f"fresh-{kind}.db"), \
                f"fresh{time.time_ns() % 10**9}"
            store = InMemoryStore() if kind == "memory" else _fresh_store(kind, where, prefix)
            who = MemoryIdentity(f"fresh-{time.time_ns()}")
            async with store:
                start = time.perf_counter()
                for at in range(0, FRESH_N, BATCH):
                    await store.put_many(who, batch[at:at + BATCH])
                put_s = time.perf_counter() - start
                if kind == "memory":
                    query = vector(random.Random(99))
                    samples = [await timed(lambda: store.search(who, query, k=10)) * 1e3]
            if kind != "memory":
                samples = []
                for _ in range(rounds):
                    done = subprocess.run(
                        [sys.executable, __file__, "--first-search", kind, where, prefix,
                         who.conversation_id], capture_output=True, text=True, check=True)
                    hits, took = done.stdout.split()[-2:]
                    if int(hits) != 10:
                        raise SystemExit(f"the fresh {kind} search found {hits} hits, not 10")
                    samples.append(float(took))
            rows.append({"store": kind, "n": FRESH_N, "fresh_first_search_ms":
                         statistics.median(samples), "rounds": len(samples),
                         "put_per_s": FRESH_N / put_s})
            print(f"  {kind:<9} done", flush=True)
    print(f"\n{'store':<9} {'N':>8} {'put/s':>10} {'first search in a fresh process, ms':>38}")
    for r in rows:
        print(f"{r['store']:<9} {r['n']:>8,} {r['put_per_s']:>10,.0f} "
              f"{r['fresh_first_search_ms']:>38.1f}")
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as out:
        for r in rows:
            out.write(json.dumps({**r, "fresh": True}) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2k and 10k entries only")
    parser.add_argument("--fresh", action="store_true",
                        help="100k entries, then the first search in fresh processes")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per store")
    parser.add_argument("--first-search", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_search:
        print(asyncio.run(first_search_here(*args.first_search)))
    elif args.fresh:
        asyncio.run(fresh(args.rounds))
    else:
        asyncio.run(main(args.quick))
