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
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..context.delivery import deliver, keys_in_window
from ..context.injection import Injection, InjectionContext, Trigger, evaluate_injections
from ..context.overlap import overlap_scores
from ..context.skills import READ_SKILL, SKIP_STEP, step_sentence
from ..context.slots import compose_system, compose_tools
from ..events.catalogue import PREFIX
from ..events.dispatcher import EventDispatcher
from ..flow import Chart, Decision, FlowEvent, Pause, Scope, flow_chart, pause
from ..flow.builder import FlowBuilder
from ..providers.base import LLMRequest, LLMResponse, Message, Provider, ToolCall, wire_messages
from ..providers.resilience import resilience_reports
from ..tools.pause import PauseRequest
from ..tools.registry import ToolOutcome, ToolRegistry, result_text
from ..tools.script_keys import LEDGER_KEY
from ..tools.tool import Tool, ToolContext

if TYPE_CHECKING:
    from ..memory.define import MemoryDefinition
    from .moments import ActRules
    from .window import WindowStrategy

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
    skip_step: Tool | None = None
    system_cache: str = "always"
    memories: tuple[MemoryDefinition, ...] = ()
    act: ActRules | None = None
    """act() rules by moment and the permission checker (``moments.py``); ``None``: neither."""
    window: WindowStrategy | None = None

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


def _emit(scope: Scope, name: str, payload: dict[str, Any]) -> None:
    scope.emit(PREFIX + name, payload)


