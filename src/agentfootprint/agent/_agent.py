"""``Agent`` and ``LLMCall``: what users build with.

An agent is a chart (``loop.py``) plus the things that are not run state: the provider, the
tools, listeners. ``run(message)`` is one turn; ``follow_up`` continues the conversation;
``RunResult.checkpoint`` is the conversation as plain JSON (including the final answer, which the
loop itself never appends to ``history``). Each run is independent, so one agent can serve
concurrent runs; ``agent.checkpoint()`` is the checkpoint of the last run that finished.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import UnionType
from typing import TYPE_CHECKING, Any, Generic, Literal

from ..context._injection import Injection
from ..context._skills import read_skill_tool, skip_step_tool
from ..errors import AgentFootprintError, ConfigurationError, RunError, StageError
from ..events._dispatcher import AgentEvent, EventBridge, EventDispatcher
from ..events._logging import run_loggers
from ..flow import Chart, FlowEvent, FlowRun, deferred
from ..flow._recorders import Recorder
from ..flow._run import run_sync
from ..flow._values import copy_value
from ..providers._base import Message, Provider
from ..runs import trace
from ..tools._context import bound_deps
from ..tools._registry import ToolRegistry
from ..tools._script_keys import LEDGER_KEY
from ..tools._tool import Tool
from ._checks import (
    check_context,
    check_governance,
    check_identity,
    check_memories,
    check_text,
    check_tools,
    dispatchable,
    is_window,
    model_for,
)
from ._executor_option import AgentExecutor, executor_option, resume_through, run_through
from ._journal import (
    RunJournal,
    check_agent_state,
    journal_for,
    new_run_id,
    resume_stored,
    run_journal,
)
from ._loop import AgentSpec, build_agent_chart, live_emit
from ._memory_mount import end_turn_claim
from ._options import Governance, Limits, ModelSettings, Tracing, grouped_options
from ._output import OutputT, output_of, output_spec
from ._result import HISTORY_FROM_RECORDING, RunResult
from ._stream import RunStream, stream_pace, tap_stream
from ._usage import Budget, check_budget

if TYPE_CHECKING:
    from ..memory._define import MemoryDefinition
    from ..memory._identity import MemoryIdentity
    from ._as_tool import AgentTool
    from ._window import WindowStrategy

__all__ = ["Agent", "LLMCall", "RunResult"]


class _Runner:
    """Shared by ``Agent`` and ``LLMCall``: build once, run many times."""

    def __init__(self, spec: AgentSpec, *, name: str, tracing: Tracing) -> None:
        observer_delivery, run_store = tracing.observer_delivery, tracing.run_store
        if observer_delivery not in ("inline", "deferred"):
            raise ConfigurationError(
                f"observer_delivery={observer_delivery!r} must be 'inline' or 'deferred'")
        if run_store is not None and not callable(getattr(run_store, "save", None)):
            raise ConfigurationError(
                f"run_store={run_store!r} cannot save runs; pass a RunStore(path) or a "
                "PostgresRunStore(...) from agentfootprint.runs")
        self.run_store = run_store
        self.name = name
        self.spec = spec
        self.chart: Chart = build_agent_chart(spec, name=name)
        self.events: EventDispatcher = spec.dispatcher
        self.watch = list(tracing.watch)
        self.observer_delivery = observer_delivery
        self.redaction = tracing.redaction
        if self.redaction is not None:  # with the contract's repeat rules
            from ..runs._redaction import as_run_policy

            self.redaction = as_run_policy(self.redaction)
        self.observe = tracing.observe  # e.g. otel(): a recorder of its own for each run
        self.last: RunResult | None = None

    def __repr__(self) -> str:
        tools = ", ".join(self.spec.registry.tools)
        return (f"<{type(self).__name__} {self.name!r} model={self.spec.model!r} "
                f"provider={self.spec.provider.name!r} tools=[{tools}]>")

    def on(self, pattern: str, listener: Callable[[AgentEvent], Any]) -> Callable[[], None]:
        """Listen to events by name (``"stream.token"``), domain (``"stream.*"``) or ``"*"``."""
        if (pattern in ("stream.token", "agentfootprint.stream.token")
                and not self.spec.stream):
            raise ConfigurationError(
                f"{self.name!r} does not stream, so 'stream.token' would never fire; build it "
                "with stream=True, or iterate run_stream(...), which always streams tokens")
        return self.events.on(pattern, listener)

    def run_stream(self, message: str, *, max_buffered: int = 256, **options: Any) -> RunStream:
        """``run(message, **options)`` as an ordered stream of typed events, the model's tokens
        included whatever ``stream=`` says (``stream=True`` feeds ``on("stream.token")`` in
        ``run()``): ``async with agent.run_stream(...) as run: async for event in run``."""
        run: Callable[..., Awaitable[RunResult]] = self.run  # type: ignore[attr-defined]
        return RunStream(self, lambda: run(message, **options), message=message,
                         max_buffered=max_buffered)

    def _recorders(self) -> tuple[list[Recorder], Callable[[FlowEvent], None]]:
        bridge = EventBridge(self.events)
        logs: list[Recorder] = [*run_loggers(self.name)]  # [] unless agentfootprint.* logs INFO
        if self.observe is not None:
            logs.append(self.observe.recorder(self.name))
        if self.observer_delivery == "inline":
            return [bridge, *self.watch, *logs], bridge.on_emit
        queue = deferred(bridge)

        def live(event: FlowEvent) -> None:
            queue.enqueue("emit", event)
        return [queue, *self.watch, *logs], live

    async def _run(self, message: str, history: Sequence[Message] | None, *,
                   run_id: str | None, timeout: float | None,
                   identity: MemoryIdentity | None = None,
                   ledger: Any = None) -> RunResult:
        if not isinstance(message, str):
            raise ConfigurationError(f"run() takes the user's message as a str, got {message!r}")
        check_text(message)
        args: dict[str, Any] = {trace.MESSAGE: message,
                                trace.HISTORY: [dict(m) for m in history or ()]}
        if self.spec.memories:
            args[trace.IDENTITY] = check_identity(identity)
        if ledger:
            args[LEDGER_KEY] = ledger
        run_id = new_run_id(run_id)
        journal = journal_for(self, run_id, args)
        return await self._drive(lambda recorders: self.chart.run(
            args, recorders=recorders, redaction=self.redaction, timeout=timeout, run_id=run_id),
            journal)

    async def _drive(self, start: Callable[[list[Recorder]], Awaitable[FlowRun]],
                     journal: RunJournal | None = None) -> RunResult:
        """Walk the chart (``start(recorders)``) with this agent's listeners live; a failure of
        ours (a provider's, a store's) surfaces as itself, not as the engine's StageError.
        ``journal`` (with a run store) keeps the run's progress in the store as it goes."""
        if journal is not None:
            await journal.open()  # the run is in its store before it does anything
        recorders, live = self._recorders()
        recorders, live, pace = tap_stream(recorders, live)  # a run_stream's run: to its reader
        if journal is not None:
            recorders.append(journal)
        token = live_emit.set(live)
        pacing = stream_pace.set(pace)
        journaling = run_journal.set(journal)
        try:
            run = await start(recorders)
        except RunError as exc:
            await _end_claim_noting(self.spec, exc)
            await self._record_failure(exc)
            if isinstance(exc, StageError):
                raise_framework_cause(exc)
            raise
        finally:
            live_emit.reset(token)
            stream_pace.reset(pacing)
            run_journal.reset(journaling)
        result = self._result(run)
        if self.spec.memories:  # (a run without memory holds no turn claim)
            await end_turn_claim(self.spec, run)
        if self.run_store is not None:
            from ..runs._writer import writer_for  # only runs with a store

            try:
                await writer_for(self.run_store).call(self.run_store.save, result)
            except Exception as exc:
                exc.add_note(f"run {result.run_id} finished, but {self.run_store!r} could not "
                             "record it")
                raise
        return result

    async def _record_failure(self, error: RunError) -> None:
        """A failed run is evidence too: the run store keeps what was recorded up to it."""
        if self.run_store is None or not isinstance(error.run, FlowRun):
            return
        from ..runs._writer import writer_for

        try:
            await writer_for(self.run_store).call(self.run_store.save, error.run)
        except Exception as exc:  # never hide the run's own error behind the store's
            error.add_note(f"{self.run_store!r} could not record this failed run: {exc!r}")

    def _result(self, run: FlowRun) -> RunResult:
        final = run.final  # the values read here, without copying the whole final state
        spec_output = self.spec.output
        result = RunResult(
            content=str(final(trace.FINAL_CONTENT, "")), run_id=run.run_id,
            turn=int(final(trace.TURN, 1)), recording=run,
            input_tokens=int(final(trace.INPUT_TOKENS, 0)),
            output_tokens=int(final(trace.OUTPUT_TOKENS, 0)),
            iterations=int(final(trace.ITERATION, 1)),
            stopped_early=final(trace.STOPPED_EARLY),
            history=HISTORY_FROM_RECORDING,
            status="paused" if run.paused else "done",
            pause=copy_value(run.pause_data) if run.paused else None,
            output=None if spec_output is None else output_of(spec_output, run.state,
                                                              paused=run.paused),
            source=self,
        )
        if not run.paused:
            self.last = result
        return result

    async def resume(self, checkpoint: Mapping[str, Any] | str, answer: object = None, *,
                     timeout: float | None = None, deps: Any = None) -> RunResult:
        """Continue a paused run with the person's ``answer`` (a check-in verdict, a reply),
        or, given a run id, a run that was killed (read back from the agent's run store; see
        ``agent/_journal.py``: a completed tool call is never repeated).

        With a run store a checkpoint is resumed once (the run's row is then finished);
        without one it is not used up: resume it twice and the paused tool runs twice.
        ``deps`` are never kept in a checkpoint: pass the run's deps again.
        """
        if getattr(self, "executor", None) is not None:  # its job too (_executor_option.py)
            return await resume_through(self, checkpoint, answer, timeout=timeout, deps=deps)
        with bound_deps(deps):
            return await self._resume(checkpoint, answer, timeout=timeout)

    async def _resume(self, checkpoint: Mapping[str, Any] | str, answer: object, *,
                      timeout: float | None) -> RunResult:
        if isinstance(checkpoint, str) and not checkpoint.lstrip().startswith(("{", "[")):
            result: RunResult = await resume_stored(
                self, checkpoint, identity=getattr(self, "identity", None),
                needs_identity=bool(self.spec.memories), timeout=timeout)
            return result
        flow = self._check_resumable(checkpoint, answer)
        journal = journal_for(self, str(flow.get("run_id")) if isinstance(flow, Mapping)
                              else "", None, reopen="paused")
        return await self._drive(lambda recorders: self.chart.resume(
            flow, answer, recorders=recorders, redaction=self.redaction,
            timeout=timeout), journal)

    def _check_resumable(self, checkpoint: object, answer: object) -> Any:
        """Refuse, before anything runs, a resume that could only go wrong; the flow
        checkpoint to resume (its resume state unsealed with the policy's ``seal_key``)."""
        if isinstance(checkpoint, str | bytes):
            raise ConfigurationError(
                "resume() takes the checkpoint as a dict; json.loads the saved text first")
        if isinstance(checkpoint, RunResult):
            raise ConfigurationError("resume() takes result.checkpoint, not the RunResult")
        if (not isinstance(checkpoint, Mapping) or checkpoint.get("status") != "paused"
                or "flow" not in checkpoint):
            raise ConfigurationError(
                "resume() takes the checkpoint of a paused RunResult (status 'paused'); "
                "a finished run is continued with run(..., continue_from=checkpoint)")
        flow = checkpoint["flow"]
        if isinstance(flow, Mapping):
            from ..flow._seal import open_resume_state

            policy = self.redaction
            flow = open_resume_state(flow, policy.seal_key if policy is not None else None)
        check_agent_state(flow.get("state") if isinstance(flow, Mapping) else None,
                          checkpoint.get("run_id"))
        pause = checkpoint.get("pause")
        if not isinstance(pause, Mapping):
            return flow
        tool_name = pause.get("tool_name")
        if tool_name and tool_name not in self.spec.registry.tools:
            raise ConfigurationError(
                f"this run paused at tool {tool_name!r}, which this agent does not have; "
                "resume it with an agent built like the one that paused")
        if pause.get("kind") == "check_in" and not (
                isinstance(answer, Mapping)
                and answer.get("check_in") in ("approved", "declined")):
            raise ConfigurationError(
                f"this run paused for consent to call {tool_name!r}; answer with "
                "check_in_approved(by=...) or check_in_declined(by=..., note=...), "
                f"not {answer!r}")
        return flow

    def resume_sync(self, checkpoint: Mapping[str, Any], answer: object = None,
                    **options: Any) -> RunResult:
        return run_sync(self.resume(checkpoint, answer, **options))

    async def resume_on_error(self, failed: BaseException | FlowRun, *,
                              timeout: float | None = None, deps: Any = None) -> RunResult:
        """Replay a run that crashed mid-way (say, a provider error) from its last commit.

        ``failed`` is the raised error (it carries ``.run``) or the failed ``FlowRun``. Tool
        results already returned are kept and no injection is delivered again; the replay
        starts at the stage after the last successful commit's iteration.
        """
        run = failed if isinstance(failed, FlowRun) else getattr(failed, "run", None)
        state = dict(run.state) if isinstance(run, FlowRun) else {}
        if not isinstance(run, FlowRun) or "user_message" not in state or "history" not in state:
            raise ConfigurationError(
                "resume_on_error() needs the error a run raised (it carries .run) or that "
                "FlowRun, from a run that got past its seed stage")
        saved = {key: copy_value(value) for key, value in state.items()
                 if key in _RESUMABLE_KEYS}
        saved[trace.RESUMED_FROM] = run.run_id
        args: dict[str, Any] = {trace.MESSAGE: state[trace.USER_MESSAGE], trace.RESUME_STATE: saved}
        if self.spec.memories:
            from ..memory._stages import identity_from_record

            args[trace.IDENTITY] = check_identity(  # the failed run's own, when given per run
                identity_from_record(state.get(trace.IDENTITY)) or getattr(self, "identity", None))
        run_id = new_run_id(None)
        journal = journal_for(self, run_id, args)
        with bound_deps(deps):
            return await self._drive(lambda recorders: self.chart.run(
                args, recorders=recorders, redaction=self.redaction, timeout=timeout,
                run_id=run_id), journal)


