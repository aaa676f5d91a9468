"""Every event name the framework emits, each with the model of its payload.

Names are ``agentfootprint.<domain>.<action>``. Payloads travel as plain JSON dicts (they are
stored on the step that emitted them, in the commit log); ``payload_model(name)`` gives the
Pydantic model that describes and validates each one. Adding an event means adding it here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ._dispatcher import PREFIX

__all__ = ["EVENTS", "PREFIX", "full_name", "payload_model"]

if TYPE_CHECKING:
    EVENTS: dict[str, type[BaseModel]]
    """Every event name, with the model of its payload."""


def _build_events() -> dict[str, type[BaseModel]]:
    """The payload models by event name (built on first use: most runs never need them,
    and defining 28 models is a measurable part of cold start)."""

    class _Payload(BaseModel):
        model_config = ConfigDict(extra="forbid", defer_build=True)

    class TurnStart(_Payload):
        turn: int
        user_message: str

    class TurnEnd(_Payload):
        turn: int
        content: str
        iterations: int
        input_tokens: int
        output_tokens: int
        stopped_early: str | None = None

    class IterationStart(_Payload):
        iteration: int

    class IterationEnd(_Payload):
        iteration: int
        tool_call_count: int

    class RouteDecided(_Payload):
        iteration: int
        chosen: str
        rationale: str

    class BudgetExhausted(_Payload):
        reason: str
        iteration: int
        limit: int
        pending_tool_calls: int
        action: str

    class LLMStart(_Payload):
        iteration: int
        provider: str
        model: str
        system_prompt_chars: int
        messages_count: int
        tools_count: int

    class LLMUsage(_Payload):
        input: int
        output: int
        cache_read: int = 0
        cache_write: int = 0

    class LLMEnd(_Payload):
        iteration: int
        content: str
        tool_call_count: int
        usage: LLMUsage
        stop_reason: str

    class Token(_Payload):
        iteration: int
        index: int
        content: str
        restart: bool = False
        """A marker (empty content): the call's answer starts over; earlier tokens are void."""

    class ToolStart(_Payload):
        tool_name: str
        tool_call_id: str
        args: dict[str, Any]
        iteration: int

    class ToolEnd(_Payload):
        tool_name: str
        tool_call_id: str
        result: str
        error: bool
        status: str
        iteration: int

    class CodeRun(_Payload):
        tool: str
        tool_call_id: str
        iteration: int
        language: str
        bytes: int
        sha256: str
        ok: bool
        exit_code: int | None = None
        timed_out: bool
        out_of_memory: bool
        refused: str | None = None
        duration_ms: float
        stdout_bytes: int
        stderr_bytes: int
        truncated: bool

    class ArgsInvalid(_Payload):
        tool_name: str
        tool_call_id: str
        iteration: int
        issues: list[dict[str, str]]

    class Retried(_Payload):
        provider: str
        attempt: int
        max_attempts: int
        error: str
        status: int | None = None
        backoff: float

    class Recovered(_Payload):
        provider: str
        attempt: int
        duration: float

    class CircuitChanged(_Payload):
        provider: str
        state: str
        reason: str

    class FellBack(_Payload):
        primary: str
        fallback: str
        error: str

    class ContextInjected(_Payload):
        injection_id: str
        slot: str
        trigger: str
        iteration: int

    class ContextEvicted(_Payload):
        iteration: int
        strategy: str
        evicted: list[dict[str, Any]]
        kept_count: int
        summarized: bool

    class ContextEvaluated(_Payload):
        iteration: int
        active: list[str]
        skipped: list[dict[str, str]]

    class SkillActivated(_Payload):
        skill_id: str
        iteration: int

    class StepAdvanced(_Payload):
        skill_id: str
        step: int
        completed: bool
        iteration: int

    class StepSkipped(_Payload):
        skill_id: str
        step: int
        reason: str
        iteration: int

    class StepsUnfinished(_Payload):
        skill_id: str
        remaining: int
        total: int
        iteration: int

    class MemoryWritten(_Payload):
        store: str
        ids: list[str]
        turn: int

    class CostTick(_Payload):
        iteration: int
        call: int
        model: str
        provider: str
        input_tokens: int
        output_tokens: int
        cache_read_tokens: int = 0
        cache_write_tokens: int = 0
        cost_usd: float
        total_cost_usd: float

    class LimitHit(_Payload):
        budget: str
        limit: float
        spent: float
        call: int
        action: str
        message: str

    class PermissionCheck(_Payload):
        target: str
        result: str
        rationale: str | None = None
        capability: str = "tool_call"
        actor: str = "agent"
        policy_rule_id: str | None = None
        reason: str | None = None
        checker: str | None = None
        tool_call_id: str | None = None
        iteration: int | None = None

    class PermissionHalt(_Payload):
        target: str
        tool_call_id: str
        iteration: int
        rule_id: str | None = None
        reason: str | None = None
        tell_model: str
        sequence_length: int

    class ActDecision(_Payload):
        moment: str
        rule: str
        decision: str
        reason: str | None = None
        iteration: int
        tool_call_id: str | None = None
        tool_name: str | None = None
        question: str | None = None
        error: str | None = None

    class PauseRequested(_Payload):
        kind: str
        tool_name: str
        tool_call_id: str
        iteration: int
        data: Any = None

    class CheckInSettled(_Payload):
        tool_name: str
        tool_call_id: str
        iteration: int
        approved: bool
        by: str
        note: str | None = None

    return {
        PREFIX + "agent.turn_start": TurnStart,
        PREFIX + "agent.turn_end": TurnEnd,
        PREFIX + "agent.iteration_start": IterationStart,
        PREFIX + "agent.iteration_end": IterationEnd,
        PREFIX + "agent.route_decided": RouteDecided,
        PREFIX + "agent.budget_exhausted": BudgetExhausted,
        PREFIX + "stream.llm_start": LLMStart,
        PREFIX + "stream.llm_end": LLMEnd,
        PREFIX + "stream.token": Token,
        PREFIX + "stream.tool_start": ToolStart,
        PREFIX + "stream.tool_end": ToolEnd,
        PREFIX + "tools.code_run": CodeRun,
        PREFIX + "validation.args_invalid": ArgsInvalid,
        PREFIX + "error.retried": Retried,
        PREFIX + "error.recovered": Recovered,
        PREFIX + "error.circuit_changed": CircuitChanged,
        PREFIX + "fallback.triggered": FellBack,
        PREFIX + "context.evaluated": ContextEvaluated,
        PREFIX + "context.injected": ContextInjected,
        PREFIX + "context.evicted": ContextEvicted,
        PREFIX + "skill.activated": SkillActivated,
        PREFIX + "skill.step_advanced": StepAdvanced,
        PREFIX + "skill.step_skipped": StepSkipped,
        PREFIX + "skill.steps_unfinished": StepsUnfinished,
        PREFIX + "memory.written": MemoryWritten,
        PREFIX + "cost.tick": CostTick,
        PREFIX + "cost.limit_hit": LimitHit,
        PREFIX + "permission.check": PermissionCheck,
        PREFIX + "permission.halt": PermissionHalt,
        PREFIX + "act.decision": ActDecision,
        PREFIX + "pause.requested": PauseRequested,
        PREFIX + "pause.check_in_settled": CheckInSettled,
    }


def __getattr__(name: str) -> Any:
    if name == "EVENTS":
        return _events()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _events() -> dict[str, type[BaseModel]]:
    events: dict[str, type[BaseModel]] | None = globals().get("EVENTS")
    if events is None:
        events = globals()["EVENTS"] = _build_events()
    return events


def full_name(name: str) -> str:
    """``"stream.token"`` → ``"agentfootprint.stream.token"`` (full names pass through)."""
    return name if name.startswith(PREFIX) or name == "*" else PREFIX + name


def payload_model(name: str) -> type[BaseModel]:
    """The payload model of an event name; a clear error for names not in the catalogue."""
    try:
        return _events()[full_name(name)]
    except KeyError:
        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"{name!r} is not an agentfootprint event; see agentfootprint.events.EVENTS "
            "for the names") from None
