"""What an ``Agent`` accepts: its constructor's and ``run()``'s arguments, checked up front.

Every check refuses a bad value with one sentence naming the argument and the fix, before a
chart is built or a model is asked, so a mistake never surfaces as a failed run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..context._injection import Injection
from ..context._skills import READ_SKILL, SKIP_STEP
from ..errors import ConfigurationError, listed
from ..providers._base import Provider
from ..tools._registry import origin_clash
from ..tools._tool import Tool

if TYPE_CHECKING:
    from ..memory._define import MemoryDefinition
    from ..memory._identity import MemoryIdentity
    from ._moments import ActRule
    from ._permissions import PermissionChecker

__all__ = ["check_context", "check_governance", "check_identity", "check_memories",
           "check_text", "check_tools", "dispatchable", "is_window", "model_for"]


def check_text(message: str) -> None:
    """Refuse, before the model is asked, a message no store can keep: a lone surrogate (a str
    that is not valid Unicode) used to fail the memory write after the answer, losing it."""
    try:
        message.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"run()'s message holds a lone surrogate at position {exc.start}, which is not "
            "valid Unicode text and cannot be stored; decode the input with errors='replace' "
            "(or fix its source) before passing it") from None


def model_for(provider: object, model: object) -> str:
    """The model this agent asks for: its own ``model=``, else the provider's.

    Naming one model on the agent and another on the provider is refused: which one was meant
    cannot be guessed, and a silent choice is how a swapped-in provider gets asked for "mock".
    """
    if not isinstance(provider, Provider):
        raise ConfigurationError(
            f"provider={provider!r} is not a Provider; use agentfootprint.providers.mock(...), "
            "openai(...), anthropic(...) or ollama(...)")
    if model is None:
        model = provider.model
        if not model:
            raise ConfigurationError(
                f"{provider!r} has no default model; pass model='...' to name one")
    if not isinstance(model, str) or not model:
        raise ConfigurationError(f"model={model!r} must be the model's name, e.g. 'gpt-4o-mini'")
    pinned = provider.configured_model
    if pinned and pinned != model:
        raise ConfigurationError(
            f"the agent names model={model!r} but its provider was built with "
            f"model={pinned!r}; name the model once (drop one of the two)")
    return model


def check_tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    static = listed(tools, argument="tools", example=getattr(tools, "name", "my_tool"))
    for item in static:
        if not isinstance(item, Tool):
            raise ConfigurationError(
                f"tools entry {item!r} is not a Tool; decorate the function with @tool or "
                "build it with define_tool(...)")
    return static


def check_context(context: Iterable[Injection], tools: tuple[Tool, ...]
                   ) -> tuple[Injection, ...]:
    injections = listed(context, argument="context", example="define_fact(...)")
    seen: set[str] = set()
    for item in injections:
        if not isinstance(item, Injection):
            raise ConfigurationError(
                f"context entry {item!r} is not an injection; build it with define_fact, "
                "define_steering, define_instruction, define_skill or define_injection")
        if item.id in seen:
            raise ConfigurationError(
                f"two context entries have id {item.id!r}; injection ids must be unique")
        seen.add(item.id)
    every_tool = (*tools, *(t for i in injections for t in i.tools))
    for reserved in (READ_SKILL, SKIP_STEP):
        if any(t.name == reserved for t in every_tool):
            raise ConfigurationError(f"{reserved!r} is reserved for skills; rename your tool")
    return injections


def check_governance(act: Iterable[ActRule], permissions: PermissionChecker | None) -> Any:
    """The agent's act() rules and permission checker, or ``None`` when it has neither (the
    moments machinery then stays unloaded)."""
    rules = tuple(act)
    if not rules and permissions is None:
        return None
    from ._moments import check_act
    from ._permissions import check_checker

    return check_act(rules, check_checker(permissions))


def is_window(value: object) -> bool:
    from ._window import WindowStrategy

    return isinstance(value, WindowStrategy)


def check_memories(memory: Iterable[MemoryDefinition], injections: tuple[Injection, ...]
                    ) -> tuple[MemoryDefinition, ...]:
    memories = listed(memory, argument="memory", example="define_memory(...)")
    if not memories:  # an agent without memory never loads the memory package (cold start)
        return memories
    from ..memory._define import MemoryDefinition

    taken = {i.id for i in injections}
    for item in memories:
        if not isinstance(item, MemoryDefinition):
            raise ConfigurationError(
                f"memory entry {item!r} is not a memory; build it with define_memory(...)")
        if item.injection_id in taken or item.id in taken:
            raise ConfigurationError(
                f"two memories (or a memory and an injection) share id {item.id!r}; "
                "give each memory its own id")
        taken.update((item.id, item.injection_id))
    return memories


def check_identity(identity: object) -> MemoryIdentity:
    from ..memory._identity import MemoryIdentity

    if not isinstance(identity, MemoryIdentity):
        raise ConfigurationError(
            "an agent with memory needs to know whose conversation it is: pass "
            "identity=MemoryIdentity('conversation-id') to Agent(...) or to run(...)")
    return identity


def dispatchable(static: tuple[Tool, ...], reader: Tool | None,
                  injections: tuple[Injection, ...]) -> list[Tool]:
    """Every tool the loop may run, each name once; a name used by two tools is refused."""
    by_name: dict[str, Tool] = {}
    owners: dict[str, str] = {}
    candidates: list[tuple[Tool, str]] = [(t, "tools=") for t in static]
    if reader is not None:
        candidates.append((reader, "skills"))
    for injection in injections:
        candidates.extend((t, f"{injection.flavor} {injection.id!r}") for t in injection.tools)
    for item, owner in candidates:
        found = by_name.get(item.name)
        if found is None:
            by_name[item.name] = item
            owners[item.name] = owner
        elif found is not item:
            raise ConfigurationError(
                f"tool name {item.name!r} is used by {owners[item.name]} and by {owner} for "
                f"different tools{origin_clash(found, item)}; rename one (sharing the same "
                "Tool object is fine)")
    return list(by_name.values())