class _Stages:
    """The stage functions, closed over one agent's spec."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec

    def seed(self, scope: Scope) -> None:
        self._seed(scope, self._host_turn(scope))

    async def seed_with_memory(self, scope: Scope) -> None:
        """Seed, with the turn resolved once over the memories' stores (seed 000)."""
        resumed = scope.args.get("resume_state")
        if resumed is not None:  # a replay keeps the turn it already claimed
            from ..memory.stages import identity_record

            scope["identity"] = identity_record(scope.args["identity"])
            self._seed(scope, int(resumed["turn"]))
            return
        self._seed(scope, await self._resolve_turn(scope, self._host_turn(scope)))

    @staticmethod
    def _host_turn(scope: Scope) -> int:
        args = scope.args
        history = args.get("history") or ()
        return int(args.get("turn") or 1 + sum(
            1 for m in history if m["role"] == "user" and "injected_by" not in m))

    def _seed(self, scope: Scope, turn: int) -> None:
        args = scope.args
        if args.get("resume_state") is not None:
            self._reseed(scope, args["resume_state"])
            return
        message = args["message"]
        history: list[Message] = list(args.get("history") or [])
        history.append({"role": "user", "content": message})
        scope["user_message"] = message
        scope["history"] = history
        scope["turn"] = turn
        scope["iteration"] = 1
        scope["max_iterations"] = self.spec.max_iterations
        scope["input_tokens"] = 0
        scope["output_tokens"] = 0
        ledger = args.get(LEDGER_KEY)
        if ledger:
            from ..tools.scripts import check_script_ledger, without_earlier_script_text

            check_script_ledger(ledger, source="continue_from")
            scope[LEDGER_KEY] = list(without_earlier_script_text(ledger, turn))
        if self.spec.tracks_context:
            scope["activated_skills"] = []
            scope["tool_results"] = []
        _emit(scope, "agent.turn_start", {"turn": turn, "user_message": message})

    def _reseed(self, scope: Scope, saved: dict[str, Any]) -> None:
        """Replay after a crash: take the failed run's state as it was last committed.

        Tool results already in ``history`` are kept (no tool runs twice) and the delivery
        ledger comes along, so no injected message is delivered twice.
        """
        for key, value in saved.items():
            scope[key] = value
        _emit(scope, "agent.turn_start", {"turn": saved["turn"],
                                          "user_message": saved["user_message"]})

    async def seed_judged(self, scope: Scope) -> None:
        """Seed, then let the input rules judge the user's message (deny stops the run)."""
        if self.spec.memories:
            await self.seed_with_memory(scope)
        else:
            self.seed(scope)
        assert self.spec.act is not None
        await self.spec.act.judge_input(scope)

    async def _resolve_turn(self, scope: Scope, host_turn: int) -> int:
        """The turn, resolved once over every store this run writes to and claimed there."""
        from ..memory.stages import identity_record
        from ..memory.turn import resolve_turn_number

        identity = scope.args["identity"]
        scope["identity"] = identity_record(identity)
        stores = [m.store for m in self.spec.memories if m.write is not None]
        return await resolve_turn_number(stores=stores, identity=identity, host_turn=host_turn)

    def injections(self, scope: Scope) -> None:
        """Judge every declared injection against this iteration and the previous tool batch."""
        spec = self.spec
        if not spec.tracks_context:
            scope["active_injections"] = []
            return
        iteration = scope["iteration"]
        ctx = InjectionContext(
            iteration=iteration, max_iterations=scope["max_iterations"],
            user_message=scope["user_message"], history=scope["history"],
            tool_results=scope["tool_results"], activated=scope["activated_skills"])
        rows = evaluate_injections(spec.injections, ctx)
        rows.extend(self._recall_rows(scope))
        active = [row["id"] for row in rows if row["fired"]]
        scope["context_evaluation"] = rows
        scope["active_injections"] = active
        if spec.skip_step is not None:
            self._rekey_steps(scope)
        _emit(scope, "context.evaluated", {
            "iteration": iteration, "active": active,
            "skipped": [{"id": r["id"], "reason": r["reason"]} for r in rows if not r["fired"]]})

    def _rekey_steps(self, scope: Scope) -> None:
        """The procedure follows the most recently activated skill, restarting when it changes."""
        activated = scope["activated_skills"]
        tenant = activated[-1] if activated else None
        steps = self.spec.steps_of(tenant)
        pointer = scope.get("skill_steps")
        if steps and (pointer is None or pointer["skill"] != tenant):
            scope["skill_steps"] = {"skill": tenant, "step": 1, "total": len(steps),
                                    "skipped": [], "nudged": False}
        elif not steps and pointer is not None:
            del scope["skill_steps"]

    def _recall_pieces(self, scope: Scope) -> list[tuple[str, Any, dict[str, Any]]]:
        """``(injection id, memory, piece)`` for everything each memory recalled this turn.

        A piece that holds one entry is its own injection, ``memory:<id>#<entry id>``, so an
        explanation (and an ablation) can point at a single stored entry.
        """
        out = []
        for memory in self.spec.memories:
            recall = scope.get(f"memory_recall_{memory.id}") or {}
            for piece in recall.get("pieces") or ():
                ids = piece.get("entry_ids") or []
                key = (f"{memory.injection_id}#{ids[0]}" if len(ids) == 1
                       else memory.injection_id)
                out.append((key, memory, piece))
        return out

    def _recall_rows(self, scope: Scope) -> list[dict[str, Any]]:
        """Evaluation rows for recall: one per recalled piece, or one saying nothing came.

        A retrieved piece (RAG) carries its score and rank into its row, and every candidate
        the retrieval judged and dropped gets a row that did not fire: the near misses.
        """
        rows = []
        pieces = self._recall_pieces(scope)
        for memory in self.spec.memories:
            recall = scope.get(f"memory_recall_{memory.id}") or {}
            flavor = recall.get("flavor", "memory")
            floor = recall.get("threshold")
            mine = [(key, piece) for key, owner, piece in pieces if owner is memory]
            trigger = f"memory recall ({memory.type}, {memory.strategy.kind})"
            if not mine:
                rows.append({"id": memory.injection_id, "flavor": flavor,
                             "trigger": trigger, "fired": False,
                             "reason": "nothing to recall", "entry_ids": [], "turns": [],
                             "store": memory.store.name})
            for key, piece in mine:
                ids, turns = list(piece["entry_ids"]), list(piece["turns"])
                where = f"turn {turns[0]}" if len(turns) == 1 else (
                    f"turns {', '.join(map(str, turns))}" if turns else "unnumbered entries")
                row = {"id": key, "flavor": flavor, "trigger": trigger, "fired": True,
                       "reason": f"recalled from {where}: {', '.join(ids)}",
                       "entry_ids": ids, "turns": turns, "store": memory.store.name}
                if "score" in piece:
                    bar = "" if floor is None else f" >= {floor:.2f}"
                    row.update(score=piece["score"], rank=piece["rank"],
                               reason=f"retrieved {ids[0]!r} (rank {piece['rank']}, "
                                      f"score {piece['score']:.2f}{bar})")
                rows.append(row)
            for miss in recall.get("near_misses") or ():
                bar = "" if floor is None or miss["reason"] != "below-threshold" \
                    else f" < {floor:.2f}"
                rows.append({"id": f"{memory.injection_id}#{miss['id']}", "flavor": flavor,
                             "trigger": trigger, "fired": False,
                             "reason": f"retrieved but dropped ({miss['reason']}): rank "
                                       f"{miss['rank']}, score {miss['score']:.2f}{bar}",
                             "entry_ids": [miss["id"]], "turns": [],
                             "store": memory.store.name, "score": miss["score"],
                             "rank": miss["rank"]})
        return rows

    def _active(self, scope: Scope) -> list[Injection]:
        ids = set(scope["active_injections"])
        active = [i for i in self.spec.injections if i.id in ids]
        for key, memory, piece in self._recall_pieces(scope):
            if key in ids:
                recall = scope.get(f"memory_recall_{memory.id}") or {}
                active.append(Injection(id=key, flavor=recall.get("flavor", "memory"),
                                        trigger=Trigger("always"), system=piece["text"],
                                        description=memory.description))
        return active

    def system_slot(self, scope: Scope) -> None:
        spec = self.spec
        if spec.react_mode == "classic" and scope["iteration"] > 1:
            return
        text, rows = compose_system(spec.system, spec.system_cache, self._active(scope))
        scope["system_prompt"] = text
        if spec.tracks_context:
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

    async def window(self, scope: Scope) -> None:
        """Choose which part of ``history`` this call is sent; record it and what left.

        ``history`` itself is untouched. ``window`` holds the plan of this call (rebuild the
        request with ``windowed_messages``); ``window_evicted`` gains one entry per call.
        """
        strategy = self.spec.window
        assert strategy is not None
        iteration = scope["iteration"]
        plan = await strategy.plan(scope["history"], turn=scope["turn"],
                                   previous=scope.get("window"))
        if self.spec.act is not None and self.spec.act.at("window"):
            from .window import plan_for

            chosen = await self.spec.act.judge_window(
                scope, list(plan.kept), [dict(e) for e in plan.evicted], strategy.name)
            if chosen is not None:
                plan = plan_for(scope["history"], chosen, plan, turn=scope["turn"])
        scope["window"] = plan.to_state(strategy.name, iteration)
        evicted = [dict(e) for e in plan.evicted]
        scope["window_evicted"] = [*(scope.get("window_evicted") or ()), {
            "iteration": iteration, "strategy": strategy.name, "evicted": evicted}]
        if evicted:
            _emit(scope, "context.evicted", {
                "iteration": iteration, "strategy": strategy.name, "evicted": evicted,
                "kept_count": len(plan.kept), "summarized": plan.summary is not None})

    def tools_slot(self, scope: Scope) -> None:
        spec = self.spec
        if scope.get("wrap_up_asked"):  # the wrap-up call is made without tools
            scope["tool_schemas"] = []
            if spec.tracks_context:
                scope["tools_slot"] = []
            return
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
        pointer = scope.get("skill_steps") if spec.skip_step is not None else None
        if pointer is not None and pointer["step"] <= pointer["total"]:
            schemas, rows = self._narrow_to_step(schemas, rows, pointer)
        scope["tool_schemas"] = schemas
        scope["tools_slot"] = rows
        landed = {row["source"] for row in rows} - {"static", "read_skill"}
        for injection in self._active(scope):
            if injection.id in landed:
                _emit(scope, "context.injected", {
                    "injection_id": injection.id, "slot": "tools",
                    "trigger": injection.trigger.describe(), "iteration": scope["iteration"]})

    def _narrow_to_step(self, schemas: list[Any], rows: list[dict[str, Any]],
                        pointer: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]]]:
        """Offer only the current step's tool of the procedure (bannered) plus ``skip_step``."""
        steps = self.spec.steps_of(pointer["skill"])
        current = steps[pointer["step"] - 1]
        held = {s["tool"] for s in steps} - {current["tool"]}
        kept_schemas: list[Any] = []
        kept_rows: list[dict[str, Any]] = []
        for schema, row in zip(schemas, rows, strict=True):
            if schema["name"] in held:
                continue
            if schema["name"] == current["tool"]:
                banner = f"[Step {pointer['step']} of {pointer['total']} — {current['note']}] "
                schema = {**schema, "description": banner + schema["description"]}
                row = {**row, "step": pointer["step"]}
            kept_schemas.append(schema)
            kept_rows.append({**row, "position": len(kept_rows)})
        skip = self.spec.skip_step
        assert skip is not None
        kept_rows.append({"name": SKIP_STEP, "source": pointer["skill"], "slot": "tools",
                          "position": len(kept_rows)})
        kept_schemas.append(skip.schema())
        return kept_schemas, kept_rows

    def _trigger(self, injection_id: str) -> str:
        for injection in self.spec.injections:
            if injection.id == injection_id:
                return injection.trigger.describe()
        if injection_id.startswith("memory:"):
            return "memory recall"
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
        if spec.window is not None:
            from .window import windowed_messages

            history = windowed_messages(history, scope["window"])
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
        pointer = scope.get("skill_steps") if spec.skip_step is not None else None
        if (chosen == "final" and not calls and pointer is not None
                and pointer["step"] <= pointer["total"]):
            if not pointer["nudged"]:
                chosen, rationale = "step-nudge", "the model stopped with procedure steps left"
            else:
                _emit(scope, "skill.steps_unfinished", {
                    "skill_id": pointer["skill"], "remaining": pointer["total"] - pointer["step"]
                    + 1, "total": pointer["total"], "iteration": iteration})
        _emit(scope, "agent.route_decided",
              {"iteration": iteration, "chosen": chosen, "rationale": rationale})
        inputs = [{"key": "llm_tool_calls", "value": f"({len(calls)} requested)"},
                  {"key": "iteration", "value": f"{iteration} of {limit}"}]
        if wrapped:
            inputs.append({"key": "wrap_up_asked", "value": "True"})
        rule = {"type": "function", "rule": 0, "branch": chosen, "matched": True,
                "label": rationale, "inputs": inputs}
        return Decision(chosen, {"chosen": chosen, "default": "final", "rules": [rule]})

    async def tool_calls(self, scope: Scope) -> Pause | None:
        iteration = scope["iteration"]
        calls: list[ToolCall] = scope["llm_tool_calls"]
        history: list[Message] = scope["history"]
        history.append({"role": "assistant", "content": scope.get("llm_content") or "",
                        "tool_calls": calls})
        return await self._run_batch(scope, calls, 0, [], history, iteration)

    async def tool_calls_resume(self, scope: Scope, answer: Any) -> Pause | None:
        """Settle the paused call with the person's answer, then run the calls after it.

        Siblings after a paused call never run before the pause is answered; on resume they
        run in their original order, so every call still gets exactly one result.
        """
        pending = scope["paused_tool_batch"]
        calls: list[ToolCall] = pending["calls"]
        index, iteration = pending["index"], pending["iteration"]
        results: list[dict[str, Any]] = list(pending["results"])
        history: list[Message] = scope["history"]
        call = calls[index]
        if pending["kind"] == "check_in":
            verdict = answer if isinstance(answer, dict) else {}
            by = verdict.get("by") or "a person"
            _emit(scope, "pause.check_in_settled", {
                "tool_name": call["name"], "tool_call_id": call["id"], "iteration": iteration,
                "approved": verdict.get("check_in") == "approved", "by": by,
                "note": verdict.get("note")})
            if verdict.get("check_in") == "approved":
                outcome = await self._dispatch(scope, call, iteration)
            else:
                note = f": {str(verdict['note']).rstrip('.')}." if verdict.get("note") else "."
                outcome = ToolOutcome(f"{by} declined this call, so it did not run{note} "
                                      "Adapt your plan; do not call it again unchanged.",
                                      error=True, status="declined")
        else:
            outcome = ToolOutcome(answer if isinstance(answer, str) else result_text(answer))
        del scope["paused_tool_batch"]
        self._settle(scope, call, outcome, results, history, iteration)
        return await self._run_batch(scope, calls, index + 1, results, history, iteration)

    async def _run_batch(self, scope: Scope, calls: list[ToolCall], start: int,
                         results: list[dict[str, Any]], history: list[Message],
                         iteration: int) -> Pause | None:
        spec = self.spec
        for index in range(start, len(calls)):
            call = calls[index]
            _emit(scope, "stream.tool_start", {"tool_name": call["name"],
                                               "tool_call_id": call["id"],
                                               "args": call.get("args") or {},
                                               "iteration": iteration})
            gated = await spec.act.gate_call(scope, call, iteration) \
                if spec.act is not None and spec.act.gates_tools else None
            if gated is not None and gated.ask is not None:
                return self._pause(scope, calls, index, results, history, iteration,
                                   "check_in", {**self._evidence_pack(scope, gated.call),
                                                "asked_by_rule": gated.ask})
            if gated is not None and gated.refusal is not None:
                outcome = gated.refusal
            else:
                permitted = gated.call if gated else call
                if self._needs_check_in(permitted):
                    return self._pause(scope, calls, index, results, history, iteration,
                                       "check_in", self._evidence_pack(scope, permitted))
                try:
                    outcome = await self._dispatch(scope, permitted, iteration)
                except PauseRequest as request:
                    return self._pause(scope, calls, index, results, history, iteration,
                                       request.kind, request.data)
            self._settle(scope, call, outcome, results, history, iteration)
            if gated is not None and gated.halted:
                self._halt(scope, calls, results, history, iteration)
                break
        scope["history"] = history
        scope["tool_results"] = results
        scope["iteration"] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration,
                                             "tool_call_count": len(calls)})
        return None

    def _settle(self, scope: Scope, call: ToolCall, outcome: ToolOutcome,
                results: list[dict[str, Any]], history: list[Message], iteration: int) -> None:
        """One call's result: events, the tool message, the batch row, skill activation."""
        spec = self.spec
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

    def _needs_check_in(self, call: ToolCall) -> bool:
        found = self.spec.registry.tools.get(call["name"])
        rule = found.check_in if found is not None else None
        if rule is None or rule is False:
            return False
        if callable(rule):
            try:
                return bool(rule(call.get("args") or {}))
            except Exception:
                return True  # consent is fail-closed: a broken predicate asks a person
        return bool(rule)

    def _pause(self, scope: Scope, calls: list[ToolCall], index: int,
               results: list[dict[str, Any]], history: list[Message], iteration: int,
               kind: str, data: Any) -> Pause:
        call = calls[index]
        scope["history"] = history
        scope["paused_tool_batch"] = {"calls": calls, "index": index, "results": results,
                                      "iteration": iteration, "kind": kind}
        payload = {"kind": kind, "tool_name": call["name"], "tool_call_id": call["id"],
                   "iteration": iteration, "data": data}
        _emit(scope, "pause.requested", payload)
        return pause(payload)

    def _evidence_pack(self, scope: Scope, call: ToolCall) -> dict[str, Any]:
        """What a person needs to consent: the call, the context the run consumed, and which
        context drove the choice (ranked by token overlap with the call — no model call)."""
        found = self.spec.registry.tools[call["name"]]
        args = call.get("args") or {}
        choice = f"{call['name']} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
        system = scope.get("system_prompt") or ""
        consumed = []
        for row in scope.get("system_slot") or ():
            if row["source"] != "base":
                consumed.append({"id": row["source"], "flavor": row["flavor"],
                                 "slot": "system", "text": system[row["start"]:row["end"]]})
        for message in scope["history"]:
            if message["role"] == "tool":
                consumed.append({"id": message.get("tool_name") or "tool", "flavor": "tool",
                                 "slot": "messages", "text": str(message["content"])})
            elif message["role"] == "user" and "injected_by" not in message:
                consumed.append({"id": "user", "flavor": "user", "slot": "messages",
                                 "text": str(message["content"])})
        scores = overlap_scores(choice, [c["text"] for c in consumed])
        drivers = sorted(
            ({"id": c["id"], "flavor": c["flavor"], "score": round(score, 3),
              "tier": "proxy"} for c, score in zip(consumed, scores, strict=True) if score > 0),
            key=lambda d: (-d["score"], d["id"]))
        trail = [{"iteration": r["iteration"], "chosen": r.get("chosen")}
                 for r in scope.get("route_trail") or ()]
        return {
            "will_do": {"tool": call["name"], "description": found.description, "args": args},
            "context_consumed": [{k: v for k, v in c.items() if k != "text"} for c in consumed],
            "drivers": drivers[:5],
            "trail": trail or [{"iteration": scope["iteration"], "chosen": "tool-calls"}],
        }

    async def _dispatch(self, scope: Scope, call: ToolCall, iteration: int) -> ToolOutcome:
        """Run one permitted call (steps 4–6 of ``moments.py``'s dispatch order)."""
        from ..tools.code_runner import dispatch_script_call  # loaded by the first tool call

        spec = self.spec
        sent = await dispatch_script_call(
            spec.registry, call, ToolContext(call["id"], iteration, scope.run_id), scope,
            turn=scope["turn"])
        outcome = sent.outcome
        if sent.code_run is not None:
            _emit(scope, "tools.code_run", sent.code_run)
        if spec.skip_step is not None:
            outcome = self._follow_steps(scope, call, outcome, iteration)
        if spec.act is None:
            return outcome
        return await spec.act.judge_result(scope, call, outcome, iteration)

    @staticmethod
    def _halt(scope: Scope, calls: list[ToolCall], results: list[dict[str, Any]],
              history: list[Message], iteration: int) -> None:
        """A permission halt: later calls of the batch get a "not run" result (so the
        conversation stays well paired for a follow-up), then the run stops after this stage."""
        answered = {r["tool_call_id"] for r in results}
        for call in calls:
            if call["id"] not in answered:
                history.append({"role": "tool", "tool_call_id": call["id"],
                                "tool_name": call["name"], "content": (
                                    "Not run: the run was stopped by policy before this "
                                    "call.")})
        halt = scope["permission_halt"]
        _emit(scope, "permission.halt", {**halt, "sequence_length": len(answered)})
        scope["stopped_early"] = "permission-halt"
        scope["final_content"] = ""
        scope.break_("permission-halt")

    def _follow_steps(self, scope: Scope, call: ToolCall, outcome: ToolOutcome,
                      iteration: int) -> ToolOutcome:
        """Advance, skip or introduce the active skill's procedure; say so in the result."""
        pointer = scope.get("skill_steps")
        name = call["name"]
        if name == READ_SKILL and outcome.status == "success":
            steps = self.spec.steps_of((call.get("args") or {}).get("id"))
            if steps:
                intro = f"You are on step 1 of {len(steps)}: {steps[0]['tool']} — " \
                        f"{steps[0]['note']}."
                return replace(outcome, content=f"{outcome.content}\n{intro}")
            return outcome
        if name == SKIP_STEP:
            if pointer is None or pointer["step"] > pointer["total"]:
                return replace(outcome, content="No step procedure is in progress; there is "
                               "nothing to skip.", status="invalid", error=True)
            reason = str((call.get("args") or {}).get("reason", "")).strip()
            if not reason:
                return replace(outcome, content=f"Say why you skip step {pointer['step']}: "
                               "call skip_step with a reason.", status="invalid", error=True)
            steps = self.spec.steps_of(pointer["skill"])
            skipped = pointer["step"]
            pointer = {**pointer, "step": skipped + 1,
                       "skipped": [*pointer["skipped"], {"step": skipped, "reason": reason}]}
            scope["skill_steps"] = pointer
            _emit(scope, "skill.step_skipped", {"skill_id": pointer["skill"], "step": skipped,
                                                "reason": reason, "iteration": iteration})
            return replace(outcome, content=f"Skipped step {skipped} of {pointer['total']} "
                           f"({reason}). {step_sentence(steps, pointer['step'])}")
        if pointer is None or pointer["step"] > pointer["total"] or outcome.error:
            return outcome
        steps = self.spec.steps_of(pointer["skill"])
        if steps[pointer["step"] - 1]["tool"] != name:
            return outcome
        done = pointer["step"]
        pointer = {**pointer, "step": done + 1}
        scope["skill_steps"] = pointer
        _emit(scope, "skill.step_advanced", {"skill_id": pointer["skill"], "step": done,
                                             "completed": done == pointer["total"],
                                             "iteration": iteration})
        return replace(outcome, content=f"{outcome.content}\nStep {done} of {pointer['total']} "
                       f"done. {step_sentence(steps, pointer['step'])}")

    def step_nudge(self, scope: Scope) -> None:
        """The model answered with steps left: keep its answer and remind it once."""
        iteration = scope["iteration"]
        pointer = scope["skill_steps"]
        steps = self.spec.steps_of(pointer["skill"])
        history: list[Message] = scope["history"]
        history.append({"role": "assistant", "content": scope.get("llm_content") or ""})
        history.append({"role": "user", "injected_by": "step-nudge", "content": (
            f"The {pointer['skill']} procedure is not finished. "
            f"{step_sentence(steps, pointer['step'])} Continue with it, or call skip_step "
            "with a reason.")})
        scope["history"] = history
        scope["skill_steps"] = {**pointer, "nudged": True}
        scope["iteration"] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})

    def wrap_up(self, scope: Scope) -> None:
        iteration = scope["iteration"]
        history: list[Message] = scope["history"]
        history.append({"role": "user", "content": WRAP_UP_INSTRUCTION, "injected_by": "wrap-up"})
        scope["history"] = history
        scope["wrap_up_asked"] = True
        scope["iteration"] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})

    def finalize(self, scope: Scope) -> str:
        return self._finalize(scope, scope.get("llm_content") or "")

    async def finalize_judged(self, scope: Scope) -> str:
        """Finalize with the answer the output rules let through ("" when withheld)."""
        assert self.spec.act is not None
        return self._finalize(scope, await self.spec.act.judge_output(
            scope, scope.get("llm_content") or ""))

    def _finalize(self, scope: Scope, content: str) -> str:
        iteration = scope["iteration"]
        scope["final_content"] = content
        if self.spec.memories:
            scope["new_messages"] = [{"role": "user", "content": scope["user_message"]},
                                     {"role": "assistant", "content": content}]
            if any(m.type == "causal" for m in self.spec.memories):
                scope["run_evidence"] = self._run_evidence(scope, iteration)
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})
        _emit(scope, "agent.turn_end", {
            "turn": scope["turn"], "content": content, "iterations": iteration,
            "input_tokens": scope["input_tokens"], "output_tokens": scope["output_tokens"],
            "stopped_early": scope.get("stopped_early")})
        return str(content)


    def _run_evidence(self, scope: Scope, iteration: int) -> dict[str, Any]:
        """What a causal snapshot keeps of this turn: tool calls, route choices, cost."""
        calls: dict[str, dict[str, Any]] = {}
        for message in scope["history"]:
            for call in message.get("tool_calls") or ():
                calls[call["id"]] = {"name": call["name"], "args": call.get("args") or {},
                                     "result_preview": "", "errored": False}
            if message["role"] == "tool" and message.get("tool_call_id") in calls:
                text = str(message["content"])
                calls[message["tool_call_id"]]["result_preview"] = (
                    text if len(text) <= 200 else text[:199] + "…")
        return {"iterations": iteration, "tool_calls": list(calls.values()), "decisions": [],
                "token_usage": {"input": scope["input_tokens"],
                                "output": scope["output_tokens"]}}


