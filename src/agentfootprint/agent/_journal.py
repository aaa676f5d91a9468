"""A run's journal in its run store: in the store from its start, resumable after a crash.

With a run store, a run is put in it as it starts (status ``running``) and, at each tool call,
an entry is appended: when the call starts (carrying the commit-log records committed since the
last entry, so the history and log are never rewritten) and when its outcome is known. A run
killed at any point (``kill -9`` included) is therefore listed, explainable up to its last
entry, and resumable with ``agent.resume(run_id)``:

* no tool call had started: the turn is run again from its start, under the same run id;
* otherwise the run continues inside its last tool batch, from the state its entries hold.
  A call with a recorded outcome is never run again (its result is replayed). A call that
  started but has no outcome may or may not have taken effect: it runs again only when its
  tool declares ``idempotent=True`` (same ``ctx.idempotency_key``, so the tool applies it once)
  or ``side_effects=False``; any other tool's call is reported to the model, and recorded, as
  "outcome unknown" — never silently repeated.

Work after the last entry (a model call, say) is done again on resume.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..errors import CheckpointError, ConfigurationError
from ..flow import FlowEvent
from ..flow._commitlog import CommitRecord
from ..runs import trace
from ..tools._registry import OUTCOME_UNKNOWN

if TYPE_CHECKING:
    from ..flow import Chart, FlowRun
    from ..flow._recorders import Recorder
    from ..flow._redact import RedactionPolicy
    from ..runs._recording import Recording
    from ..runs._store import RunStorePort
    from ..tools._registry import ToolOutcome

__all__ = ["OUTCOME_UNKNOWN", "RunJournal", "check_agent_state", "journal_for", "new_run_id",
           "resume_stored", "run_journal"]

run_journal: contextvars.ContextVar[RunJournal | None] = contextvars.ContextVar(
    "run_journal", default=None)
"""The journal of the run the current task belongs to (``None`` without a run store)."""



class RunJournal:
    """Appends a run's progress to its store; also a recorder (it collects the commits)."""

    id = "run-journal"

    def __init__(self, store: RunStorePort, run_id: str, fingerprint: str,
                 policy: RedactionPolicy | None, opening: Recording | None = None,
                 reopen: str | None = None) -> None:
        from ..runs._writer import writer_for

        self.store = store
        self.writer = writer_for(store)  # the store's I/O runs off the event loop
        self.opening, self.reopen = opening, reopen
        self.run_id = run_id
        self.fingerprint: str | None = fingerprint
        self.policy = policy
        self.initial: dict[str, Any] | None = None
        self.pending: list[CommitRecord] = []

    # -- as a recorder ----------------------------------------------------------------------

    def on_run_start(self, event: FlowEvent) -> None:
        data = event.data or {}
        if not data.get("resumed") and isinstance(data.get("initial"), dict):
            self.initial = dict(data["initial"])

    def on_commit(self, event: FlowEvent) -> None:
        if isinstance(event.value, CommitRecord):
            self.pending.append(event.value)

    async def open(self) -> None:
        """Put the run in its store (``RunStorePort.begin``) before it does anything."""
        if self.opening is not None:
            await self.writer.call(self.store.begin, self.opening, reopen=self.reopen)
            self.opening = None

    # -- at each tool call ------------------------------------------------------------------

    async def started(self, stage: str, iteration: int, index: int,
                      call: Mapping[str, Any]) -> None:
        """A call is about to run: what the log gained since the last entry, and the call."""
        await self._append({"phase": "started", "stage": stage, "iteration": iteration,
                      "index": index, "call": str(call["id"]), "tool": str(call["name"])})

    async def done(self, iteration: int, index: int, call: Mapping[str, Any],
             outcome: ToolOutcome, *, recorded: Callable[[object], Any] = lambda v: v) -> None:
        """A call has its outcome (run, refused, declined or unknown); ``recorded`` is the
        run's mask for free text (``scope.recorded``), so the entry repeats nothing it hides."""
        content: Any = recorded(outcome.content)
        policy = self.policy
        if policy is not None and policy.is_redacted(trace.HISTORY):  # stored as recorded
            shown = policy.redact_value(trace.HISTORY, [{"role": "tool", "content": content}])
            content = shown[0].get("content") if isinstance(shown, list) and shown and \
                isinstance(shown[0], dict) else None
        await self._append({"phase": "done", "iteration": iteration, "index": index,
                      "call": str(call["id"]), "tool": str(call["name"]),
                      "outcome": {"content": content, "error": outcome.error,
                                  "status": outcome.status}})

    async def _append(self, entry: dict[str, Any]) -> None:
        if self.pending:
            entry["records"] = [r.to_json() for r in self.pending]
        if self.initial is not None:
            entry["initial"] = self.initial
        if self.fingerprint is not None:
            entry["fingerprint"] = self.fingerprint
        self.pending = []
        self.initial = None
        self.fingerprint = None
        await self.writer.call(self.store.append_progress, self.run_id, entry)


