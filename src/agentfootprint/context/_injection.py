"""The injection: every piece of context an agent sends, declared once and tracked forever.

An ``Injection`` says *what* (text for the system prompt, messages for the conversation,
tools for the tool list), *when* (its trigger: ``always``, ``rule``, ``on_tool_return`` or
``llm_activated``), and *how stable* it is for prompt caching. Facts, steering, instructions
and skills are all injections made by the ``define_*`` factories, so the recording can answer
for every LLM call what was injected, who let it in, when it fired and how it landed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any, Literal

from .._record import Frozen, Shown, Value, assign, record_class
from ..errors import ConfigurationError, listed
from ..tools._tool import Tool

__all__ = [
    "Injection",
    "InjectionContext",
    "Trigger",
    "define_fact",
    "define_injection",
    "define_instruction",
    "define_skill",
    "define_steering",
]

Flavor = Literal["fact", "steering", "instruction", "skill", "custom", "memory", "rag"]
TriggerKind = Literal["always", "rule", "on_tool_return", "llm_activated"]
CachePolicy = Literal["always", "never", "while_active"]
MessageRole = Literal["system", "user", "assistant"]

DEFAULT_CACHE: dict[str, CachePolicy] = {
    "fact": "always", "steering": "always", "skill": "while_active",
    "instruction": "never", "custom": "never", "memory": "never", "rag": "never",
}


@record_class
class InjectionContext(Shown):
    """What a rule sees when deciding whether its injection fires this iteration.

    (A dataclass with its methods written once, ``_record.py``: cold start.)"""

    iteration: int
    max_iterations: int
    user_message: str
    history: Sequence[Any]
    tool_results: Sequence[Any]
    """The previous tool batch: ``{"tool_name", "tool_call_id", "status"}`` per call."""
    activated: Sequence[str]
    """Skills the model activated this turn with ``read_skill``."""

    def __init__(self, iteration: int, max_iterations: int, user_message: str,
                 history: Sequence[Any], tool_results: Sequence[Any],
                 activated: Sequence[str]) -> None:
        self.iteration = iteration
        self.max_iterations = max_iterations
        self.user_message = user_message
        self.history = history
        self.tool_results = tool_results
        self.activated = activated

    @property
    def iterations_remaining(self) -> int:
        return max(0, self.max_iterations - self.iteration)

    @property
    def last_tool_name(self) -> str | None:
        return self.tool_results[-1]["tool_name"] if self.tool_results else None


# Trigger and Injection are frozen dataclasses whose methods are written once (``_record.py``):
# generating them per class is paid by every cold start.


@record_class
class Trigger(Value):
    """When an injection fires."""

    kind: TriggerKind
    predicate: Callable[[InjectionContext], bool] | None = None
    """``rule``: fires when this returns true (a raising predicate skips the injection)."""
    tool: str | re.Pattern[str] | None = None
    """``on_tool_return``: fires when the previous batch ran a tool with this name (or match)."""

    def __init__(self, kind: TriggerKind,
                 predicate: Callable[[InjectionContext], bool] | None = None,
                 tool: str | re.Pattern[str] | None = None) -> None:
        assign(self, kind=kind, predicate=predicate, tool=tool)

    def describe(self) -> str:
        if self.kind == "on_tool_return":
            name = self.tool.pattern if isinstance(self.tool, re.Pattern) else self.tool
            return f"on_tool_return({name})"
        if self.kind == "llm_activated":
            return "llm_activated(read_skill)"
        return self.kind


@record_class
class Injection(Frozen):
    """One declared piece of context (see the module docstring)."""

    id: str
    flavor: Flavor
    trigger: Trigger
    system: str | None = None
    """Text for the system prompt."""
    messages: tuple[dict[str, str], ...] = ()
    """Messages to deliver into the conversation (``{"role", "content"}``)."""
    tools: tuple[Tool, ...] = ()
    description: str | None = None
    cache: CachePolicy = "never"
    surface: Literal["system", "tool", "both"] = "system"
    """Skills: where the body goes once activated (system prompt, read_skill's result, both)."""
    tools_while_active: bool = False
    """Skills: offer the skill's tools only while it is active (else from iteration 1)."""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, flavor: Flavor, trigger: Trigger, system: str | None = None,
                 messages: tuple[dict[str, str], ...] = (), tools: tuple[Tool, ...] = (),
                 description: str | None = None, cache: CachePolicy = "never",
                 surface: Literal["system", "tool", "both"] = "system",
                 tools_while_active: bool = False,
                 metadata: dict[str, Any] | None = None) -> None:
        assign(self, id=id, flavor=flavor, trigger=trigger, system=system, messages=messages,
               tools=tools, description=description, cache=cache, surface=surface,
               tools_while_active=tools_while_active,
               metadata={} if metadata is None else metadata)

    @property
    def slots(self) -> tuple[str, ...]:
        out = []
        if self.system:
            out.append("system")
        if self.messages:
            out.append("messages")
        if self.tools:
            out.append("tools")
        return tuple(out)


