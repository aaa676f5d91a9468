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
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from ..context._delivery import KeysMemo, deliver, moves_system_messages
from ..context._injection import Injection, InjectionContext, Trigger, evaluate_injections
from ..context._skills import SKIP_STEP, step_sentence
from ..context._slots import CACHEABLE, compose_tools
from ..events._dispatcher import PREFIX
from ..flow import Chart, Decision, FlowEvent, Scope, flow_chart
from ..flow._durable import durable_timed, step_runner
from ..flow._redact import REDACTED
from ..flow._scope import peek
from ..flow._values import MISSING, freeze
from ..providers._base import CachePrefix, LLMRequest, LLMResponse, Message, WireMemo
from ..providers._construct import set_dict, set_extra, set_fields_set, set_private
from ..providers._retry_policy import resilience_reports
from ..runs import trace
from ..tools._script_keys import LEDGER_KEY
from ._cache import cache_prefix
from ._memo import NO_INJECTIONS, SystemMemo
from ._memory_mount import MemoryStages, mount_memories
from ._spec import ITERATION_START, LLM_END, LLM_START, ROUTE_DECIDED, AgentSpec, emit_turn_end
from ._spec import emit as _emit
from ._stream import stream_pace
from ._tool_batch import ToolBatchStages
from ._usage import budget_stop, record_call

__all__ = ["WRAP_UP_INSTRUCTION", "AgentSpec", "build_agent_chart"]

WRAP_UP_INSTRUCTION = (
    "You have used your whole budget of actions for this request, so no more tools can be "
    "called. Do not ask for tools. Answer now: say what you did, what is still undone, and "
    "what the person should know."
)

live_emit: contextvars.ContextVar[Callable[[FlowEvent], None] | None] = contextvars.ContextVar(
    "live_emit", default=None)
"""The current run's path to listeners for events that are delivered but not recorded."""

_new = object.__new__

_EVENT_NAMES = {
    "retried": "error.retried", "recovered": "error.recovered",
    "circuit_changed": "error.circuit_changed", "fell_back": "fallback.triggered",
}


def _report(scope: Scope, data: dict[str, Any]) -> None:
    """A resilience wrapper's report (a retry, a fallback...) as an event of the call's step."""
    kind = data.pop("kind")
    _emit(scope, _EVENT_NAMES.get(kind, f"error.{kind}"), data)


