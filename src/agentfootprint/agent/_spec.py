"""``AgentSpec``: everything the loop's stages need that is not run state.

It lives apart from the stages so the stage groups (``loop.py``, ``tool_batch.py``,
``memory_mount.py``) can share it and the one ``emit`` helper without importing each other.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Final, Literal

from .._record import record_class
from ..context._injection import Injection
from ..events._dispatcher import PREFIX, EventDispatcher
from ..flow import Scope
from ..providers._base import Provider
from ..runs import trace
from ..tools._registry import ToolRegistry
from ..tools._tool import Tool

if TYPE_CHECKING:
    from ..memory._define import MemoryDefinition
    from ._moments import ActRules
    from ._output import OutputSpec
    from ._usage import Budget
    from ._window import WindowStrategy

__all__ = ["AgentSpec", "emit"]


@record_class
class AgentSpec:
    """Everything the loop's stages need that is not run state (and so not in the log).

    A dataclass whose ``__init__`` is written once (``_record.py``): the generated one, for
    this many fields, was a sizeable part of a cold start."""

    provider: Provider
    model: str
    system: str
    registry: ToolRegistry
    max_iterations: int
    react_mode: Literal["dynamic", "classic"] = "dynamic"
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    wrap_up: bool = True
    stream: bool = False
    dispatcher: EventDispatcher = field(default_factory=EventDispatcher)
    with_tools: bool = True
    injections: tuple[Injection, ...] = ()
    static_tools: tuple[Tool, ...] = ()
    read_skill: Tool | None = None
    skip_step: Tool | None = None
    system_cache: str = "always"
    memories: tuple[MemoryDefinition, ...] = ()
    act: ActRules | None = None
    """act() rules by moment and the permission checker (``moments.py``); ``None``: neither."""
    window: WindowStrategy | None = None
    output: OutputSpec | None = None
    """The structured output asked for (``output.py``); ``None``: the answer is text."""
    budget: Budget | None = None
    """Token and cost limits and prices (``usage.py``); ``None``: built-in prices, no limit."""

    def __init__(self, provider: Provider, model: str, system: str, registry: ToolRegistry,
                 max_iterations: int, react_mode: Literal["dynamic", "classic"] = "dynamic",
                 temperature: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None, wrap_up: bool = True, stream: bool = False,
                 dispatcher: EventDispatcher | None = None, with_tools: bool = True,
                 injections: tuple[Injection, ...] = (), static_tools: tuple[Tool, ...] = (),
                 read_skill: Tool | None = None, skip_step: Tool | None = None,
                 system_cache: str = "always", memories: tuple[MemoryDefinition, ...] = (),
                 act: ActRules | None = None, window: WindowStrategy | None = None,
                 output: OutputSpec | None = None, budget: Budget | None = None) -> None:
        self.provider = provider
        self.model = model
        self.system = system
        self.registry = registry
        self.max_iterations = max_iterations
        self.react_mode = react_mode
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.wrap_up = wrap_up
        self.stream = stream
        self.dispatcher = EventDispatcher() if dispatcher is None else dispatcher
        self.with_tools = with_tools
        self.injections = injections
        self.static_tools = static_tools
        self.read_skill = read_skill
        self.skip_step = skip_step
        self.system_cache = system_cache
        self.memories = memories
        self.act = act
        self.window = window
        self.output = output
        self.budget = budget

    @property
    def tracks_context(self) -> bool:
        """Whether context is declared (injections or memory) and so evaluated and recorded."""
        return bool(self.injections or self.memories)

    @property
    def skills(self) -> tuple[Injection, ...]:
        return tuple(i for i in self.injections if i.flavor == "skill")

    @property
    def delivers_messages(self) -> bool:
        return any(i.messages for i in self.injections)

    def steps_of(self, skill_id: str | None) -> list[dict[str, str]]:
        for injection in self.injections:
            if injection.id == skill_id and injection.flavor == "skill":
                return list(injection.metadata.get("steps", ()))
        return []


# The full names of the events every iteration emits: their stages call ``scope.emit``
# with them directly (``emit`` below adds the prefix, at the cost of a call per event).
ITERATION_START: Final = PREFIX + "agent.iteration_start"
ITERATION_END: Final = PREFIX + "agent.iteration_end"
LLM_START: Final = PREFIX + "stream.llm_start"
LLM_END: Final = PREFIX + "stream.llm_end"
ROUTE_DECIDED: Final = PREFIX + "agent.route_decided"
TOOL_START: Final = PREFIX + "stream.tool_start"
TOOL_END: Final = PREFIX + "stream.tool_end"


def emit(scope: Scope, name: str, payload: dict[str, Any]) -> None:
    """Emit an agent event (the catalogue's ``agentfootprint.`` prefix added)."""
    scope.emit(PREFIX + name, payload)


def emit_turn_end(scope: Scope, content: str) -> None:
    """``agent.turn_end``: every turn that ends says so, answered or stopped by a rule."""
    emit(scope, "agent.turn_end", {
        "turn": scope[trace.TURN], "content": content,
        "iterations": scope.get(trace.ITERATION) or 0,
        "input_tokens": scope[trace.INPUT_TOKENS], "output_tokens": scope[trace.OUTPUT_TOKENS],
        "stopped_early": scope.get(trace.STOPPED_EARLY)})
