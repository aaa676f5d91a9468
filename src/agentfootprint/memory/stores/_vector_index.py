"""Persisted vector blocks: a namespace's vectors kept beside its entries as packed float32 runs,
so a fresh process loads 100k vectors in a few reads instead of one read per entry.

A **block** holds records ``(seq, id, vector, meta)``: the entry's write sequence, id, float32
vector (its length may differ between records) and what a search filters on. Blocks are a
cache, never the truth: a record counts only while its ``seq`` is still the entry's current
write sequence (every put gives a new, larger one; a delete removes it), and entries no block
holds (written by an older version, or by a writer that stopped half-way) are read from the
entries themselves. So a search ranks exactly the rows it ranked before blocks existed — same
float64 cosine on the same float32 values — whatever state the blocks are in.

* SQLite: ``af_memory_vector_blocks`` rows, appended in the transaction of each put (the rows
  past the namespace's ``covered`` sequence), the newest merged while they are no smaller
  than a small one before them (a binary counter up to :data:`MERGE_BELOW` records, dead
  records dropped as they merge). A reader loads only blocks it has not seen (``gen``
  changes when one is rewritten).
* Redis: a list per namespace, one element per ``put_many`` (a JSON header, then the raw
  float32 bytes, read without decoding) pushed by the same Lua script that writes the entries;
  compacted into one element (dead records dropped) once it grows past
  :data:`REDIS_COMPACT_AT`, under a generation counter so a reader fetches only new elements.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentfootprint.memory.stores._vectors import VectorIndex, VectorMeta, _numpy, unpack_float32

__all__ = ["BLOCK_CAP", "MERGE_BELOW", "REDIS_COMPACT_AT", "SQLITE_VECTOR_SCHEMA", "Block",
           "BlockCache", "PackedIndex", "append_sqlite", "compact_redis", "load_sqlite",
           "packed_index", "redis_block_text", "redis_blocks"]

BLOCK_CAP: Final = 4096
"""Records one SQLite block holds at most when a put brings many."""

MERGE_BELOW: Final = 1024
"""A SQLite block smaller than this takes in the next one when that is no smaller: small puts
add up to blocks of 1,000-2,000 records (about 100 reads for 100k entries), and no record is
rewritten more than about ten times."""

REDIS_COMPACT_AT: Final = 64
"""List elements past which a Redis namespace's blocks are merged into one."""

