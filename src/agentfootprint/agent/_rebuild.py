"""Rebuilding an agent without some context sources, or with its memories on other stores.

An explanation proves a cause by re-running the agent without it. ``agent.without(ids)`` is that
rebuild, derived from the arguments the agent was built with, so the common case needs no
user-written factory: injection ids and tool names leave ``context=`` / ``tools=``, and a
``memory:<memory id>#<entry id>`` suspect is excluded from that memory's recall.
``with_memory_stores`` swaps every memory's store (an isolated copy for a re-run) and is what
keeps a re-run from touching the user's data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..runs import trace

if TYPE_CHECKING:
    from ..memory._define import MemoryDefinition
    from ..memory._store import MemoryStore
    from ._agent import Agent

__all__ = ["agent_without", "excluded_entries", "rebuild_memory", "with_memory_stores"]


def excluded_entries(ids: Iterable[str]) -> dict[str, set[str]]:
    """``{memory id: {entry ids}}`` named by ``memory:<memory id>#<entry id>`` suspects."""
    out: dict[str, set[str]] = {}
    for sid in ids:
        if not trace.MEMORY_INJECTION.matches(sid):
            continue
        memory_id = trace.MEMORY_INJECTION.strip(sid)
        if trace.ENTRY_SEPARATOR not in memory_id:
            continue
        owner, entry = memory_id.split(trace.ENTRY_SEPARATOR, 1)
        out.setdefault(owner, set()).add(entry)
    return out


def rebuild_memory(memory: MemoryDefinition, *, store: MemoryStore | None = None,
                   exclude: Iterable[str] = ()) -> MemoryDefinition:
    """The same memory on ``store`` (default: its own), recalling none of ``exclude`` either."""
    if memory.remake is None:  # built by hand, not by define_memory/define_rag
        return memory
    return memory.remake(store if store is not None else memory.store,
                         memory.exclude | frozenset(exclude))


def agent_without(agent: Agent, ids: frozenset[str]) -> Agent:
    """``agent`` rebuilt without the injections, tools and memory entries named in ``ids``."""
    kwargs = agent._init_kwargs
    entries = excluded_entries(ids)
    memories = tuple(rebuild_memory(m, exclude=entries.get(m.id, ())) if m.id in entries else m
                     for m in kwargs["memory"])
    return agent._replace(
        context=tuple(i for i in kwargs["context"] if i.id not in ids),
        tools=tuple(_tool_without(t, ids) for t in kwargs["tools"] if t.name not in ids),
        memory=memories)


def _tool_without(tool: Any, ids: frozenset[str]) -> Any:
    """An agent used as a tool (``agent.as_tool``) is rebuilt without ``ids`` too."""
    rebuilt = getattr(tool, "without", None)
    return rebuilt(ids) if callable(rebuilt) else tool


def with_memory_stores(agent: Agent, store_for: Callable[[MemoryStore], MemoryStore]) -> Agent:
    """``agent`` with every memory moved onto ``store_for(its store)``."""
    memories = tuple(rebuild_memory(m, store=store_for(m.store))
                     for m in agent._init_kwargs["memory"])
    return agent._replace(memory=memories)
