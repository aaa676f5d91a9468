"""The ReAct loop as a flowchart: one chart for every agent, recorded like any other run.

    Seed → Injections → SystemSlot → MessagesSlot → ToolsSlot → CallLLM → Route
        Route ─ tool-calls → ToolCalls ─┐
              ─ wrap-up    → WrapUp    ─┴→ back to Injections
              ─ final      → Finalize

Iteration accounting: ``iteration`` starts at 1; every LLM call happens at the current
iteration; every tool batch and the wrap-up increment it. With ``max_iterations = N`` and a
model that always wants tools, calls happen at 1..N, tools run after calls 1..N-1, and when
the budget cuts a turn short one more call is made without tools (the wrap-up), so the answer
is never an unanswered tool call. The final answer is never appended to ``history``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..context.delivery import deliver, keys_in_window
from ..context.injection import Injection, InjectionContext, evaluate_injections
from ..context.skills import READ_SKILL
from ..context.slots import compose_system, compose_tools
from ..events.catalogue import PREFIX
from ..events.dispatcher import EventDispatcher
from ..flow import Chart, Decision, FlowEvent, Scope, flow_chart
from ..providers.base import LLMRequest, LLMResponse, Message, Provider, ToolCall, wire_messages
from ..providers.resilience import resilience_reports
from ..tools.registry import ToolRegistry
from ..tools.tool import Tool, ToolContext

__all__ = ["WRAP_UP_INSTRUCTION", "AgentSpec", "build_agent_chart"]

WRAP_UP_INSTRUCTION = (
    "You have used your whole budget of actions for this request, so no more tools can be "
    "called. Do not ask for tools. Answer now: say what you did, what is still undone, and "
    "what the person should know."
)

live_emit: contextvars.ContextVar[Callable[[FlowEvent], None] | None] = contextvars.ContextVar(
    "live_emit", default=None)
"""The current run's path to listeners for events that are delivered but not recorded."""

_EVENT_NAMES = {
    "retried": "error.retried", "recovered": "error.recovered",
    "circuit_changed": "error.circuit_changed", "fell_back": "fallback.triggered",
}


@dataclass(slots=True, eq=False)
class AgentSpec:
    """Everything the loop's stages need that is not run state (and so not in the log)."""

    provider: Provider
    model: str
    system: str
    registry: ToolRegistry
    max_iterations: int
    react_mode: Literal["dynamic", "classic"] = "dynamic"
    temperature: float | None = None
    max_tokens: int | None = None
    wrap_up: bool = True
    stream: bool = False
    dispatcher: EventDispatcher = field(default_factory=EventDispatcher)
    with_tools: bool = True
    injections: tuple[Injection, ...] = ()
    static_tools: tuple[Tool, ...] = ()
    read_skill: Tool | None = None
    system_cache: str = "always"

    @property
    def skills(self) -> tuple[Injection, ...]:
        return tuple(i for i in self.injections if i.flavor == "skill")

    @property
    def delivers_messages(self) -> bool:
        return any(i.messages for i in self.injections)


def _emit(scope: Scope, name: str, payload: dict[str, Any]) -> None:
    scope.emit(PREFIX + name, payload)