SQLITE_VECTOR_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS af_memory_vector_blocks (
    namespace TEXT NOT NULL, block INTEGER NOT NULL, gen INTEGER NOT NULL,
    count INTEGER NOT NULL, header TEXT NOT NULL, vectors BLOB NOT NULL,
    PRIMARY KEY (namespace, block)
) STRICT;
CREATE TABLE IF NOT EXISTS af_memory_vector_state (
    namespace TEXT PRIMARY KEY, covered INTEGER NOT NULL, next_block INTEGER NOT NULL,
    gen INTEGER NOT NULL
) STRICT;
"""
"""Added to the SQLite store's schema (old files gain them on open; blocks fill on the next
put; an older version that ignores them leaves them stale, which readers detect by ``seq``)."""


@dataclass(slots=True)
class Block:
    """Records in write order: ``vectors`` is every record's float32 values, little-endian,
    one after the other (``dims[i]`` values for record i)."""

    seqs: list[int]
    ids: list[str]
    dims: list[int]
    metas: list[VectorMeta]
    vectors: bytes

    def header(self) -> str:
        """Everything but the vectors, as JSON (the metadata by column: quicker to read)."""
        return json.dumps({"seqs": self.seqs, "ids": self.ids, "dims": self.dims,
                           "models": [m[0] for m in self.metas],
                           "expires": [m[1] for m in self.metas],
                           "tiers": [m[2] for m in self.metas]}, separators=(",", ":"))

    @classmethod
    def parse(cls, header: str | bytes, vectors: bytes) -> Block:
        """A stored block; ``ValueError`` when it does not hold together."""
        data = json.loads(header)
        seqs, ids, dims = data["seqs"], data["ids"], data["dims"]
        metas = list(zip(data["models"], data["expires"], data["tiers"], strict=True))
        if not len(seqs) == len(ids) == len(dims) == len(metas) or \
                sum(dims) * 4 != len(vectors):
            raise ValueError("a vector block's parts disagree in length")
        return cls(seqs, ids, dims, metas, vectors)

    def __len__(self) -> int:
        return len(self.seqs)

    def kept(self, keep: Callable[[int], bool]) -> Block:
        """The records whose ``seq`` ``keep`` accepts."""
        out = Block([], [], [], [], b"")
        parts: list[bytes] = []
        offset = 0
        for i, seq in enumerate(self.seqs):
            width = self.dims[i] * 4
            if keep(seq):
                out.seqs.append(seq)
                out.ids.append(self.ids[i])
                out.dims.append(self.dims[i])
                out.metas.append(self.metas[i])
                parts.append(self.vectors[offset:offset + width])
            offset += width
        out.vectors = b"".join(parts)
        return out


def block_of(rows: Iterable[tuple[int, str, bytes, VectorMeta]]) -> Block:
    """A block from ``(seq, id, float32 blob, meta)`` rows (as the stores keep vectors)."""
    out = Block([], [], [], [], b"")
    parts: list[bytes] = []
    for seq, entry_id, blob, meta in rows:
        if len(blob) % 4:
            raise ValueError(f"the vector of entry {entry_id!r} is not float32")
        out.seqs.append(int(seq))
        out.ids.append(entry_id)
        out.dims.append(len(blob) // 4)
        out.metas.append(meta)
        parts.append(blob)
    out.vectors = b"".join(parts)
    return out


def merged(blocks: Sequence[Block]) -> Block:
    out = Block([], [], [], [], b"".join(b.vectors for b in blocks))
    for block in blocks:
        out.seqs += block.seqs
        out.ids += block.ids
        out.dims += block.dims
        out.metas += block.metas
    return out


class PackedIndex(VectorIndex):
    """A :class:`VectorIndex` made from blocks without a Python float per value: each length's
    float64 matrix is filled from the blocks' float32 bytes by NumPy. Ranking is inherited, so
    scores, order and ties are exactly those of an index made from the same rows."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        super().__init__([])
        self._rows = None
        self._blocks = [b for b in blocks if len(b)]
        self.ids = [i for b in self._blocks for i in b.ids]
        self.metas: list[VectorMeta] = [m for b in self._blocks for m in b.metas]

    def _make_rows(self) -> list[tuple[str, Sequence[float]]]:
        rows: list[tuple[str, Sequence[float]]] = []
        for block in self._blocks:
            offset = 0
            for entry_id, dims in zip(block.ids, block.dims, strict=True):
                rows.append((entry_id, unpack_float32(block.vectors[offset:offset + dims * 4])))
                offset += dims * 4
        return rows

    def _matrix(self, np: Any, dims: int) -> tuple[list[int], Any, Any]:
        if dims not in self._matrices:
            uniform = all(min(b.dims) == max(b.dims) == dims for b in self._blocks)
            if uniform:  # the usual case: fill one float64 matrix block by block
                matrix = np.empty((len(self.ids), dims), dtype=np.float64)
                row = 0
                for block in self._blocks:
                    matrix[row:row + len(block)] = np.frombuffer(
                        block.vectors, dtype="<f4").reshape(len(block), dims)
                    row += len(block)
                chosen = list(range(len(self.ids)))
            else:
                lengths = np.asarray([d for b in self._blocks for d in b.dims], dtype=np.int64)
                flat = np.frombuffer(b"".join(b.vectors for b in self._blocks), dtype="<f4")
                picked = np.nonzero(lengths == dims)[0]
                starts = np.cumsum(lengths) - lengths
                matrix = flat[starts[picked][:, None] + np.arange(dims)].astype(np.float64)
                matrix = matrix.reshape(len(picked), dims)
                chosen = picked.tolist()
            self._matrices[dims] = (chosen, matrix, np.linalg.norm(matrix, axis=1))
        return self._matrices[dims]


