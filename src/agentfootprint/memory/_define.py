"""``define_memory``: a memory as two small flowcharts an agent mounts.

``read`` runs at the start of every turn and leaves ``recall`` (the text for the prompt and the
ids and turns of the entries it came from); ``write`` runs after the final answer with the
turn's ``new_messages``. A read-only memory has no write chart at all. Because both are
flowcharts mounted as subflows, every load, pick and write lands in the run's commit log, and
the recall reaches the prompt as a tracked injection (``memory:<id>``) whose record says which
entries, from which turns.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import ConfigurationError
from agentfootprint.flow import Chart, flow_chart
from agentfootprint.memory._causal import load_snapshot, write_snapshot
from agentfootprint.memory._entry import Tier
from agentfootprint.memory._narrative import extract_beats, format_narrative
from agentfootprint.memory._stages import (
    embed_messages,
    format_memory,
    load_recent,
    load_relevant,
    pick_by_budget,
    write_messages,
)
from agentfootprint.memory._store import MemoryStore, VectorSearchStore
from agentfootprint.memory._strategies import (
    MemoryType,
    RecallBudget,
    Strategy,
    Summarize,
    TopK,
    Window,
    budget,
    list_memory_strategies,
    summarize,
    top_k,
    window,
)
from agentfootprint.memory._summary import summarize_loaded
from agentfootprint.runs import trace

__all__ = ["MemoryDefinition", "define_memory"]


@dataclass(frozen=True, slots=True, eq=False)
class MemoryDefinition:
    """A built memory: its id, what it is, where it lives, and its read/write charts."""

    id: str
    type: MemoryType
    strategy: Strategy
    store: MemoryStore
    read: Chart
    write: Chart | None
    description: str | None = None
    exclude: frozenset[str] = frozenset()
    """Entry ids it never recalls."""
    remake: Callable[[MemoryStore, frozenset[str]], MemoryDefinition] | None = field(
        default=None, repr=False)
    """Builds it again on another store (an explanation's private copy) or recalling none of
    more entries (``remake(store, exclude)``): how a re-run goes without one stored entry."""

    @property
    def injection_id(self) -> str:
        """The id its recall carries in the prompt's record."""
        return trace.MEMORY_INJECTION.of(self.id)


def define_memory(
    *,
    type: MemoryType,
    strategy: Strategy | str,
    store: MemoryStore,
    id: str | None = None,
    read_only: bool = False,
    tier: Tier | None = None,
    ttl_ms: int | None = None,
    description: str | None = None,
    exclude: Collection[str] = (),
    **options: Any,
) -> MemoryDefinition:
    """Build a memory (see the module docstring); impossible combinations are refused here.

    ``strategy`` is a strategy value (``window(10)``, ``top_k(k=3, embedder=...)``) or its
    name with the options as keywords: ``strategy="window", keep_turns=10`` (a turn is two
    messages), ``strategy="budget"``, ``strategy="top_k", k=3, embedder=...``,
    ``strategy="summarize", recent=..., provider=..., model=...``. ``id`` defaults to the
    type. ``exclude`` lists entry ids this memory never recalls — the seam a re-run uses to
    prove that one stored entry caused an answer (``memory:<id>#<entry id>`` suspects).
    """
    types = _types_to_kinds()
    if type not in types:
        raise ConfigurationError(
            f"define_memory(type={type!r}) is not a memory type; use one of "
            f"{', '.join(types)}.")
    if id is None:
        id = str(type)
    if not isinstance(id, str) or not id.strip():
        raise ConfigurationError(f"define_memory(id={id!r}) needs a non-empty id.")
    if isinstance(store, str):
        raise ConfigurationError(
            f"define_memory({id!r}) store={store!r} is a path, not a store; pass "
            f"store=SQLiteStore({store!r}).")
    if not isinstance(store, MemoryStore):
        raise ConfigurationError(
            f"define_memory({id!r}) store={store!r} is not a MemoryStore; use SQLiteStore(path), "
            "InMemoryStore() or another store."
        )
    if isinstance(strategy, str):
        strategy = _strategy_named(strategy, options, id)
    elif options:
        raise ConfigurationError(
            f"define_memory({id!r}) got {', '.join(sorted(options))} but strategy= is already "
            "built; pass those options to the strategy (or give strategy= by name).")
    kind = getattr(strategy, "kind", None)
    allowed = {info.kind: info.types for info in list_memory_strategies()}
    if kind not in allowed:
        raise ConfigurationError(
            f"define_memory({id!r}) strategy={strategy!r} is not a strategy; use window(), "
            "budget(), summarize() or top_k() from agentfootprint.memory."
        )
    if type not in allowed[kind]:
        takes = ", ".join(t for t, kinds in _types_to_kinds().items() if kind in kinds)
        raise ConfigurationError(
            f"define_memory({id!r}): a {type!r} memory cannot use the {kind!r} strategy "
            f"({kind!r} suits: {takes}); {type!r} takes: {', '.join(_types_to_kinds()[type])}."
        )
    if isinstance(strategy, TopK) and not (
        isinstance(store, VectorSearchStore) and store.capabilities.vector_search
    ):
        raise ConfigurationError(
            f"define_memory({id!r}) uses top_k but {store.name} has no vector search; use "
            "InMemoryStore, SQLiteStore, RedisStore or PostgresStore."
        )
    if isinstance(strategy, Summarize) and read_only:
        raise ConfigurationError(
            f"define_memory({id!r}): summarize writes its summaries back, so it cannot be "
            "read_only; use window() for a read-only memory."
        )
    if isinstance(exclude, str):
        raise ConfigurationError(
            f"define_memory({id!r}) exclude={exclude!r} must be a collection of entry ids, "
            "not one string; wrap it in a list.")
    read, write = _charts(id, type, strategy, store, tier, ttl_ms, frozenset(exclude))
    return MemoryDefinition(id=id, type=type, strategy=strategy, store=store, read=read,
                            write=None if read_only else write, description=description,
                            exclude=frozenset(exclude), remake=lambda store, exclude: define_memory(
                                type=type, strategy=strategy, store=store, id=id,
                                read_only=read_only, tier=tier, ttl_ms=ttl_ms,
                                description=description, exclude=exclude))


def _strategy_named(name: str, options: dict[str, Any], memory_id: str) -> Strategy:
    """A strategy from its name and keyword options (``strategy="window", keep_turns=10``)."""
    try:
        if name == "window":
            if "keep_turns" not in options and "size" not in options:
                raise ConfigurationError(
                    f"define_memory({memory_id!r}, strategy='window') needs keep_turns=N "
                    "(the last N turns) or size=N (the last N entries).")
            if "keep_turns" in options:
                turns = options.pop("keep_turns")
                if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
                    raise ConfigurationError(f"keep_turns={turns!r} must be an int >= 1.")
                options["size"] = 2 * turns
            return window(**options)
        if name == "budget":
            return budget(**options)
        if name == "summarize":
            return summarize(**options)
        if name == "top_k":
            return top_k(**options)
    except TypeError as exc:
        raise ConfigurationError(
            f"define_memory({memory_id!r}, strategy={name!r}): {exc}; see "
            "list_memory_strategies() for what each strategy takes.") from exc
    known = ", ".join(info.kind for info in list_memory_strategies())
    raise ConfigurationError(
        f"define_memory({memory_id!r}) strategy={name!r} is not a strategy; use one of {known}.")


def _types_to_kinds() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {t: [] for t in ("episodic", "semantic", "narrative", "causal")}
    for info in list_memory_strategies():
        for t in info.types:
            out[t].append(info.kind)
    return out


def _chart(name: str, stages: list[tuple[str, str, Any]]) -> Chart:
    (first_name, first_id, first_fn), *rest = stages
    builder = flow_chart(first_name, first_fn, id=first_id)
    for stage_name, stage_id, fn in rest:
        builder = builder.then(stage_name, fn, id=stage_id)
    return builder.build(description=name)


def _charts(memory_id: str, type: MemoryType, strategy: Strategy, store: MemoryStore,
            tier: Tier | None, ttl_ms: int | None, exclude: frozenset[str]
            ) -> tuple[Chart, Chart]:
    read_name, write_name = f"memory {memory_id!r} recall", f"memory {memory_id!r} write"
    messages_write = _chart(write_name, [
        ("WriteMessages", "write_messages", write_messages(store, tier=tier, ttl_ms=ttl_ms))])
    if type == "causal":
        assert isinstance(strategy, TopK)
        return (
            _chart(read_name, [("LoadSnapshot", "load_snapshot",
                                load_snapshot(store, strategy.embedder, top_k=strategy.k,
                                              min_score=strategy.threshold or 0.0,
                                              exclude=exclude))]),
            _chart(write_name, [("WriteSnapshot", "write_snapshot",
                                 write_snapshot(store, strategy.embedder, tier=tier,
                                                ttl_ms=ttl_ms))]),
        )
    if type == "semantic":
        assert isinstance(strategy, TopK)
        read = _chart(read_name, [
            ("LoadRelevant", "load_relevant",
             load_relevant(store, strategy.embedder, k=strategy.k,
                           threshold=strategy.threshold, id_prefix="msg-",
                           exclude=exclude)),
            ("PickByBudget", "pick_by_budget", pick_by_budget()),
            ("Format", "format", format_memory()),
        ])
        write = _chart(write_name, [
            ("EmbedMessages", "embed_messages", embed_messages(strategy.embedder)),
            ("WriteMessages", "write_messages", write_messages(store, tier=tier, ttl_ms=ttl_ms)),
        ])
        return read, write
    if type == "narrative":
        assert isinstance(strategy, Window)
        read = _chart(read_name, [
            ("LoadRecent", "load_recent", load_recent(store, count=strategy.size,
                                                      id_prefix="beat-", exclude=exclude)),
            ("PickByBudget", "pick_by_budget", pick_by_budget()),
            ("Format", "format", format_narrative()),
        ])
        write = _chart(write_name, [
            ("ExtractBeats", "extract_beats", extract_beats(store, tier=tier, ttl_ms=ttl_ms))])
        return read, write
    stages: list[tuple[str, str, Any]]
    if isinstance(strategy, Window):
        stages = [("LoadRecent", "load_recent", load_recent(store, count=strategy.size,
                                                                exclude=exclude)),
                  ("PickByBudget", "pick_by_budget", pick_by_budget())]
    elif isinstance(strategy, RecallBudget):
        stages = [("LoadRecent", "load_recent", load_recent(store, count=strategy.load,
                                                                exclude=exclude)),
                  ("PickByBudget", "pick_by_budget",
                   pick_by_budget(reserve_tokens=strategy.reserve_tokens,
                                  minimum_tokens=strategy.minimum_tokens,
                                  max_entries=strategy.max_entries,
                                  count_tokens=strategy.counter,
                                  counted_by=strategy.counter.label))]
    else:
        assert isinstance(strategy, Summarize)
        stages = [("LoadRecent", "load_recent", load_recent(store, count=strategy.size,
                                                                exclude=exclude)),
                  ("Summarize", "summarize",
                   summarize_loaded(store, provider=strategy.provider, model=strategy.model,
                                    trigger_min_entries=strategy.size,
                                    preserve_recent=strategy.recent,
                                    min_fold_entries=max(2, strategy.recent))),
                  ("PickByBudget", "pick_by_budget", pick_by_budget())]
    stages.append(("Format", "format", format_memory()))
    return _chart(read_name, stages), messages_write