class Agent(_Runner, Generic[OutputT]):
    """A ReAct agent: the model reasons, calls tools, and answers; every step recorded.

    ``limits=``, ``settings=``, ``governance=`` and ``tracing=`` group the rest (see
    ``agent/options.py``). With ``tracing=Tracing(run_store=RunStore())`` each run is saved as
    it ends, failed runs included, for ``agentfootprint runs list`` / ``explain`` / ``report``.
    """

    def __init__(
        self,
        *,
        provider: Provider,
        model: str | None = None,
        system: str = "",
        tools: Iterable[Tool] = (),
        context: Iterable[Injection] = (),
        memory: Iterable[MemoryDefinition] = (),
        identity: MemoryIdentity | None = None,
        react_mode: Literal["dynamic", "classic"] = "dynamic",
        name: str = "Agent",
        stream: bool = False,
        window: WindowStrategy | None = None,
        output_type: type[OutputT] | UnionType | None = None,
        output_retries: int = 2,
        budget: Budget | None = None,
        limits: Limits | None = None,
        settings: ModelSettings | None = None,
        governance: Governance | None = None,
        tracing: Tracing | None = None,
        executor: AgentExecutor | None = None,
        **moved: Any,
    ) -> None:
        options = grouped_options("Agent", {"limits": limits, "settings": settings,
                                            "governance": governance, "tracing": tracing}, moved)
        limits, settings = options["limits"], options["settings"]
        governance, tracing = options["governance"], options["tracing"]
        model = model_for(provider, model)
        rules = check_governance(governance.act, governance.permissions)
        if window is not None and not is_window(window):
            raise ConfigurationError(
                f"window={window!r} is not a window strategy; use sliding_window(turns=...), "
                "token_budget(max_tokens=...) or summarize_window(...)")
        if react_mode not in ("dynamic", "classic"):
            raise ConfigurationError(f"react_mode={react_mode!r} must be 'dynamic' or 'classic'")
        static = check_tools(tools)
        injections = check_context(context, static)
        skills = [i for i in injections if i.flavor == "skill"]
        reader = read_skill_tool(skills) if skills else None
        stepped = [s for s in skills if s.metadata.get("steps")]
        if stepped and react_mode == "classic":
            raise ConfigurationError(
                f"skill {stepped[0].id!r} declares steps, which need the tool list recomposed "
                "each iteration; use react_mode='dynamic' or drop steps=")
        skipper = skip_step_tool() if stepped else None
        memories = check_memories(memory, injections)
        self.identity = identity
        self.executor, self._defined_in = executor_option(executor)  # never copied
        self._init_kwargs: dict[str, Any] = {
            "provider": provider, "model": model, "system": system, "tools": static,
            "context": injections, "memory": memories, "identity": identity,
            "react_mode": react_mode, "name": name, "stream": stream, "window": window,
            "output_type": output_type, "output_retries": output_retries, "budget": budget,
            "limits": limits, "settings": settings, "governance": governance,
            "tracing": tracing}
        offered = dispatchable(static, reader, injections)
        if skipper is not None:
            offered.append(skipper)
        if window is not None:  # a token budget counts with the model's vocabulary
            from ._window import bind_window

            window = bind_window(window, model)
        spec = AgentSpec(
            provider=provider, model=model, system=system,
            registry=ToolRegistry(offered, max_result_chars=limits.max_tool_result_chars),
            max_iterations=limits.max_iterations, react_mode=react_mode,
            temperature=settings.temperature, max_tokens=settings.max_tokens,
            seed=settings.seed,
            wrap_up=limits.wrap_up, stream=stream, injections=injections,
            static_tools=static, read_skill=reader, skip_step=skipper, memories=memories,
            window=window, act=rules, output=output_spec(
                output_type, retries=output_retries, provider=provider, tools=offered),
            budget=check_budget(budget, model))
        super().__init__(spec, name=name, tracing=tracing)

    async def run(self, message: str, *, continue_from: Mapping[str, Any] | None = None,
                  run_id: str | None = None, timeout: float | None = None,
                  identity: MemoryIdentity | None = None, deps: Any = None) -> RunResult[OutputT]:
        """One turn. ``continue_from`` is the checkpoint of an earlier turn
        (``RunResult.checkpoint`` or ``agent.checkpoint()``).

        ``identity`` (default: the agent's) says whose conversation the memories read and
        write; the turn number is resolved from what those stores already hold. ``deps`` reach
        tools as ``ctx.deps`` (``tools/_context.py``) and are never recorded.
        """
        if self.executor is not None:  # the run is the executor's job (_executor_option.py)
            return await run_through(self, message, continue_from=continue_from, run_id=run_id,
                                     timeout=timeout, identity=identity, deps=deps)
        history = _history_from(continue_from) if continue_from is not None else None
        ledger = continue_from.get(LEDGER_KEY) if continue_from is not None else None
        with bound_deps(deps):
            return await self._run(message, history, run_id=run_id, timeout=timeout,
                                   identity=identity or self.identity, ledger=ledger)

    def run_sync(self, message: str, **options: Any) -> RunResult:
        return run_sync(self.run(message, **options))

    async def follow_up(self, message: str, **options: Any) -> RunResult:
        """The next turn of the conversation the last run left."""
        checkpoint = self.checkpoint()
        if checkpoint is None:
            raise ConfigurationError(
                "follow_up() needs an earlier run of this agent; call run() first")
        return await self.run(message, continue_from=checkpoint, **options)

    def follow_up_sync(self, message: str, **options: Any) -> RunResult:
        return run_sync(self.follow_up(message, **options))

    def checkpoint(self) -> dict[str, Any] | None:
        """The conversation after the last finished run (final answer included), or None."""
        return self.last.checkpoint if self.last is not None else None

    def without(self, ids: Iterable[str]) -> Agent:
        """A copy of this agent built without the context sources named in ``ids``.

        Injection ids and tool names leave ``context=`` / ``tools=``; a
        ``memory:<memory id>#<entry id>`` suspect is excluded from that memory's recall. What an
        explanation re-runs when no ``rebuild`` is given.
        """
        from ._rebuild import agent_without

        return agent_without(self, frozenset(ids))

    def _replace(self, **changes: Any) -> Agent:
        """A copy built from the same arguments with ``changes`` applied."""
        return Agent(**{**self._init_kwargs, **changes})

    def _map_agents(self, fn: Callable[[Agent], Agent]) -> Agent:
        return fn(self)

    def as_tool(self, *, name: str, description: str) -> AgentTool:
        """This agent as a tool of another agent: the model sends a ``request``, this agent
        answers it in a run of its own, recorded and linked from the caller's run (see
        ``agent/_as_tool.py``), so an explanation crosses into it."""
        from ._as_tool import agent_tool

        return agent_tool(self, name=name, description=description)