def packed_index(blocks: Sequence[Block], live: Callable[[int], bool]
                 ) -> tuple[PackedIndex, list[VectorMeta]]:
    """The index of every record ``live`` accepts, each ``seq`` once (its first record)."""
    seen: set[int] = set()

    def keep(seq: int) -> bool:
        if seq in seen or not live(seq):
            return False
        seen.add(seq)
        return True

    np = _numpy()
    alive = getattr(live, "seqs", None)
    if np is not None and alive is not None and blocks:
        seqs = np.concatenate([np.asarray(b.seqs, dtype=np.int64) for b in blocks])
        mask = np.zeros(len(seqs), dtype=bool)
        mask[np.unique(seqs, return_index=True)[1]] = True  # each seq's first record
        mask &= np.isin(seqs, alive)
        if mask.all():
            index = PackedIndex(blocks)  # every record live and once: nothing to drop
            return index, index.metas
        kept, at = [], 0
        for block in blocks:
            kept.append(_masked(np, block, mask[at:at + len(block)]))
            at += len(block)
        index = PackedIndex(kept)
        return index, index.metas
    index = PackedIndex([b.kept(keep) for b in blocks])
    return index, index.metas


def _masked(np: Any, block: Block, mask: Any) -> Block:
    """``block``'s records where ``mask`` is true, the vectors cut by NumPy."""
    if mask.all():
        return block
    picked = np.nonzero(mask)[0].tolist()
    dims = block.dims
    if picked and min(dims) == max(dims):
        flat = np.frombuffer(block.vectors, dtype="<f4").reshape(len(dims), dims[0])
        vectors = flat[picked].tobytes()
    else:
        starts = [0]
        for width in dims:
            starts.append(starts[-1] + width * 4)
        vectors = b"".join(block.vectors[starts[i]:starts[i + 1]] for i in picked)
    return Block([block.seqs[i] for i in picked], [block.ids[i] for i in picked],
                 [dims[i] for i in picked], [block.metas[i] for i in picked], vectors)


@dataclass(slots=True)
class LiveSeqs:
    """The write sequences of a namespace's current entries (a membership test)."""

    seqs: Any
    _set: set[int] = field(default_factory=set)

    def __call__(self, seq: int) -> bool:
        if not self._set and len(self.seqs):
            self._set = set(int(s) for s in self.seqs)
        return seq in self._set


def live_seqs(values: Sequence[int]) -> LiveSeqs:
    np = _numpy()
    return LiveSeqs(np.asarray(values, dtype=np.int64) if np is not None else list(values))


# -- SQLite ------------------------------------------------------------------------------------


@dataclass(slots=True)
class BlockCache:
    """Blocks a SQLite store has read, by ``(namespace, block)``, with their ``gen``."""

    blocks: dict[tuple[str, int], tuple[int, Block]] = field(default_factory=dict)


def _sqlite_state(conn: Any, namespace: str) -> tuple[int, int, int]:
    row = conn.execute("SELECT covered, next_block, gen FROM af_memory_vector_state "
                       "WHERE namespace = ?", (namespace,)).fetchone()
    return (0, 0, 0) if row is None else (int(row[0]), int(row[1]), int(row[2]))


def _sqlite_rows_after(conn: Any, namespace: str, covered: int) -> Block:
    rows = conn.execute(
        "SELECT seq, id, embedding, embedding_model, expires_at, tier FROM af_memory_entries "
        "WHERE seq > ? AND +namespace = ? AND embedding IS NOT NULL ORDER BY seq",
        (covered, namespace)).fetchall()  # '+': walk the rowids past covered, not the namespace
    return block_of((r[0], r[1], r[2], (r[3], r[4], r[5])) for r in rows)


