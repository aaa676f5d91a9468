"""``define_rag``: retrieval as context the agent tracks like any other.

A RAG is a read-only semantic memory over a corpus namespace: at the start of every turn its
read chart retrieves the chunks closest to the user's message and renders them as citable
``<source id="<uri>#<index>" …>`` blocks, best first. The agent mounts that chart as a subflow
and lands each block in the system prompt as its own injection ``memory:<id>#<uri>#<index>``,
so the recording says which chunks reached the model (ids, scores, ranks, in
``memory_recall_<id>``) and which were retrieved but dropped (near misses with scores and
reasons, in ``memory_retrieved_<id>``) — the evidence a backtrack's BORN hop names.

Three deliberate differences from a plain semantic memory: it is **read-only** (the user's own
question would otherwise become its best match), it reads its **own corpus identity** (a corpus
is not per conversation), and it renders **citable sources** in score order. The default score
floor is 0.7 (see ``DEFAULT_THRESHOLD``); nothing above it means nothing is injected.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..flow import Chart, Scope, flow_chart
from ..memory._define import MemoryDefinition
from ..memory._identity import MemoryIdentity
from ..memory._store import MemoryStore
from ..memory._strategies import top_k
from ..runs import trace
from ._index import require_vector_search
from ._retrieve import DEFAULT_THRESHOLD, check_options, retrieve

if TYPE_CHECKING:
    from ..memory.embedding._base import Embedder

__all__ = ["RAG_HEADER", "define_rag", "render_sources"]

RAG_HEADER = (
    "Relevant passages retrieved from the document corpus. Cite the source id when you use one."
)


def define_rag(
    *,
    id: str,
    store: MemoryStore,
    identity: MemoryIdentity,
    embedder: Embedder,
    k: int = 3,
    threshold: float | None = DEFAULT_THRESHOLD,
    max_chars: int | None = None,
    window: int = 10,
    exclude: Iterable[str] = (),
    header: str = RAG_HEADER,
    description: str | None = None,
) -> MemoryDefinition:
    """A RAG over ``identity``'s namespace of ``store``: ``Agent(memory=[rag], identity=...)``.

    ``identity`` names the corpus (as given to ``index_documents``); the agent's own identity
    names the conversation and is not used to read the corpus.

    ``k`` bounds how many chunks, ``max_chars`` how much text, ``threshold`` how weak a match
    may be; ``window`` more candidates are judged so near misses are recorded. ``exclude``
    leaves chunks out by id (``'<uri>#<index>'`` or ``'memory:<id>#<uri>#<index>'``), which is
    how a re-run proves a chunk caused an answer.
    """
    if not isinstance(id, str) or not id.strip():
        raise ConfigurationError(f"define_rag(id={id!r}) needs a non-empty id")
    require_vector_search(store, f"define_rag({id!r})")
    if not isinstance(identity, MemoryIdentity):
        raise ConfigurationError(
            f"define_rag({id!r}) identity={identity!r} must be the MemoryIdentity the corpus "
            "was indexed under (the one given to index_documents)")
    check_options(k, threshold, window, max_chars)
    if not isinstance(header, str):
        raise ConfigurationError(f"define_rag({id!r}) header= must be a str")
    strategy = top_k(k=k, embedder=embedder, threshold=threshold)
    prefix = trace.memory_entry_id(id, "")
    left_out = frozenset(item.removeprefix(prefix) for item in exclude)

    async def retrieve_stage(scope: Scope) -> None:
        query = _last_user_text(_input(scope, trace.MESSAGES))
        found = await retrieve(store, identity, query, embedder=embedder, k=k,
                               threshold=threshold, window=window, max_chars=max_chars,
                               exclude=left_out)
        scope[trace.RETRIEVED] = found.record()
        scope[trace.PASSAGES] = [{**hit.record(), "text": hit.chunk.text} for hit in found.hits]

    def format_stage(scope: Scope) -> None:
        passages: list[dict[str, Any]] = list(scope.get(trace.PASSAGES) or [])
        pieces = render_sources(passages, header=header)
        evidence = scope.get(trace.RETRIEVED) or {}
        scope[trace.RECALL] = {
            "text": "\n\n".join(pieces), "entry_ids": [p["id"] for p in passages], "turns": [],
            "flavor": "rag", "threshold": threshold,
            "pieces": [{"text": piece, "entry_ids": [p["id"]], "turns": [], "uri": p["uri"],
                        "score": p["score"], "rank": p["rank"]}
                       for p, piece in zip(passages, pieces, strict=True)],
            "near_misses": list(evidence.get("near_misses") or []),
        }

    read: Chart = (
        flow_chart("Retrieve", retrieve_stage, id="retrieve",
                   description=f"Retrieve the chunks closest to the user's message ({id!r})")
        .then("Format", format_stage, id="format",
              description="Render the hits as citable sources")
        .build(description=f"rag {id!r} recall")
    )
    def remake(other: MemoryStore, more: frozenset[str]) -> MemoryDefinition:
        return define_rag(id=id, store=other, identity=identity, embedder=embedder, k=k,
                          threshold=threshold, max_chars=max_chars, window=window,
                          exclude=more, header=header, description=description)

    return MemoryDefinition(id=id, type="semantic", strategy=strategy, store=store, read=read,
                            write=None,
                            description=description or f"passages retrieved from {store.name}",
                            exclude=left_out, remake=remake)


def render_sources(passages: list[dict[str, Any]], *, header: str = RAG_HEADER) -> list[str]:
    """One ``<source>`` block per passage; the header leads the first, so the blocks joined
    with a blank line are exactly the text injected (and each block is its chunk's span)."""
    pieces = []
    for position, passage in enumerate(passages):
        attributes = f'id="{_attr(passage["id"])}" doc="{_attr(passage["uri"])}"'
        if passage.get("heading_path"):
            attributes += f' heading="{_attr(" › ".join(passage["heading_path"]))}"'
        attributes += f' score="{passage["score"]:.2f}"'
        block = f"<source {attributes}>\n{_defend(passage['text'])}\n</source>"
        pieces.append(f"{header}\n\n{block}" if position == 0 and header else block)
    return pieces


def _input(scope: Scope, key: str) -> Any:
    """A key of the subflow's state, else of its mapped input."""
    return scope[key] if key in scope else scope.args.get(key)


def _last_user_text(messages: Any) -> str:
    for message in reversed(list(messages or ())):
        if isinstance(message, dict) and message.get("role") == "user" \
                and "injected_by" not in message and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _defend(text: str) -> str:
    """Break any ``</source`` inside a chunk (zero-width joiner) so it cannot close the block."""
    out, lower, start = [], text.lower(), 0
    while (found := lower.find("</source", start)) != -1:
        out.append(text[start:found + 3] + "\u200d")
        start = found + 3
    out.append(text[start:])
    return "".join(out)
