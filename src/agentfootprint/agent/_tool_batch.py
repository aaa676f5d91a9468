"""The ToolCalls stage: one tool batch, per-call gates, pauses and the person's answer.

Per call, in order: ``stream.tool_start``; the permission gate and ``before_tool`` rules
(``moments.py``); a check-in or a rule's ``ask`` pauses here, before the tool runs; dispatch
(the script ledger files its row); skill-step bookkeeping; ``after_tool`` rules;
``stream.tool_end`` and the tool message. A tool may also pause the run itself
(``ask_human``/``pause_here``). Siblings after a paused call never run before the pause is
answered; on resume the paused call gets the answer as its result and the siblings run in
their original order, so every call still gets exactly one result.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ..context._skills import READ_SKILL, SKIP_STEP, step_sentence
from ..flow import Scope, pause
from ..flow._durable import durable_step, step_runner
from ..flow._pause import Pause
from ..flow._scope import peek
from ..flow._values import MISSING, FrozenDict, FrozenList, freeze
from ..providers._base import Message, ToolCall
from ..runs import trace
from ..tools._context import RunContext, ToolContext, deps_error, run_deps
from ..tools._pause import PauseRequest
from ..tools._registry import ToolOutcome, result_text
from ._journal import run_journal
from ._spec import ITERATION_END, TOOL_END, TOOL_START, emit_turn_end
from ._spec import emit as _emit
from ._sub_runs import file_sub_run
from ._sub_runs import reporter as sub_run_reporter

if TYPE_CHECKING:
    from ..tools._replay import ToolReplay
    from ._spec import AgentSpec

__all__ = ["ToolBatchStages"]


class ToolBatchStages:
    """The tool-batch stages of the loop (mixed into its stage set)."""

    spec: AgentSpec

    def tool_calls(self, scope: Scope) -> Coroutine[Any, Any, Pause | None]:
        """The stage: the assistant message, then the batch. Not a coroutine itself: the
        engine awaits the batch it returns (one coroutine less per iteration)."""
        iteration = scope[trace.ITERATION]
        # the committed calls themselves (only read here): the assistant message shares them
        calls: list[ToolCall] = peek(scope, trace.LLM_TOOL_CALLS, MISSING)
        if calls is MISSING:
            calls = scope[trace.LLM_TOOL_CALLS]  # (raises, naming the key)
        history: list[Message] = scope[trace.HISTORY]
        content = scope.get(trace.LLM_CONTENT) or ""
        # in its committed form (``calls`` is committed): the commit has nothing to freeze
        history.append(FrozenDict(  # type: ignore[arg-type]
            role="assistant", content=content if type(content) is str else freeze(content),
            tool_calls=calls))
        return self._run_batch(scope, calls, 0, [], history, iteration)

    async def tool_calls_resume(self, scope: Scope, answer: object) -> Pause | None:
        """Settle the paused call with the person's answer, then run the calls after it.

        Siblings after a paused call never run before the pause is answered; on resume they
        run in their original order, so every call still gets exactly one result.
        """
        from ..tools._replay import ToolReplay  # (loads on resume only: cold start)

        if isinstance(answer, ToolReplay):
            return await self._recover(scope, answer)
        pending = scope[trace.PAUSED_TOOL_BATCH]
        calls: list[ToolCall] = pending["calls"]
        index, iteration = pending["index"], pending["iteration"]
        results: list[dict[str, Any]] = list(pending["results"])
        history: list[Message] = scope[trace.HISTORY]
        call = calls[index]
        if pending["kind"] == "check_in":
            verdict = answer if isinstance(answer, dict) else {}
            by = verdict.get("by") or "a person"
            _emit(scope, "pause.check_in_settled", {
                "tool_name": call["name"], "tool_call_id": call["id"], "iteration": iteration,
                "approved": verdict.get("check_in") == "approved", "by": by,
                "note": verdict.get("note")})
            if verdict.get("check_in") == "approved":
                journal = run_journal.get()
                if journal is not None:
                    await journal.started(scope.runtime_stage_id, iteration, index, call)
                outcome = await self._dispatch(scope, call, iteration)
            else:
                note = f": {str(verdict['note']).rstrip('.')}." if verdict.get("note") else "."
                outcome = ToolOutcome(f"{by} declined this call, so it did not run{note} "
                                      "Adapt your plan; do not call it again unchanged.",
                                      error=True, status="declined")
                self._file_script(scope, call, iteration, paused=False)
        else:
            outcome = ToolOutcome(answer if isinstance(answer, str) else result_text(answer))
        journal = run_journal.get()
        if journal is not None:
            await journal.done(iteration, index, call, outcome, recorded=scope.recorded)
        del scope[trace.PAUSED_TOOL_BATCH]
        self._settle(scope, call, outcome, results, history, iteration)
        return await self._run_batch(scope, calls, index + 1, results, history, iteration)

    async def _run_batch(self, scope: Scope, calls: list[ToolCall], start: int,
                         results: list[dict[str, Any]], history: list[Message],
                         iteration: int) -> Pause | None:
        spec = self.spec
        journal = run_journal.get()
        tools = spec.registry.tools
        for index in range(start, len(calls)):
            call = calls[index]
            scope.emit(TOOL_START, {"tool_name": call["name"], "tool_call_id": call["id"],
                                    "args": call.get("args") or {}, "iteration": iteration})
            gated = await spec.act.gate_call(scope, call, iteration) \
                if spec.act is not None and spec.act.gates_tools else None
            if gated is not None and gated.ask is not None:
                return self._pause(scope, calls, index, results, history, iteration,
                                   "check_in", {**self._evidence_pack(scope, gated.call),
                                                "asked_by_rule": gated.ask})
            if gated is not None and gated.refusal is not None:
                outcome = gated.refusal
                self._file_script(scope, call, iteration, paused=False)
            else:
                permitted = gated.call if gated else call
                # a tool without a check-in is not asked ``_needs_check_in``
                rule = getattr(tools.get(permitted["name"]), "check_in", None)
                if rule is not None and rule is not False and self._needs_check_in(permitted):
                    return self._pause(scope, calls, index, results, history, iteration,
                                       "check_in", self._evidence_pack(scope, permitted))
                if journal is not None:
                    await journal.started(scope.runtime_stage_id, iteration, index, permitted)
                try:
                    outcome = await self._dispatch(scope, permitted, iteration,
                                                   proposed_by=call)
                except PauseRequest as request:
                    return self._pause(scope, calls, index, results, history, iteration,
                                       request.kind, request.data)
            if journal is not None:
                await journal.done(iteration, index, call, outcome, recorded=scope.recorded)
            self._settle(scope, call, outcome, results, history, iteration)
            if gated is not None and gated.halted:
                self._halt(scope, calls, results, history, iteration)
                break
        scope[trace.HISTORY] = history
        scope[trace.TOOL_RESULTS] = FrozenList(results)  # (its rows are frozen: ``_settle``)
        scope[trace.ITERATION] = iteration + 1
        scope.emit(ITERATION_END, {"iteration": iteration, "tool_call_count": len(calls)})
        return None

    async def _recover(self, scope: Scope, known: ToolReplay) -> Pause | None:
        """Continue a tool batch a crash interrupted (see ``_journal.py``): replay the calls
        with a recorded outcome, settle a call that was cut off mid-run, run the rest."""
        pending = scope.get(trace.PAUSED_TOOL_BATCH)
        history: list[Message] = scope[trace.HISTORY]
        if pending is None:
            calls: list[ToolCall] = scope[trace.LLM_TOOL_CALLS]
            index, results, iteration = 0, [], scope[trace.ITERATION]
            history.append({"role": "assistant", "content": scope.get(trace.LLM_CONTENT) or "",
                            "tool_calls": calls})
        else:  # it had paused in this batch, was resumed, then killed
            calls, index, iteration = pending["calls"], pending["index"], pending["iteration"]
            results = list(pending["results"])
            del scope[trace.PAUSED_TOOL_BATCH]
        while index < len(calls):
            call = calls[index]
            recorded = known.recorded(call)
            if recorded is not None:
                outcome = recorded
            elif call["id"] in known.started:
                outcome = await self._interrupted(scope, call, iteration, index, known)
            else:
                break
            self._settle(scope, call, outcome, results, history, iteration)
            index += 1
        return await self._run_batch(scope, calls, index, results, history, iteration)

    async def _interrupted(self, scope: Scope, call: ToolCall, iteration: int,
                           index: int, known: ToolReplay) -> ToolOutcome:
        """A call that started before a crash and has no outcome: run it again only when its
        tool says that is safe (idempotent, or free of side effects); else "outcome unknown"
        (the replay's one rule, ``tools/_replay.py``)."""
        journal = run_journal.get()
        refused = known.unrecorded(self.spec.registry.tools.get(call["name"]),
                                   call.get("args") or {})
        if refused is not None:
            outcome = refused
        else:
            if journal is not None:
                await journal.started(scope.runtime_stage_id, iteration, index, call)
            outcome = await self._dispatch(scope, call, iteration)
        if journal is not None:
            await journal.done(iteration, index, call, outcome, recorded=scope.recorded)
        return outcome

    def _settle(self, scope: Scope, call: ToolCall, outcome: ToolOutcome,
                results: list[dict[str, Any]], history: list[Message], iteration: int) -> None:
        """One call's result: events, the tool message, the batch row, skill activation."""
        spec = self.spec
        if outcome.issues:
            _emit(scope, "validation.args_invalid", {
                "tool_name": call["name"], "tool_call_id": call["id"],
                "iteration": iteration, "issues": [dict(i) for i in outcome.issues]})
        name, call_id, content, status = call["name"], call["id"], outcome.content, outcome.status
        scope.emit(TOOL_END, {
            "tool_name": name, "tool_call_id": call_id, "result": content,
            "error": outcome.error, "status": status, "iteration": iteration})
        # the message and the row in their committed form (``call`` is committed, the rest
        # are strings), so the commit has nothing to freeze
        history.append(FrozenDict(  # type: ignore[arg-type]
            role="tool", content=content if type(content) is str else freeze(content),
            tool_call_id=call_id, tool_name=name))
        origin = getattr(spec.registry.tools.get(name), "origin", None)
        results.append(freeze({"tool_name": name, "tool_call_id": call_id, "status": status,
                               **origin})  # an MCP tool names its server
                       if origin else FrozenDict(tool_name=name, tool_call_id=call_id,
                                                 status=status))
        if call["name"] == READ_SKILL and outcome.status == "success" and spec.skills:
            skill_id = (call.get("args") or {}).get("id")
            activated = scope[trace.ACTIVATED_SKILLS]
            if skill_id in {s.id for s in spec.skills} and skill_id not in activated:
                scope[trace.ACTIVATED_SKILLS] = [*activated, skill_id]
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
        self._file_script(scope, call, iteration, paused=True)
        scope[trace.HISTORY] = history
        scope[trace.PAUSED_TOOL_BATCH] = {"calls": calls, "index": index, "results": results,
                                      "iteration": iteration, "kind": kind}
        payload = {"kind": kind, "tool_name": call["name"], "tool_call_id": call["id"],
                   "iteration": iteration, "data": data}
        _emit(scope, "pause.requested", payload)
        return pause(payload)

    def _evidence_pack(self, scope: Scope, call: ToolCall) -> dict[str, Any]:
        """What a person needs to consent: the call, the context the run consumed, and which
        context drove the choice (ranked by token overlap with the call — no model call)."""
        import json  # loaded on first use: a plain run never writes JSON

        from ..context._overlap import overlap_scores  # loaded by the first check-in

        found = self.spec.registry.tools[call["name"]]
        args = call.get("args") or {}
        choice = f"{call['name']} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
        system = scope.get(trace.SYSTEM_PROMPT) or ""
        consumed = []
        for row in scope.get(trace.SYSTEM_SLOT) or ():
            if row["source"] != "base":
                consumed.append({"id": row["source"], "flavor": row["flavor"],
                                 "slot": "system", "text": system[row["start"]:row["end"]]})
        for message in scope[trace.HISTORY]:
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
                 for r in scope.get(trace.ROUTE_TRAIL) or ()]
        return {
            "will_do": {"tool": call["name"], "description": found.description, "args": args},
            "context_consumed": [{k: v for k, v in c.items() if k != "text"} for c in consumed],
            "drivers": drivers[:5],
            "trail": trail or [{"iteration": scope[trace.ITERATION], "chosen": "tool-calls"}],
        }

    def _file_script(self, scope: Scope, call: ToolCall, iteration: int, *,
                     paused: bool) -> None:
        """The script-ledger row of a code-running call that pauses or is refused unrun."""
        from ..tools._scripts import file_unsettled_script

        file_unsettled_script(scope, self.spec.registry.tools.get(call["name"]), call,
                              turn=scope[trace.TURN], iteration=iteration, paused=paused)

    def match_scripts(self, scope: Scope, content: str) -> None:
        """Read the turn's script ledger back against the answer (``answer_scripts``): which
        of its fenced code blocks are programs that ran. Only for agents with a code tool."""
        for found in self.spec.registry.tools.values():
            if getattr(found, "script", None) is not None:
                break
        else:
            return  # no code tool: the ledger module is not even loaded
        from ..tools._script_keys import LEDGER_KEY
        from ..tools._scripts import answer_script_match

        match = answer_script_match(scope.get(LEDGER_KEY), scope[trace.TURN], content)
        if match is not None:
            scope[trace.ANSWER_SCRIPTS] = match

    async def _dispatch(self, scope: Scope, call: ToolCall, iteration: int, *,
                        proposed_by: ToolCall | None = None) -> ToolOutcome:
        """Run one permitted call (steps 4–6 of ``moments.py``'s dispatch order);
        ``proposed_by`` is the call as the model made it, before the rules (the ledger's
        proposal), when it may differ from ``call``."""
        spec = self.spec
        registry = spec.registry
        tool = registry.tools.get(call["name"])
        if tool is not None and registry.context_free.get(call["name"]) is tool:
            # a @tool without a context parameter (the common call): it is given no
            # RunContext, and as only a tool given one can run an agent used as a tool (its
            # ``ctx`` names the inner run), no sub-run reporter is set around it either
            scope[trace.TURN]  # (read for every call, as below)
            dispatch = registry.dispatch
            run_id = scope.run_id
            outcome = (await dispatch(call, None, run_id) if step_runner.get() is None
                       else await durable_step("tool", lambda: dispatch(call, None, run_id)))
            if spec.skip_step is not None:
                outcome = self._follow_steps(scope, call, outcome, iteration)
            if spec.act is None:
                return outcome
            return await spec.act.judge_result(scope, call, outcome, iteration)
        ctx = RunContext(call["id"], iteration, scope.run_id, tool_name=call["name"],
                         deps=run_deps())  # live, never in run state: never recorded
        turn = scope[trace.TURN]  # read for every call, as the turn's script rows need it
        # an agent used as a tool links its run here (``report_sub_runs``, inlined)
        reporting = sub_run_reporter.set(partial(file_sub_run, scope))
        try:
            if getattr(tool, "script", None) is None:
                # no code runs: no script row to file, so neither the script ledger nor the
                # code runner is read (what dispatch_script_call does for such a tool)
                dispatch = spec.registry.dispatch
                outcome = (await dispatch(call, ctx) if step_runner.get() is None  # direct
                           else await durable_step(  # a durable run's step (flow/_durable.py)
                               "tool", lambda: dispatch(call, ctx)))
            else:
                outcome = await self._dispatch_script(scope, call, ctx, turn, tool,
                                                      proposed_by)
        finally:
            sub_run_reporter.reset(reporting)  # (``end_sub_runs``)
        missing = deps_error(ctx)
        if missing is not None:  # a programming error: the run fails, the model never reads it
            raise missing
        if spec.skip_step is not None:
            outcome = self._follow_steps(scope, call, outcome, iteration)
        if spec.act is None:
            return outcome
        return await spec.act.judge_result(scope, call, outcome, iteration)

    async def _dispatch_script(self, scope: Scope, call: ToolCall, ctx: ToolContext, turn: int,
                               tool: object, proposed_by: ToolCall | None) -> ToolOutcome:
        """Dispatch a call of a code-running tool: its script row is filed, joining the
        dispatch its pause opened, and what the code runner reports is emitted."""
        from ..tools._code_runner import dispatch_script_call  # loaded by the first code call
        from ..tools._scripts import paused_dispatch, proposed_program

        sent = await dispatch_script_call(
            self.spec.registry, call, ctx, scope, turn=turn,
            dispatch=paused_dispatch(scope, turn, call["id"]),
            proposed=proposed_program(tool, proposed_by or call))
        if sent.code_run is not None:
            _emit(scope, "tools.code_run", sent.code_run)
        return sent.outcome

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
        halt = scope[trace.PERMISSION_HALT]
        _emit(scope, "permission.halt", {**halt, "sequence_length": len(answered)})
        scope[trace.STOPPED_EARLY] = "permission-halt"
        scope[trace.FINAL_CONTENT] = ""
        emit_turn_end(scope, "")
        scope.break_("permission-halt")

    def _follow_steps(self, scope: Scope, call: ToolCall, outcome: ToolOutcome,
                      iteration: int) -> ToolOutcome:
        """Advance, skip or introduce the active skill's procedure; say so in the result."""
        pointer = scope.get(trace.SKILL_STEPS)
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
            scope[trace.SKILL_STEPS] = pointer
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
        scope[trace.SKILL_STEPS] = pointer
        _emit(scope, "skill.step_advanced", {"skill_id": pointer["skill"], "step": done,
                                             "completed": done == pointer["total"],
                                             "iteration": iteration})
        return replace(outcome, content=f"{outcome.content}\nStep {done} of {pointer['total']} "
                       f"done. {step_sentence(steps, pointer['step'])}")