def append_sqlite(conn: Any, namespace: str) -> None:
    """Inside a write transaction, after entries of ``namespace`` were written: put every
    row past the namespace's covered sequence into a new block, then merge the newest."""
    covered, next_block, gen = _sqlite_state(conn, namespace)
    fresh = _sqlite_rows_after(conn, namespace, covered)
    top = conn.execute("SELECT max(seq) FROM af_memory_entries").fetchone()[0]
    gen += 1
    for start in range(0, len(fresh), BLOCK_CAP):
        part = Block(fresh.seqs[start:start + BLOCK_CAP], fresh.ids[start:start + BLOCK_CAP],
                     fresh.dims[start:start + BLOCK_CAP], fresh.metas[start:start + BLOCK_CAP],
                     b"")
        begin = sum(fresh.dims[:start]) * 4
        part.vectors = fresh.vectors[begin:begin + sum(part.dims) * 4]
        _write_block(conn, namespace, next_block, gen, part)
        next_block += 1
    if len(fresh):
        _merge_tail(conn, namespace, gen)
    conn.execute(
        "INSERT INTO af_memory_vector_state (namespace, covered, next_block, gen) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (namespace) DO UPDATE SET covered = excluded.covered, "
        "next_block = excluded.next_block, gen = excluded.gen",
        (namespace, int(top or 0), next_block, gen))


def _write_block(conn: Any, namespace: str, number: int, gen: int, block: Block) -> None:
    conn.execute(
        "INSERT INTO af_memory_vector_blocks (namespace, block, gen, count, header, vectors) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, block) DO UPDATE SET "
        "gen = excluded.gen, count = excluded.count, header = excluded.header, "
        "vectors = excluded.vectors",
        (namespace, number, gen, len(block), block.header(), block.vectors))


def _read_block(conn: Any, namespace: str, number: int) -> Block:
    row = conn.execute("SELECT header, vectors FROM af_memory_vector_blocks WHERE "
                       "namespace = ? AND block = ?", (namespace, number)).fetchone()
    return Block.parse(row[0], row[1])


def _merge_tail(conn: Any, namespace: str, gen: int) -> None:
    """Merge the newest two blocks while the newer is no smaller than the older."""
    while True:
        tail = conn.execute("SELECT block, count FROM af_memory_vector_blocks WHERE "
                            "namespace = ? ORDER BY block DESC LIMIT 2", (namespace,)).fetchall()
        if len(tail) < 2:
            return
        (newer, newer_count), (older, older_count) = tail
        if newer_count < older_count or older_count >= MERGE_BELOW:
            return
        both = merged([_read_block(conn, namespace, older), _read_block(conn, namespace, newer)])
        alive = {r[0] for r in conn.execute(
            "SELECT seq FROM af_memory_entries WHERE seq BETWEEN ? AND ? AND +namespace = ?",
            (min(both.seqs), max(both.seqs), namespace))}
        _write_block(conn, namespace, older, gen,
                     both if alive.issuperset(both.seqs) else both.kept(alive.__contains__))
        conn.execute("DELETE FROM af_memory_vector_blocks WHERE namespace = ? AND block = ?",
                      (namespace, newer))


def load_sqlite(conn: Any, namespace: str, cache: BlockCache
                ) -> tuple[PackedIndex, list[VectorMeta]]:
    """The namespace's index from one consistent read: its blocks (those ``cache`` lacks), its
    live write sequences, and the rows no block covers yet."""
    conn.execute("BEGIN")
    try:
        covered, _, _ = _sqlite_state(conn, namespace)
        listing = conn.execute("SELECT block, gen FROM af_memory_vector_blocks WHERE "
                               "namespace = ? ORDER BY block", (namespace,)).fetchall()
        wanted = [(int(b), int(g)) for b, g in listing]
        stale = [b for b, g in wanted
                 if cache.blocks.get((namespace, b), (None,))[0] != g]
        for number in stale:
            gen, header, vectors = conn.execute(
                "SELECT gen, header, vectors FROM af_memory_vector_blocks WHERE namespace = ? "
                "AND block = ?", (namespace, number)).fetchone()
            cache.blocks[(namespace, number)] = (int(gen), Block.parse(header, vectors))
        joined = conn.execute("SELECT group_concat(seq) FROM af_memory_entries WHERE "
                              "namespace = ?", (namespace,)).fetchone()[0]
        live = live_seqs(list(map(int, joined.split(","))) if joined else [])
        extra = _sqlite_rows_after(conn, namespace, covered)
    finally:
        conn.execute("COMMIT")
    present = {b for b, _ in wanted}
    for key in [k for k in cache.blocks if k[0] == namespace and k[1] not in present]:
        del cache.blocks[key]
    blocks = [cache.blocks[(namespace, b)][1] for b, _ in wanted]
    return packed_index([*blocks, extra], live)