def journals(store: object) -> bool:
    """True for a run store that keeps runs from their start (both shipped stores do)."""
    return all(callable(getattr(store, name, None))
               for name in ("begin", "append_progress", "progress"))


def new_run_id(given: str | None) -> str:
    """The id of a new run: ``given`` once checked (see ``runs/_lifecycle.py``), else fresh."""
    if given is None:
        return uuid.uuid4().hex
    from ..runs._lifecycle import check_run_id

    return check_run_id(given)


class _Runner(Protocol):
    """What the journal needs of an agent (``agent/_agent.py``'s runner)."""

    run_store: Any
    chart: Chart
    redaction: RedactionPolicy | None

    async def _drive(self, start: Callable[[list[Recorder]], Awaitable[FlowRun]],
                     journal: RunJournal | None = None) -> Any: ...


def journal_for(runner: _Runner, run_id: str, args: Mapping[str, Any] | None, *,
                reopen: str | None = None) -> RunJournal | None:
    """The journal of a run of ``runner`` that starts (``args``: its chart input) or resumes
    (``reopen``: the status its row has, ``"paused"`` or ``"running"``); ``None`` without a
    run store that keeps runs from their start."""
    store = runner.run_store
    if store is None or not journals(store):
        return None
    start = None if args is None else {k: v for k, v in args.items() if k != trace.IDENTITY}
    return open_journal(store, runner.chart, run_id, policy=runner.redaction, start=start,
                        reopen=reopen)


async def resume_stored(runner: _Runner, run_id: str, *, identity: object,
                        needs_identity: bool, timeout: float | None) -> Any:
    """``agent.resume(run_id)``: continue a run that was killed, from its run store.

    ``identity`` (the agent's) is whose conversation a run with memory is: needed when the
    turn is run again from its start.
    """
    from ..runs._lifecycle import check_run_id

    store = runner.run_store
    if store is None or not journals(store):
        raise ConfigurationError(
            f"resume({run_id!r}) reads the run from the agent's run store, and this agent has "
            "none; build it with tracing=Tracing(run_store=RunStore(path)) naming the store "
            "the run was recorded in")
    run_id = check_run_id(run_id)
    args: dict[str, Any] = {} if identity is None else {trace.IDENTITY: identity}
    from ..runs._writer import writer_for
    from ._recovery import plan_recovery  # only a resume reads a run back

    plan = await writer_for(store).call(plan_recovery, store, runner.chart, run_id,
                                        policy=runner.redaction, args=args)
    if plan.start is not None and needs_identity and identity is None:
        raise ConfigurationError(
            f"run {run_id!r} is run again from its start, and this agent has memory but no "
            "identity; build it with identity=MemoryIdentity(...) of that conversation")
    journal = open_journal(store, runner.chart, run_id, policy=runner.redaction, start=None,
                           reopen="running")
    policy, chart = runner.redaction, runner.chart
    if plan.checkpoint is None:
        start = {**(plan.start or {}), **args}
        return await runner._drive(lambda recorders: chart.run(
            start, recorders=recorders, redaction=policy, timeout=timeout, run_id=run_id),
            journal)
    checkpoint, answer = plan.checkpoint, plan.answer
    return await runner._drive(lambda recorders: chart.resume(
        checkpoint, answer, recorders=recorders, redaction=policy, timeout=timeout), journal)