def _mount_memories(builder: FlowBuilder, spec: AgentSpec, *,
                    side: Literal["read", "write"]) -> FlowBuilder:
    """Mount each memory's read (after Seed) or write (after Finalize) chart as a subflow."""
    for memory in spec.memories:
        key = memory.id
        if side == "read":
            builder = builder.subflow(
                f"memory_read_{key}", memory.read, name=f"Recall {key}",
                description=f"Recall from memory {key!r}",
                input=lambda s: {"identity": s["identity"], "turn": s["turn"],
                                 "messages": s["history"]},
                output=_recall_output(key))
        elif memory.write is not None:
            builder = builder.subflow(
                f"memory_write_{key}", memory.write, name=f"Remember {key}",
                description=f"Write this turn to memory {key!r}",
                input=lambda s: {"identity": s["identity"], "turn": s["turn"],
                                 "new_messages": s["new_messages"],
                                 "run_evidence": s.get("run_evidence")})
    return builder


def _recall_output(key: str) -> Callable[[Any], dict[str, Any]]:
    """Lift a memory read's recall (and its retrieval evidence) into the agent's state."""

    def output(inner: Any) -> dict[str, Any]:
        lifted = {f"memory_recall_{key}": inner.get("recall")
                  or {"text": "", "entry_ids": [], "turns": []}}
        if "retrieved" in inner:
            lifted[f"memory_retrieved_{key}"] = inner["retrieved"]
        return lifted

    return output