class LLMCall(_Runner, Generic[OutputT]):
    """One model call, no tools: a system prompt and the user's message in, the answer out."""

    def __init__(self, *, provider: Provider, model: str | None = None, system: str = "",
                 name: str = "LLMCall", stream: bool = False,
                 output_type: type[OutputT] | UnionType | None = None, output_retries: int = 2,
                 budget: Budget | None = None,
                 settings: ModelSettings | None = None, tracing: Tracing | None = None,
                 **moved: Any) -> None:
        options = grouped_options("LLMCall", {"settings": settings, "tracing": tracing}, moved,
                                  allowed=("settings", "tracing"))
        settings, tracing = options["settings"], options["tracing"]
        model = model_for(provider, model)
        spec = AgentSpec(provider=provider, model=model, system=system,
                         registry=ToolRegistry(()), max_iterations=1,
                         temperature=settings.temperature, max_tokens=settings.max_tokens,
                         stream=stream, with_tools=False, wrap_up=False, output=output_spec(
                             output_type, retries=output_retries, provider=provider),
                         budget=check_budget(budget, model))
        super().__init__(spec, name=name, tracing=tracing)

    async def run(self, message: str, *, run_id: str | None = None,
                  timeout: float | None = None) -> RunResult[OutputT]:
        return await self._run(message, None, run_id=run_id, timeout=timeout)

    def run_sync(self, message: str, **options: Any) -> RunResult:
        return run_sync(self.run(message, **options))