class _Stages(MemoryStages, ToolBatchStages):
    """The stage functions, closed over one agent's spec."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self._wire = WireMemo()  # the wire form of the history, built as the history grows
        self._schemas: tuple[list[Any], Any] | None = None  # the registry's, frozen once
        self._keys = KeysMemo()  # delivery keys in the history, scanned as it grows
        self._system = SystemMemo(spec.system, spec.system_cache)  # the prompt per pieces
        # fixed for the spec (its agent's injections and memories), asked at every iteration
        self._tracks = spec.tracks_context
        self._delivers = spec.delivers_messages
        # no context (injections, memory): the system prompt and the tools are the agent's own
        self._plain = not spec.tracks_context
        self._caches_system = spec.system_cache in CACHEABLE
        self._base_prompt: str = self._system(())[0]  # the prompt when nothing is active
        self._notes_decisions = any(m.type == "causal" and m.write is not None
                                    for m in spec.memories)  # (``note_decision``'s test)

    def seed(self, scope: Scope) -> None:
        self._seed(scope, self._host_turn(scope))

    @staticmethod
    def _host_turn(scope: Scope) -> int:
        args = scope.args
        history = args.get(trace.HISTORY) or ()
        return int(args.get(trace.TURN) or 1 + sum(
            1 for m in history if m["role"] == "user" and "injected_by" not in m))

    def _seed(self, scope: Scope, turn: int) -> None:
        args = scope.args
        if args.get(trace.RESUME_STATE) is not None:
            self._reseed(scope, args[trace.RESUME_STATE])
            return
        message = args[trace.MESSAGE]
        history: list[Message] = list(args.get(trace.HISTORY) or [])
        history.append({"role": "user", "content": message})
        scope[trace.USER_MESSAGE] = message
        scope[trace.HISTORY] = history
        scope[trace.TURN] = turn
        scope[trace.ITERATION] = 1
        scope[trace.MAX_ITERATIONS] = self.spec.max_iterations
        scope[trace.INPUT_TOKENS] = 0
        scope[trace.OUTPUT_TOKENS] = 0
        ledger = args.get(LEDGER_KEY)
        if ledger:
            from ..tools._scripts import check_script_ledger, without_earlier_script_text

            check_script_ledger(ledger, source="continue_from")
            scope[LEDGER_KEY] = list(without_earlier_script_text(ledger, turn))
        if self.spec.tracks_context:
            scope[trace.ACTIVATED_SKILLS] = []
            scope[trace.TOOL_RESULTS] = []
        _emit(scope, "agent.turn_start", {"turn": turn, "user_message": message})

    def _reseed(self, scope: Scope, saved: dict[str, Any]) -> None:
        """Replay after a crash: take the failed run's state as it was last committed.

        Tool results already in ``history`` are kept (no tool runs twice) and the delivery
        ledger comes along, so no injected message is delivered twice.
        """
        for key, value in saved.items():
            scope[key] = value
        _emit(scope, "agent.turn_start", {"turn": saved[trace.TURN],
                                          "user_message": saved[trace.USER_MESSAGE]})

    async def seed_judged(self, scope: Scope) -> None:
        """Seed, then let the input rules judge the user's message (deny stops the run)."""
        if self.spec.memories:
            await self.seed_with_memory(scope)
        else:
            self.seed(scope)
        assert self.spec.act is not None
        await self.spec.act.judge_input(scope)

    def injections(self, scope: Scope) -> None:
        """Judge every declared injection against this iteration and the previous tool batch."""
        spec = self.spec
        if not self._tracks:
            scope[trace.ACTIVE_INJECTIONS] = NO_INJECTIONS  # the committed one: no compare
            return
        iteration = scope[trace.ITERATION]
        ctx = InjectionContext(
            iteration=iteration, max_iterations=scope[trace.MAX_ITERATIONS],
            user_message=scope[trace.USER_MESSAGE], history=scope[trace.HISTORY],
            tool_results=scope[trace.TOOL_RESULTS], activated=scope[trace.ACTIVATED_SKILLS])
        rows = evaluate_injections(spec.injections, ctx)
        rows.extend(self._recall_rows(scope))
        active = [row["id"] for row in rows if row["fired"]]
        scope[trace.CONTEXT_EVALUATION] = rows
        scope[trace.ACTIVE_INJECTIONS] = active
        if spec.skip_step is not None:
            self._rekey_steps(scope)
        _emit(scope, "context.evaluated", {
            "iteration": iteration, "active": active,
            "skipped": [{"id": r["id"], "reason": r["reason"]} for r in rows if not r["fired"]]})

    def _rekey_steps(self, scope: Scope) -> None:
        """The procedure follows the most recently activated skill, restarting when it changes."""
        activated = scope[trace.ACTIVATED_SKILLS]
        tenant = activated[-1] if activated else None
        steps = self.spec.steps_of(tenant)
        pointer = scope.get(trace.SKILL_STEPS)
        if steps and (pointer is None or pointer["skill"] != tenant):
            scope[trace.SKILL_STEPS] = {"skill": tenant, "step": 1, "total": len(steps),
                                    "skipped": [], "nudged": False}
        elif not steps and pointer is not None:
            del scope[trace.SKILL_STEPS]

    def _active(self, scope: Scope) -> list[Injection]:
        found = peek(scope, trace.ACTIVE_INJECTIONS, MISSING)  # only looked at: no copy
        ids = set(scope[trace.ACTIVE_INJECTIONS] if found is MISSING else found)
        if not ids and not self.spec.memories:
            return []
        active = [i for i in self.spec.injections if i.id in ids]
        for key, memory, piece in self._recall_pieces(scope):
            if key in ids:
                recall = scope.get(trace.MEMORY_RECALL.of(memory.id)) or {}
                active.append(Injection(id=key, flavor=recall.get("flavor", "memory"),
                                        trigger=Trigger("always"), system=piece["text"],
                                        description=memory.description))
        return active

    def system_slot(self, scope: Scope) -> None:
        spec = self.spec
        if spec.react_mode == "classic" and scope[trace.ITERATION] > 1:
            return
        if self._plain:  # ``_active`` of an agent without context, inlined: none is active
            found = peek(scope, trace.ACTIVE_INJECTIONS, MISSING)  # only looked at: no copy
            if found is MISSING:
                found = scope[trace.ACTIVE_INJECTIONS]  # (raises, naming the key)
            if not found:
                scope[trace.SYSTEM_PROMPT] = self._base_prompt
                return
        text, rows = self._system(self._active(scope))  # frozen: unchanged, not compared
        scope[trace.SYSTEM_PROMPT] = text
        if self._tracks:
            scope[trace.SYSTEM_SLOT] = rows
            self._landed(scope, rows, "system")

    def messages_slot(self, scope: Scope) -> None:
        """The messages slot is the history; injected messages are delivered into it here."""
        spec = self.spec
        if not self._delivers:
            peek(scope, trace.HISTORY)  # read as ever, without copying a long history
            return
        history = scope[trace.HISTORY]
        pending = [(i.id, i.flavor, i.messages) for i in self._active(scope) if i.messages]
        ledger = set(scope.get(trace.DELIVERED_KEYS) or ()) | self._keys(history)
        before = len(ledger)
        delivered, deferred = deliver(pending, history, ledger, scope[trace.ITERATION],
                                      system_to_prompt=moves_system_messages(spec.provider))
        if delivered:
            scope[trace.HISTORY] = history
            for row in delivered:
                _emit(scope, "context.injected", {
                    "injection_id": row["injection_id"],
                    "slot": "system" if row.get("sent_to") == "system_prompt" else "messages",
                    "trigger": self._trigger(row["injection_id"]),
                    "iteration": scope[trace.ITERATION]})
        if len(ledger) != before:
            scope[trace.DELIVERED_KEYS] = sorted(ledger)
        scope[trace.MESSAGES_DELIVERY] = {"iteration": scope[trace.ITERATION],
                                          "delivered": delivered, "deferred": deferred}

    async def window(self, scope: Scope) -> None:
        """Choose which part of ``history`` this call is sent; record it and what left.

        ``history`` itself is untouched. ``window`` holds the plan of this call (rebuild the
        request with ``windowed_messages``); ``window_evicted`` gains one entry per call.
        """
        strategy = self.spec.window
        assert strategy is not None
        iteration = scope[trace.ITERATION]
        plan = await strategy.plan(scope[trace.HISTORY], turn=scope[trace.TURN],
                                   previous=scope.get(trace.WINDOW))
        if self.spec.act is not None and self.spec.act.at("window"):
            from ._window import plan_for

            chosen = await self.spec.act.judge_window(
                scope, list(plan.kept), [dict(e) for e in plan.evicted], strategy.name)
            if chosen is not None:
                plan = plan_for(scope[trace.HISTORY], chosen, plan, turn=scope[trace.TURN])
        scope[trace.WINDOW] = plan.to_state(strategy.name, iteration)
        evicted = [dict(e) for e in plan.evicted]
        scope.append(trace.WINDOW_EVICTED, {  # one entry a call, without copying the list
            "iteration": iteration, "strategy": strategy.name, "evicted": evicted})
        if evicted:
            _emit(scope, "context.evicted", {
                "iteration": iteration, "strategy": strategy.name, "evicted": evicted,
                "kept_count": len(plan.kept), "summarized": plan.summary is not None})

    def tools_slot(self, scope: Scope) -> None:
        spec = self.spec
        if scope.get(trace.WRAP_UP_ASKED):  # the wrap-up call is made without tools
            scope[trace.TOOL_SCHEMAS] = []
            if spec.tracks_context:
                scope[trace.TOOLS_SLOT] = []
            return
        if spec.react_mode == "classic" and scope[trace.ITERATION] > 1:
            return
        if not spec.with_tools:
            scope[trace.TOOL_SCHEMAS] = []
            return
        if not spec.injections:
            # the registry's schemas, frozen once: written again unchanged, the commit sees the
            # committed value itself and compares nothing (not every schema, every iteration)
            schemas = spec.registry.schemas()
            kept = self._schemas
            if kept is None or kept[0] is not schemas:
                kept = self._schemas = (schemas, freeze(schemas))
            scope[trace.TOOL_SCHEMAS] = kept[1]
            return
        schemas, rows = compose_tools(spec.static_tools, spec.read_skill, spec.skills,
                                      self._active(scope))
        pointer = scope.get(trace.SKILL_STEPS) if spec.skip_step is not None else None
        if pointer is not None and pointer["step"] <= pointer["total"]:
            schemas, rows = self._narrow_to_step(schemas, rows, pointer)
        scope[trace.TOOL_SCHEMAS] = schemas
        scope[trace.TOOLS_SLOT] = rows
        landed = {row["source"] for row in rows} - {"static", "read_skill"}
        for injection in self._active(scope):
            if injection.id in landed:
                _emit(scope, "context.injected", {
                    "injection_id": injection.id, "slot": "tools",
                    "trigger": injection.trigger.describe(), "iteration": scope[trace.ITERATION]})

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
        if trace.MEMORY_INJECTION.matches(injection_id):
            return "memory recall"
        return "base"

    def _landed(self, scope: Scope, rows: list[dict[str, Any]], slot: str) -> None:
        for row in rows:
            if row["source"] != "base":
                _emit(scope, "context.injected", {
                    "injection_id": row["source"], "slot": slot,
                    "trigger": self._trigger(row["source"]), "iteration": scope[trace.ITERATION]})

    async def call_llm(self, scope: Scope) -> None:
        spec = self.spec
        iteration = scope[trace.ITERATION]
        system = scope.get(trace.SYSTEM_PROMPT) or None
        history = peek(scope, trace.HISTORY)  # sent, never changed here: no copy
        if spec.window is not None:
            from ._window import windowed_messages

            history = windowed_messages(history, scope[trace.WINDOW])
        tools = [] if scope.get(trace.WRAP_UP_ASKED) else scope.get(trace.TOOL_SCHEMAS) or []
        messages = self._wire(history)
        if self._plain:  # ``cache_prefix`` of an agent without context, inlined: the whole
            sent = len(tools)  # prompt is the base prompt, the whole tool list its own tools
            stable = len(system) if system and self._caches_system else 0
            cache: CachePrefix | None = {
                "system": stable, "tools": sent,
                "messages": len(messages) if sent and spec.with_tools else 0,
            } if stable or sent else None
        else:
            cache = cache_prefix(spec, scope, messages, tools)
        # ``LLMRequest.model_construct(...)`` of these fields, in straight-line code (pinned by
        # tests/agent/test_loop_request.py): one a call
        request: LLMRequest = _new(LLMRequest)
        set_dict(request, {
            "model": spec.model, "messages": messages, "system": system, "tools": tools,
            "temperature": spec.temperature, "max_tokens": spec.max_tokens, "stop": None,
            "tool_choice": None, "seed": spec.seed, "cache": cache, "output_schema": None})
        set_fields_set(request, {
            "model", "messages", "system", "tools", "temperature", "max_tokens", "stop",
            "tool_choice", "seed", "cache"})
        set_extra(request, None)
        set_private(request, None)
        if spec.output is not None:
            spec.output.prepare(scope, request)
        scope.emit(ITERATION_START, {"iteration": iteration})
        scope.emit(LLM_START, {
            "iteration": iteration, "provider": spec.provider.name, "model": spec.model,
            "system_prompt_chars": len(system or ""), "messages_count": len(history),
            "tools_count": len(tools)})
        if step_runner.get() is not None:  # a durable run's step (flow/_durable.py)
            response, took = await durable_timed(
                "llm", lambda: self._call(scope, request, iteration))
        elif spec.stream or stream_pace.get() is not None:
            started = time.perf_counter()
            response = await self._call(scope, request, iteration)
            took = time.perf_counter() - started
        else:  # ``_call`` of a plain call, inlined (durable_timed's direct path)
            started = time.perf_counter()
            token = resilience_reports.set(partial(_report, scope))
            try:
                response = await spec.provider.complete(request)
            finally:
                resilience_reports.reset(token)
            took = time.perf_counter() - started
        if spec.output is not None:
            response = spec.output.answered(scope, response)
        usage = response.usage
        calls = response.tool_calls
        scope[trace.LLM_CONTENT] = response.content
        # frozen here rather than copied here and frozen by the commit: the same value
        scope[trace.LLM_TOOL_CALLS] = freeze(calls)
        scope[trace.STOP_REASON] = response.stop_reason
        scope[trace.INPUT_TOKENS] = scope[trace.INPUT_TOKENS] + usage.input
        scope[trace.OUTPUT_TOKENS] = scope[trace.OUTPUT_TOKENS] + usage.output
        scope.emit(LLM_END, {
            "iteration": iteration, "content": response.content,
            "tool_call_count": len(calls),
            "usage": {"input": usage.input, "output": usage.output,
                      "cache_read": usage.cache_read, "cache_write": usage.cache_write},
            "stop_reason": response.stop_reason})
        record_call(scope, spec, response, seconds=took, iteration=iteration,
                    cache=request.cache)

    async def _call(self, scope: Scope, request: LLMRequest, iteration: int) -> LLMResponse:
        """The call, with the wrappers' reports going to this step's events (``call_llm``
        inlines the plain case: no stream, not durable)."""
        token = resilience_reports.set(partial(_report, scope))
        try:
            if not self.spec.stream and stream_pace.get() is None:
                return await self.spec.provider.complete(request)
            return await self._streamed(scope, request, iteration)
        finally:
            resilience_reports.reset(token)

    async def _streamed(self, scope: Scope, request: LLMRequest, iteration: int) -> LLMResponse:
        spec = self.spec
        live = live_emit.get()
        pace = stream_pace.get()  # a run_stream's run: tokens whatever stream= says
        if pace is not None:
            await pace()
        response: LLMResponse | None = None
        wants = pace is not None or spec.dispatcher.wants(PREFIX + "stream.token")
        masked = scope.redacts(trace.LLM_CONTENT)  # a token is a piece of the answer
        async for chunk in spec.provider.stream(request):
            if chunk.done:
                response = chunk.response
            elif wants and (chunk.content or chunk.restart) and live is not None:
                piece = {"iteration": iteration, "index": chunk.index,
                         "content": REDACTED if masked and chunk.content
                         else scope.recorded(chunk.content)}
                if chunk.restart:  # a retry starts the answer over: what came is superseded
                    piece["restart"] = True
                live(FlowEvent("emit", scope.run_id, scope.runtime_stage_id, "call_llm",
                               "CallLLM", PREFIX + "stream.token", piece))
                if pace is not None:
                    await pace()
        if response is None:  # a stream that never finished: ask once more, whole
            response = await spec.provider.complete(request)
        return response

    def route(self, scope: Scope) -> Decision:
        spec = self.spec
        iteration = scope[trace.ITERATION]
        calls = peek(scope, trace.LLM_TOOL_CALLS, MISSING)  # only counted: no copy
        if calls is MISSING:
            calls = scope[trace.LLM_TOOL_CALLS]  # (raises, naming the key)
        limit = scope[trace.MAX_ITERATIONS]
        wrapped = bool(scope.get(trace.WRAP_UP_ASKED))
        out_of_budget = iteration >= limit
        chosen = "tool-calls" if calls and not out_of_budget else "final"
        rationale = ("the model asked for tools" if chosen == "tool-calls"
                     else "the model answered")
        if chosen == "final" and calls and out_of_budget and not wrapped:
            wrap = spec.wrap_up and bool(spec.registry) and not wrapped
            scope[trace.STOPPED_EARLY] = "max-iterations"
            _emit(scope, "agent.budget_exhausted", {
                "reason": "max-iterations", "iteration": iteration, "limit": limit,
                "pending_tool_calls": len(calls),
                "action": "wrapped-up" if wrap else "cut-short"})
            if wrap:
                chosen, rationale = "wrap-up", "the iteration budget ran out with tools pending"
            else:
                rationale = "the iteration budget ran out"
        pointer = scope.get(trace.SKILL_STEPS) if spec.skip_step is not None else None
        if (chosen == "final" and not calls and pointer is not None
                and pointer["step"] <= pointer["total"]):
            if not pointer["nudged"]:
                chosen, rationale = "step-nudge", "the model stopped with procedure steps left"
            else:
                _emit(scope, "skill.steps_unfinished", {
                    "skill_id": pointer["skill"], "remaining": pointer["total"] - pointer["step"]
                    + 1, "total": pointer["total"], "iteration": iteration})
        if spec.output is not None:
            chosen, rationale = spec.output.route(scope, chosen, rationale)
        if chosen != "final" and spec.budget is not None and (
                stop := budget_stop(scope)) is not None:
            chosen, rationale = "final", stop[1]  # a crossed budget ends the run, no wrap-up
            scope[trace.STOPPED_EARLY] = stop[0]
        if self._notes_decisions:
            self.note_decision(scope, chosen, rationale)
        scope.emit(ROUTE_DECIDED,
                   {"iteration": iteration, "chosen": chosen, "rationale": rationale})
        inputs = [{"key": "llm_tool_calls", "value": f"({len(calls)} requested)"},
                  {"key": "iteration", "value": f"{iteration} of {limit}"}]
        if wrapped:
            inputs.append({"key": "wrap_up_asked", "value": "True"})
        rule = {"type": "function", "rule": 0, "branch": chosen, "matched": True,
                "label": rationale, "inputs": inputs}
        return Decision(chosen, {"chosen": chosen, "default": "final", "rules": [rule]})

    def step_nudge(self, scope: Scope) -> None:
        """The model answered with steps left: keep its answer and remind it once."""
        iteration = scope[trace.ITERATION]
        pointer = scope[trace.SKILL_STEPS]
        steps = self.spec.steps_of(pointer["skill"])
        history: list[Message] = scope[trace.HISTORY]
        history.append({"role": "assistant", "content": scope.get(trace.LLM_CONTENT) or ""})
        history.append({"role": "user", "injected_by": "step-nudge", "content": (
            f"The {pointer['skill']} procedure is not finished. "
            f"{step_sentence(steps, pointer['step'])} Continue with it, or call skip_step "
            "with a reason.")})
        scope[trace.HISTORY] = history
        scope[trace.SKILL_STEPS] = {**pointer, "nudged": True}
        scope[trace.ITERATION] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})

    def wrap_up(self, scope: Scope) -> None:
        iteration = scope[trace.ITERATION]
        history: list[Message] = scope[trace.HISTORY]
        history.append({"role": "user", "content": WRAP_UP_INSTRUCTION, "injected_by": "wrap-up"})
        scope[trace.HISTORY] = history
        scope[trace.WRAP_UP_ASKED] = True
        scope[trace.ITERATION] = iteration + 1
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})

    def finalize(self, scope: Scope) -> str:
        return self._finalize(scope, scope.get(trace.LLM_CONTENT) or "")

    async def finalize_judged(self, scope: Scope) -> str:
        """Finalize with the answer the output rules let through ("" when withheld)."""
        assert self.spec.act is not None
        return self._finalize(scope, await self.spec.act.judge_output(
            scope, scope.get(trace.LLM_CONTENT) or ""))

    def _finalize(self, scope: Scope, content: str) -> str:
        iteration = scope[trace.ITERATION]
        scope[trace.FINAL_CONTENT] = content
        self.match_scripts(scope, content)
        if self.spec.memories:
            scope[trace.NEW_MESSAGES] = [{"role": "user", "content": scope[trace.USER_MESSAGE]},
                                     {"role": "assistant", "content": content}]
            if any(m.type == "causal" for m in self.spec.memories):
                scope[trace.RUN_EVIDENCE] = self._run_evidence(scope, iteration)
        _emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})
        emit_turn_end(scope, content)
        return str(content)