def build_agent_chart(spec: AgentSpec, *, name: str = "Agent") -> Chart:
    """The agent's chart. ``spec.with_tools=False`` gives the single-call ``LLMCall`` shape."""
    stages = _Stages(spec)
    builder = _mount_memories(
        flow_chart("Seed", stages.seed_judged if spec.act and spec.act.at("input") else
                   stages.seed_with_memory if spec.memories else stages.seed,
                   id="seed", description="Seed the turn"), spec,
        side="read")
    builder = (
        builder.then("Injections", stages.injections, id="injections",
              description="Evaluate the context injections")
        .then("SystemSlot", stages.system_slot, id="system_slot",
              description="Assemble the system prompt")
        .then("MessagesSlot", stages.messages_slot, id="messages_slot",
              description="Assemble the messages")
    )
    if spec.window is not None:
        builder = builder.then("Window", stages.window, id="window",
                               description="Choose the part of the history the model is sent")
    builder = (
        builder.then("ToolsSlot", stages.tools_slot, id="tools_slot",
              description="Assemble the tool list")
        .then("CallLLM", stages.call_llm, id="call_llm", description="Call the model")
    )
    if not spec.with_tools:
        return builder.then("Finalize", stages.finalize, id="finalize",
                            description="Hand back the answer").build(description=name)
    route: Callable[[Scope], Decision] = stages.route
    routed = (
        builder.decide("Route", route, id="route", description="Route on the model's answer")
        .branch("tool-calls", "ToolCalls", stages.tool_calls, id="tool_calls",
                description="Run the requested tools", loop_to="injections",
                resume=stages.tool_calls_resume)
        .branch("wrap-up", "WrapUp", stages.wrap_up, id="wrap_up",
                description="Ask for an answer without tools", loop_to="injections")
        .branch("step-nudge", "StepNudge", stages.step_nudge, id="step_nudge",
                description="Remind the model of the unfinished procedure", loop_to="injections")
        .branch("final", "Finalize",
                stages.finalize_judged if spec.act and spec.act.at("output")
                else stages.finalize,
                id="finalize",
                description="Hand back the answer")
        .end()
    )
    return _mount_memories(routed, spec, side="write").build(description=name)