_RESUMABLE_KEYS = frozenset((
    trace.USER_MESSAGE, trace.HISTORY, trace.TURN, trace.ITERATION, trace.MAX_ITERATIONS,
    trace.INPUT_TOKENS, trace.OUTPUT_TOKENS, trace.ACTIVATED_SKILLS, trace.TOOL_RESULTS,
    trace.DELIVERED_KEYS, trace.SKILL_STEPS, trace.WRAP_UP_ASKED, trace.STOPPED_EARLY,
    trace.FINDINGS_LEDGER, trace.ACT_LEDGER, trace.TURN_CLAIM, trace.OUTPUT_SCHEMA,
    trace.OUTPUT_ATTEMPTS, trace.OUTPUT, trace.LLM_USAGE, trace.LLM_LATENCY,
    trace.BUDGET_CROSSED))
"""Run state a crash replay carries over (everything else is recomputed by the stages)."""


async def _end_claim_noting(spec: AgentSpec, error: RunError) -> None:
    """End a failed run's turn claim; a store that fails here never hides the run's error."""
    try:
        await end_turn_claim(spec, error.run)
    except Exception as exc:
        error.add_note(f"its turn claim could not be ended: {exc!r}")


def raise_framework_cause(exc: StageError) -> None:
    """Re-raise our own error (a provider's, say) that a stage raised, with the partial run.

    A stage that fails because the model or a store failed is not a stage bug: callers catch
    ``ProviderError`` and its status, not the engine's ``StageError`` wrapper.
    """
    cause = exc.__cause__
    if isinstance(cause, AgentFootprintError):
        cause.run = exc.run  # type: ignore[attr-defined]
        raise cause from exc


def _history_from(checkpoint: Mapping[str, Any]) -> list[Message]:
    if isinstance(checkpoint, RunResult):
        raise ConfigurationError("continue_from takes result.checkpoint, not the RunResult")
    if isinstance(checkpoint, str | bytes):
        raise ConfigurationError(
            "continue_from takes the checkpoint as a dict; json.loads the saved text first")
    if not isinstance(checkpoint, Mapping) or checkpoint.get("version") != 1:
        raise ConfigurationError(
            "continue_from must be the checkpoint of an earlier run (a dict with version 1)")
    history = checkpoint.get("history")
    if not isinstance(history, list) or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant", "tool")
            and isinstance(m.get("content"), str) for m in history):
        raise ConfigurationError(
            "continue_from['history'] must be a list of messages with a role and str content; "
            "pass the checkpoint unchanged")
    return [dict(m) for m in history]  # type: ignore[misc]