def build_agent_chart(spec: AgentSpec, *, name: str = "Agent") -> Chart:
    """The agent's chart. ``spec.with_tools=False`` gives the single-call ``LLMCall`` shape."""
    stages = _Stages(spec)
    builder = mount_memories(
        flow_chart("Seed", stages.seed_judged if spec.act and spec.act.at("input") else
                   stages.seed_with_memory if spec.memories else stages.seed,
                   id=trace.SEED, description="Seed the turn"), spec,
        side="read")
    builder = (
        builder.then("Injections", stages.injections, id=trace.INJECTIONS,
              description="Evaluate the context injections")
        .then("SystemSlot", stages.system_slot, id=trace.SYSTEM_SLOT_STAGE,
              description="Assemble the system prompt")
        .then("MessagesSlot", stages.messages_slot, id=trace.MESSAGES_SLOT,
              description="Assemble the messages")
    )
    if spec.window is not None:
        builder = builder.then("Window", stages.window, id=trace.WINDOW_STAGE,
                               description="Choose the part of the history the model is sent")
    builder = (
        builder.then("ToolsSlot", stages.tools_slot, id=trace.TOOLS_SLOT_STAGE,
              description="Assemble the tool list")
        .then("CallLLM", stages.call_llm, id=trace.CALL_LLM, description="Call the model")
    )
    if not spec.with_tools and spec.output is None:
        return builder.then("Finalize", stages.finalize, id=trace.FINALIZE,
                            description="Hand back the answer").build(description=name,
                                                                      keyed_scope=True)
    route: Callable[[Scope], Decision] = stages.route
    branches = (
        builder.decide("Route", route, id=trace.ROUTE, description="Route on the model's answer")
        .branch("tool-calls", "ToolCalls", stages.tool_calls, id=trace.TOOL_CALLS,
                description="Run the requested tools", loop_to="injections",
                resume=stages.tool_calls_resume)
        .branch("wrap-up", "WrapUp", stages.wrap_up, id=trace.WRAP_UP,
                description="Ask for an answer without tools", loop_to="injections")
        .branch("step-nudge", "StepNudge", stages.step_nudge, id=trace.STEP_NUDGE,
                description="Remind the model of the unfinished procedure", loop_to="injections")
        .branch("final", "Finalize",
                stages.finalize_judged if spec.act and spec.act.at("output")
                else stages.finalize,
                id=trace.FINALIZE,
                description="Hand back the answer")
    )
    if spec.output is not None:  # an answer that does not validate goes back to the model
        branches = branches.branch(
            "invalid-output", "OutputRetry", spec.output.reask, id=trace.OUTPUT_RETRY,
            description="Send the answer's validation errors back to the model",
            loop_to="injections")
    routed = branches.end()
    return mount_memories(routed, spec, side="write").build(description=name, keyed_scope=True)