class _Stages:
    """The stage functions, closed over one agent's spec."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec

    def seed(self, scope: Scope) -> None:
        args = scope.args
        message = args["message"]
        history: list[Message] = list(args.get("history") or [])
        history.append({"role": "user", "content": message})
        turn = int(args.get("turn") or sum(
            1 for m in history if m["role"] == "user" and "injected_by" not in m))
        scope["user_message"] = message
        scope["history"] = history
        scope["turn"] = turn
        scope["iteration"] = 1
        scope["max_iterations"] = self.spec.max_iterations
        scope["input_tokens"] = 0
        scope["output_tokens"] = 0
        if self.spec.injections:
            scope["activated_skills"] = []
            scope["tool_results"] = []
        _emit(scope, "agent.turn_start", {"turn": turn, "user_message": message})

    def injections(self, scope: Scope) -> None:
        """Judge every declared injection against this iteration and the previous tool batch."""
        spec = self.spec
        if not spec.injections:
            scope["active_injections"] = []
            return
        iteration = scope["iteration"]
        ctx = InjectionContext(
            iteration=iteration, max_iterations=scope["max_iterations"],
            user_message=scope["user_message"], history=scope["history"],
            tool_results=scope["tool_results"], activated=scope["activated_skills"])
        rows = evaluate_injections(spec.injections, ctx)
        active = [row["id"] for row in rows if row["fired"]]
        scope["context_evaluation"] = rows
        scope["active_injections"] = active
        _emit(scope, "context.evaluated", {
            "iteration": iteration, "active": active,
            "skipped": [{"id": r["id"], "reason": r["reason"]} for r in rows if not r["fired"]]})

    def _active(self, scope: Scope) -> list[Injection]:
        ids = set(scope["active_injections"])
        return [i for i in self.spec.injections if i.id in ids]

    def system_slot(self, scope: Scope) -> None:
        spec = self.spec
        if spec.react_mode == "classic" and scope["iteration"] > 1:
            return
        text, rows = compose_system(spec.system, spec.system_cache, self._active(scope))
        scope["system_prompt"] = text
        if spec.injections:
            scope["system_slot"] = rows
            self._landed(scope, rows, "system")

    def messages_slot(self, scope: Scope) -> None:
        """The messages slot is the history; injected messages are delivered into it here."""
        spec = self.spec
        history = scope["history"]
        if not spec.delivers_messages:
            return
        pending = [(i.id, i.flavor, i.messages) for i in self._active(scope) if i.messages]
        ledger = set(scope.get("delivered_keys") or ()) | keys_in_window(history)
        before = len(ledger)
        delivered, deferred = deliver(pending, history, ledger, scope["iteration"])
        if delivered:
            scope["history"] = history
            for row in delivered:
                _emit(scope, "context.injected", {
                    "injection_id": row["injection_id"], "slot": "messages",
                    "trigger": self._trigger(row["injection_id"]),
                    "iteration": scope["iteration"]})
        if len(ledger) != before:
            scope["delivered_keys"] = sorted(ledger)
        scope["messages_delivery"] = {"iteration": scope["iteration"], "delivered": delivered,
                                      "deferred": deferred}

    def tools_slot(self, scope: Scope) -> None:
        spec = self.spec
        if spec.react_mode == "classic" and scope["iteration"] > 1:
            return
        if not spec.with_tools:
            scope["tool_schemas"] = []
            return
        if not spec.injections:
            scope["tool_schemas"] = spec.registry.schemas()
            return
        schemas, rows = compose_tools(spec.static_tools, spec.read_skill, spec.skills,
                                      self._active(scope))
        scope["tool_schemas"] = schemas
        scope["tools_slot"] = rows

    def _trigger(self, injection_id: str) -> str:
        for injection in self.spec.injections:
            if injection.id == injection_id:
                return injection.trigger.describe()
        return "base"

    def _landed(self, scope: Scope, rows: list[dict[str, Any]], slot: str) -> None:
        for row in rows:
            if row["source"] != "base":
                _emit(scope, "context.injected", {
                    "injection_id": row["source"], "slot": slot,
                    "trigger": self._trigger(row["source"]), "iteration": scope["iteration"]})

    async def call_llm(self, scope: Scope) -> None:
        spec = self.spec
        iteration = scope["iteration"]
        system = scope.get("system_prompt") or None
        history = scope["history"]
        tools = [] if scope.get("wrap_up_asked") else scope.get("tool_schemas") or []
        request = LLMRequest.model_construct(
            model=spec.model, messages=wire_messages(history), system=system, tools=tools,
            temperature=spec.temperature, max_tokens=spec.max_tokens, stop=None,
            tool_choice=None)
        _emit(scope, "agent.iteration_start", {"iteration": iteration})
        _emit(scope, "stream.llm_start", {
            "iteration": iteration, "provider": spec.provider.name, "model": spec.model,
            "system_prompt_chars": len(system or ""), "messages_count": len(history),
            "tools_count": len(tools)})
        response = await self._call(scope, request, iteration)
        scope["llm_content"] = response.content
        scope["llm_tool_calls"] = [dict(c) for c in response.tool_calls]
        scope["stop_reason"] = response.stop_reason
        scope["input_tokens"] = scope["input_tokens"] + response.usage.input
        scope["output_tokens"] = scope["output_tokens"] + response.usage.output
        _emit(scope, "stream.llm_end", {
            "iteration": iteration, "content": response.content,
            "tool_call_count": len(response.tool_calls),
            "usage": {"input": response.usage.input, "output": response.usage.output},
            "stop_reason": response.stop_reason})

    async def _call(self, scope: Scope, request: LLMRequest, iteration: int) -> LLMResponse:
        spec = self.spec

        def report(data: dict[str, Any]) -> None:
            kind = data.pop("kind")
            _emit(scope, _EVENT_NAMES.get(kind, f"error.{kind}"), data)

        token = resilience_reports.set(report)
        live = live_emit.get()
        try:
            if not spec.stream:
                return await spec.provider.complete(request)
            response: LLMResponse | None = None
            wants = spec.dispatcher.wants(PREFIX + "stream.token")
            async for chunk in spec.provider.stream(request):
                if chunk.done:
                    response = chunk.response
                elif wants and chunk.content and live is not None:
                    live(FlowEvent("emit", scope.run_id, scope.runtime_stage_id, "call_llm",
                                   "CallLLM", PREFIX + "stream.token",
                                   {"iteration": iteration, "index": chunk.index,
                                    "content": chunk.content}))
            if response is None:  # a stream that never finished: ask once more, whole
                response = await spec.provider.complete(request)
            return response
        finally:
            resilience_reports.reset(token)

    def route(self, scope: Scope) -> Decision:
        spec = self.spec
        iteration = scope["iteration"]
        calls = scope["llm_tool_calls"]
        limit = scope["max_iterations"]
        wrapped = bool(scope.get("wrap_up_asked"))
        out_of_budget = iteration >= limit
        chosen = "tool-calls" if calls and not out_of_budget else "final"
        rationale = ("the model asked for tools" if chosen == "tool-calls"
                     else "the model answered")
        if chosen == "final" and calls and out_of_budget and not wrapped:
            wrap = spec.wrap_up and bool(spec.registry) and not wrapped
            scope["stopped_early"] = "max-iterations"
            _emit(scope, "agent.budget_exhausted", {
                "reason": "max-iterations", "iteration": iteration, "limit": limit,
                "pending_tool_calls": len(calls),
                "action": "wrapped-up" if wrap else "cut-short"})
            if wrap:
                chosen, rationale = "wrap-up", "the iteration budget ran out with tools pending"
            else:
                rationale = "the iteration budget ran out"
        _emit(scope, "agent.route_decided",
              {"iteration": iteration, "chosen": chosen, "rationale": rationale})
        inputs = [{"key": "llm_tool_calls", "value": f"({len(calls)} requested)"},
                  {"key": "iteration", "value": f"{iteration} of {limit}"}]
        if wrapped:
            inputs.append({"key": "wrap_up_asked", "value": "True"})
        rule = {"type": "function", "rule": 0, "branch": chosen, "matched": True,
                "label": rationale, "inputs": inputs}
        return Decision(chosen, {"chosen": chosen, "default": "final", "rules": [rule]})

    async def tool_calls(self, scope: Scope) -> None:
        spec = self.spec
        iteration = scope["iteration"]
        calls: list[ToolCall] = scope["llm_tool_calls"]
        history: list[Message] = scope["history"]
        history.append({"role": "assistant", "content": scope.get("llm_content") or "",
                        "tool_calls": calls})
        results = []
        for call in calls:
            _emit(scope, "stream.tool_start", {"tool_name": call["name"],
                                               "tool_call_id": call["id"],
                                               "args": call.get("args") or {},
                                               "iteration": iteration})
            outcome = await spec.registry.dispatch(
                call, ToolContext(call["id"], iteration, scope.run_id))
            if outcome.issues:
                _emit(scope, "validation.args_invalid", {
                    "tool_name": call["name"], "tool_call_id": call["id"],
                    "iteration": iteration, "issues": [dict(i) for i in outcome.issues]})
            _emit(scope, "stream.tool_end", {
                "tool_name": call["name"], "tool_call_id": call["id"], "result": outcome.content,
                "error": outcome.error, "status": outcome.status, "iteration": iteration})
            history.append({"role": "tool", "content": outcome.content,
                            "tool_call_id": call["id"], "tool_name": call["name"]})
            results.append({"tool_name": call["name"], "tool_call_id": call["id"],
                            "status": outcome.status})
            if call["name"] == READ_SKILL and outcome.status == "success" and spec.skills:
                skill_id = (call.get("args") or {}).get("id")
                activated = scope["activated_skills"]
                if skill_id in {s.id for s in spec.skills} and skill_id not in activated:
                    scope["activated_skills"] = [*activated, skill_id]
                    _emit(scope, "skill.activated", {"skill_id": skill_id,
                                                     "iteration": iteration})
        scope["history"] = history
        scope["tool_results"] = results
        scope["iteration"] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration,
                                             "tool_call_count": len(calls)})

    def wrap_up(self, scope: Scope) -> None:
        iteration = scope["iteration"]
        history: list[Message] = scope["history"]
        history.append({"role": "user", "content": WRAP_UP_INSTRUCTION, "injected_by": "wrap-up"})
        scope["history"] = history
        scope["wrap_up_asked"] = True
        scope["iteration"] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})

    def finalize(self, scope: Scope) -> str:
        content = scope.get("llm_content") or ""
        iteration = scope["iteration"]
        scope["final_content"] = content
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})
        _emit(scope, "agent.turn_end", {
            "turn": scope["turn"], "content": content, "iterations": iteration,
            "input_tokens": scope["input_tokens"], "output_tokens": scope["output_tokens"],
            "stopped_early": scope.get("stopped_early")})
        return str(content)


def build_agent_chart(spec: AgentSpec, *, name: str = "Agent") -> Chart:
    """The agent's chart. ``spec.with_tools=False`` gives the single-call ``LLMCall`` shape."""
    stages = _Stages(spec)
    builder = (
        flow_chart("Seed", stages.seed, id="seed", description="Seed the turn")
        .then("Injections", stages.injections, id="injections",
              description="Evaluate the context injections")
        .then("SystemSlot", stages.system_slot, id="system_slot",
              description="Assemble the system prompt")
        .then("MessagesSlot", stages.messages_slot, id="messages_slot",
              description="Assemble the messages")
        .then("ToolsSlot", stages.tools_slot, id="tools_slot",
              description="Assemble the tool list")
        .then("CallLLM", stages.call_llm, id="call_llm", description="Call the model")
    )
    if not spec.with_tools:
        return builder.then("Finalize", stages.finalize, id="finalize",
                            description="Hand back the answer").build(description=name)
    route: Callable[[Scope], Decision] = stages.route
    return (
        builder.decide("Route", route, id="route", description="Route on the model's answer")
        .branch("tool-calls", "ToolCalls", stages.tool_calls, id="tool_calls",
                description="Run the requested tools", loop_to="injections")
        .branch("wrap-up", "WrapUp", stages.wrap_up, id="wrap_up",
                description="Ask for an answer without tools", loop_to="injections")
        .branch("final", "Finalize", stages.finalize, id="finalize",
                description="Hand back the answer")
        .end()
        .build(description=name)
    )