# -- Redis -------------------------------------------------------------------------------------


def redis_block_text(entries: Sequence[tuple[int, str, bytes, VectorMeta]]) -> bytes:
    """The block of one ``put_many`` for the Lua script to push: ``header\\n`` then the raw
    float32 bytes. Records hold their position in the batch in place of a ``seq``: the script
    prefixes the sequences it gives (``seq,seq,...|``). Empty when no entry has a vector."""
    block = block_of(entries)
    if not len(block):
        return b""
    return block.header().encode() + b"\n" + block.vectors


def parse_redis_block(element: bytes) -> Block:
    """A list element, ``seqs|header\\nvectors``: the put script's sequences by position, or
    ``=`` for a compacted block whose records carry their own."""
    bar = element.index(b"|")
    newline = element.index(b"\n", bar)
    block = Block.parse(element[bar + 1:newline], element[newline + 1:])
    head = element[:bar]
    if head == b"=":
        return block
    given = [int(s) for s in head.split(b",")]
    block.seqs = [given[position] for position in block.seqs]
    return block


def compacted_text(block: Block) -> bytes:
    """A merged block as a list element (its records carry their real sequences)."""
    return b"=|" + block.header().encode() + b"\n" + block.vectors


@dataclass(slots=True)
class RedisBlocks:
    """What a Redis store has read of one namespace's list: its generation and elements."""

    gen: str | None = None
    blocks: list[Block] = field(default_factory=list)


async def redis_blocks(client: Any, keys: tuple[str, str], cached: RedisBlocks | None,
                       call: Callable[[Any], Any]) -> RedisBlocks:
    """The namespace's blocks, reading only elements pushed since ``cached`` when the list's
    generation (bumped by each compaction) has not moved. ``call`` wraps a round trip."""
    list_key, gen_key = keys
    from redis.client import NEVER_DECODE

    gen = await call(client.get(gen_key))
    gen = gen if gen is None or isinstance(gen, str) else gen.decode()
    start = len(cached.blocks) if cached is not None and cached.gen == gen else 0
    found = await call(client.execute_command(  # raw bytes, whatever the client decodes
        "LRANGE", list_key, start, -1, **{NEVER_DECODE: True}))
    blocks = list(cached.blocks) if start and cached is not None else []
    blocks += [parse_redis_block(element) for element in found]
    return RedisBlocks(gen, blocks)



# KEYS: blocks list, its generation. ARGV: the generation read ('' = none), how many head
# elements the merged block replaces, the merged block. Elements are only ever pushed at the
# tail, and every compaction moves the generation, so an unchanged generation means the head
# elements are the ones that were read.
_COMPACT: Final = """
local gen = redis.call('GET', KEYS[2]) or ''
if gen ~= ARGV[1] then return 0 end
redis.call('LTRIM', KEYS[1], tonumber(ARGV[2]), -1)
if ARGV[3] ~= '' then redis.call('LPUSH', KEYS[1], ARGV[3]) end
redis.call('INCR', KEYS[2])
return 1
"""


async def compact_redis(client: Any, keys: tuple[str, str, str],
                        call: Callable[[Any], Any]) -> bool:
    """Merge a namespace's list elements into one, dropping records whose entry was
    rewritten or deleted; False when another process compacted first (nothing changed)."""
    list_key, gen_key, index_key = keys
    read = await redis_blocks(client, (list_key, gen_key), None, call)
    members = await call(client.zrange(index_key, 0, -1))
    alive = {int((m.decode() if isinstance(m, bytes) else str(m))[20:40])  # prefix, seq
             for m in members}
    seen: set[int] = set()

    def keep(seq: int) -> bool:
        if seq in seen or seq not in alive:
            return False
        seen.add(seq)
        return True

    block = merged([b.kept(keep) for b in read.blocks])
    text = compacted_text(block) if len(block) else b""
    script = client.register_script(_COMPACT)
    done = await call(script(keys=[list_key, gen_key],
                             args=[read.gen or "", len(read.blocks), text], client=client))
    return int(done) == 1