def _check_id(kind: str, id: Any) -> str:
    if not isinstance(id, str) or not id.strip():
        raise ConfigurationError(f"{kind} needs a non-empty id=, got {id!r}")
    return id


def _check_text(kind: str, id: str, name: str, text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"{kind} {id!r} needs non-empty {name}=, got {text!r}")
    return text


def _placement(kind: str, id: str, text: str, slot: str, role: str | None
               ) -> tuple[str | None, tuple[dict[str, str], ...]]:
    if slot == "system":
        if role is not None:
            raise ConfigurationError(f"{kind} {id!r}: role= only applies with slot='messages'")
        return text, ()
    if slot == "messages":
        if role not in ("system", "user", "assistant"):
            raise ConfigurationError(
                f"{kind} {id!r} with slot='messages' needs role='user', 'assistant' or 'system' "
                f"(got {role!r}); tool messages only come from tools")
        return None, ({"role": role, "content": text},)
    raise ConfigurationError(f"{kind} {id!r}: slot must be 'system' or 'messages', got {slot!r}")


def _rule(active_when: Callable[[InjectionContext], bool] | None,
          on_tool_return: str | re.Pattern[str] | None, kind: str, id: str) -> Trigger:
    if active_when is not None and on_tool_return is not None:
        raise ConfigurationError(f"{kind} {id!r}: pass active_when= or on_tool_return=, not both")
    if on_tool_return is not None:
        if not isinstance(on_tool_return, (str, re.Pattern)) or not on_tool_return:
            raise ConfigurationError(
                f"{kind} {id!r}: on_tool_return= takes a tool name or a compiled regex")
        return Trigger("on_tool_return", tool=on_tool_return)
    if active_when is not None:
        if not callable(active_when):
            raise ConfigurationError(f"{kind} {id!r}: active_when= must be callable")
        return Trigger("rule", predicate=active_when)
    return Trigger("always")


def define_fact(*, id: str, data: str, description: str | None = None,
                active_when: Callable[[InjectionContext], bool] | None = None,
                slot: Literal["system", "messages"] = "system",
                role: MessageRole | None = None, cache: CachePolicy | None = None) -> Injection:
    """Something true the model should know (a profile, a policy excerpt)."""
    _check_id("define_fact", id)
    text = _check_text("define_fact", id, "data", data)
    system, messages = _placement("define_fact", id, text, slot, role)
    return Injection(id=id, flavor="fact", trigger=_rule(active_when, None, "define_fact", id),
                     system=system, messages=messages, description=description,
                     cache=cache or DEFAULT_CACHE["fact"])


def define_steering(*, id: str, prompt: str, description: str | None = None,
                    cache: CachePolicy | None = None) -> Injection:
    """A standing rule of behaviour, always in the system prompt."""
    _check_id("define_steering", id)
    text = _check_text("define_steering", id, "prompt", prompt)
    return Injection(id=id, flavor="steering", trigger=Trigger("always"), system=text,
                     description=description, cache=cache or DEFAULT_CACHE["steering"])


def define_instruction(*, id: str, prompt: str, description: str | None = None,
                       active_when: Callable[[InjectionContext], bool] | None = None,
                       on_tool_return: str | re.Pattern[str] | None = None,
                       slot: Literal["system", "messages"] = "system",
                       role: MessageRole | None = None,
                       cache: CachePolicy | None = None) -> Injection:
    """Guidance for a moment: always, when a rule holds, or after a tool returned."""
    _check_id("define_instruction", id)
    text = _check_text("define_instruction", id, "prompt", prompt)
    system, messages = _placement("define_instruction", id, text, slot, role)
    return Injection(id=id, flavor="instruction",
                     trigger=_rule(active_when, on_tool_return, "define_instruction", id),
                     system=system, messages=messages, description=description,
                     cache=cache or DEFAULT_CACHE["instruction"])