def open_journal(store: RunStorePort, chart: Chart, run_id: str, *,
                 policy: RedactionPolicy | None, start: dict[str, Any] | None,
                 reopen: str | None = None) -> RunJournal:
    """The journal of a run that ``journal.open()`` puts in ``store`` (``reopen``: it is
    there with that status, being resumed). ``start`` is what running the turn again from its
    start needs."""
    from ..runs._recording import Recording

    meta: dict[str, Any] = {"fingerprint": chart.fingerprint()}
    if start is not None:
        meta["start"] = _as_recorded(start, policy)
    opening = Recording(
        run_id=run_id, kind="agent", name=chart.description or chart.name, status="running",
        created_at=time.time(), chart=chart.spec(), log={"initial": {}, "records": []},
        meta=meta)
    return RunJournal(store, run_id, meta["fingerprint"], policy, opening, reopen)


def _as_recorded(start: dict[str, Any], policy: RedactionPolicy | None) -> dict[str, Any]:
    """The run's input as its record may show it: redacted keys masked, secret-shaped text
    (the policy's ``text_patterns``) too."""
    if policy is None:
        return start
    from ..flow._redact import RunSecrets

    masked = {key: policy.redact_value(key, value) if policy.is_redacted(key) else value
              for key, value in start.items()}
    scrubbed: dict[str, Any] = RunSecrets(policy).scrub(masked)
    return scrubbed


_COUNTS: Final = ((trace.TURN, 1), (trace.ITERATION, 1), (trace.MAX_ITERATIONS, 1),
                  (trace.INPUT_TOKENS, 0), (trace.OUTPUT_TOKENS, 0))


def check_agent_state(state: object, run_id: object) -> None:
    """Refuse, before anything runs, an agent state no run could have left (a checkpoint or
    a stored run that was edited): counts that are not whole numbers, a history that is not
    a list of messages, a paused batch that points nowhere."""
    def refuse(what: str) -> CheckpointError:
        return CheckpointError(
            f"the checkpoint of run {run_id!r} is not one a run left: {what}; it was changed "
            "after it was written — resume the checkpoint the run returned, unchanged")

    if not isinstance(state, Mapping):
        raise refuse("its state is not an object")
    for key, least in _COUNTS:
        value = state.get(key)
        if type(value) is not int or value < least:
            raise refuse(f"{key!r} is {value!r}, not a whole number of at least {least}")
    if not isinstance(state.get(trace.USER_MESSAGE), str):
        raise refuse(f"{trace.USER_MESSAGE!r} is not a str")
    history = state.get(trace.HISTORY)
    if not isinstance(history, list) or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant", "tool")
            for m in history):
        raise refuse(f"{trace.HISTORY!r} is not a list of messages with a role")
    calls = state.get(trace.LLM_TOOL_CALLS, [])
    if not _calls_ok(calls):
        raise refuse(f"{trace.LLM_TOOL_CALLS!r} is not a list of calls with an id and a name")
    batch = state.get(trace.PAUSED_TOOL_BATCH)
    if batch is not None and not (
            isinstance(batch, dict) and _calls_ok(batch.get("calls"))
            and type(batch.get("index")) is int and 0 <= batch["index"] < len(batch["calls"])
            and isinstance(batch.get("results"), list)
            and type(batch.get("iteration")) is int):
        raise refuse(f"{trace.PAUSED_TOOL_BATCH!r} does not name a call of its batch")


def _calls_ok(calls: object) -> bool:
    return isinstance(calls, list) and all(
        isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str)
        for c in calls)