def define_skill(*, id: str, description: str, body: str, tools: Sequence[Tool] = (),
                 surface: Literal["system", "tool", "both"] = "system",
                 tools_while_active: bool = False, cache: CachePolicy | None = None,
                 steps: Sequence[tuple[str, str]] = ()) -> Injection:
    """A capability the model switches on with ``read_skill``: a body of guidance plus tools.

    Activation applies from the next iteration and lasts the turn. ``surface`` puts the body
    in the system prompt (default), in ``read_skill``'s result (``"tool"``), or both. The
    skill's tools are offered from the first iteration; with ``tools_while_active=True`` only
    while the skill is active, so its body is read before its tools can be used (the
    reference's ``autoActivate``). ``steps`` is an ordered procedure
    ``[(tool_name, note), ...]``: while the skill is active, only the current step's tool (with
    a banner) and ``skip_step`` are offered among its step tools, and a model that stops early
    is nudged once.
    """
    _check_id("define_skill", id)
    _check_text("define_skill", id, "description", description)
    text = _check_text("define_skill", id, "body", body)
    if surface not in ("system", "tool", "both"):
        raise ConfigurationError(f"define_skill {id!r}: surface must be system, tool or both")
    tools = listed(tools, argument="tools", example="refund_tool")
    for item in tools:
        if not isinstance(item, Tool):
            raise ConfigurationError(f"define_skill {id!r}: {item!r} is not a Tool; use @tool")
    own = {t.name for t in tools}
    plan = []
    for step in steps:
        if not isinstance(step, (tuple, list)) or len(step) != 2:
            raise ConfigurationError(
                f"define_skill {id!r}: each step is (tool_name, note), got {step!r}")
        if step[0] not in own:
            raise ConfigurationError(
                f"define_skill {id!r}: step tool {step[0]!r} is not one of the skill's tools "
                f"({', '.join(sorted(own)) or 'none'}); add it to tools=")
        plan.append({"tool": str(step[0]), "note": str(step[1])})
    metadata: dict[str, Any] = {"body": text}
    if plan:
        metadata["steps"] = plan
    return Injection(id=id, flavor="skill", trigger=Trigger("llm_activated"),
                     system=text if surface in ("system", "both") else None,
                     tools=tuple(tools), description=description,
                     cache=cache or DEFAULT_CACHE["skill"], surface=surface,
                     tools_while_active=tools_while_active, metadata=metadata)


def define_injection(*, id: str, flavor: Flavor = "custom", trigger: Trigger | None = None,
                     system: str | None = None,
                     messages: Sequence[dict[str, str]] = (), tools: Sequence[Tool] = (),
                     description: str | None = None,
                     cache: CachePolicy | None = None) -> Injection:
    """The raw primitive, for new flavours: any slots, any trigger."""
    _check_id("define_injection", id)
    if system is not None:
        _check_text("define_injection", id, "system", system)
    trigger = trigger or Trigger("always")
    if trigger.kind not in ("always", "rule", "on_tool_return", "llm_activated"):
        raise ConfigurationError(
            f"define_injection {id!r}: trigger kind {trigger.kind!r} is not one of always, rule, "
            "on_tool_return, llm_activated")
    if trigger.kind == "rule" and not callable(trigger.predicate):
        raise ConfigurationError(
            f"define_injection {id!r}: a rule trigger needs predicate=<fn(ctx) -> bool>")
    if trigger.kind == "on_tool_return" and not trigger.tool:
        raise ConfigurationError(
            f"define_injection {id!r}: an on_tool_return trigger needs tool=<name or regex>")
    if not system and not messages and not tools:
        raise ConfigurationError(
            f"define_injection {id!r} injects nothing; give system=, messages= or tools=")
    for message in messages:
        if message.get("role") not in ("system", "user", "assistant") or not isinstance(
                message.get("content"), str) or not message["content"].strip():
            raise ConfigurationError(
                f"define_injection {id!r}: each message needs role user/assistant/system and "
                f"non-empty content, got {message!r}")
    return Injection(id=id, flavor=flavor, trigger=trigger, system=system,
                     messages=tuple(dict(m) for m in messages), tools=tuple(tools),
                     description=description, cache=cache or DEFAULT_CACHE.get(flavor, "never"))


def evaluate_injections(injections: Sequence[Injection], ctx: InjectionContext
                        ) -> list[dict[str, Any]]:
    """One row per declared injection, in declaration order: did it fire, and why (not)."""
    rows: list[dict[str, Any]] = []
    batch = [r["tool_name"] for r in ctx.tool_results]
    for injection in injections:
        trigger = injection.trigger
        fired = False
        if trigger.kind == "always":
            fired, reason = True, "always on"
        elif trigger.kind == "rule":
            try:
                fired = bool(trigger.predicate(ctx)) if trigger.predicate else False
                reason = "its rule held" if fired else "its rule did not hold"
            except Exception as exc:
                reason = f"its rule raised {type(exc).__name__}: {exc}; skipped"
        elif trigger.kind == "on_tool_return":
            hit = next((name for name in batch if _matches(trigger.tool, name)), None)
            if hit is not None:
                fired, reason = True, f"tool {hit!r} returned in the previous batch"
            elif batch:
                reason = f"the previous batch ran {', '.join(batch)}, not {trigger.describe()}"
            else:
                reason = "no tool has returned yet"
        else:
            fired = injection.id in ctx.activated
            reason = ("the model activated it with read_skill" if fired
                      else "the model has not called read_skill for it")
        rows.append({"id": injection.id, "flavor": injection.flavor,
                     "trigger": trigger.describe(), "fired": fired, "reason": reason})
    return rows


def _matches(pattern: str | re.Pattern[str] | None, name: str) -> bool:
    if isinstance(pattern, re.Pattern):
        return pattern.search(name) is not None
    return pattern == name
