"""The traverser: walks a chart, runs stages, commits their net changes, fires events.

This module owns one traversal: ``_Engine`` walks nodes, calls stages, deciders, selectors,
parallel children and subflows (``_subflows.py``) in their ``Frame`` (``frame.py``), commits
each step to the log (no recorded string repeating what the run's redaction masked), and
resumes a paused level.
Starting and finishing a run (options, ``FlowRun``, checkpoints, timeouts) is ``run.py``, which
imports this module, never the other way round.

Linear hops and loop back edges are followed iteratively, so a 10,000-stage run uses no more
stack than a 10-stage one; only real nesting (a decider with its own ``next``, parallel
children, subflows) recurses, bounded by ``max_depth``. Each executed step gets
``runtime_stage_id = stage_id#N`` from one counter shared by subflows and carried across
resume. The engine does not yield to the event loop between stages unless a stage awaits:
deferred recorders are flushed at the end of the run (and at pause) instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ..errors import FlowTimeoutError, LoopLimitError, RunError, StageError
from ._changes import apply_staged
from ._commitlog import Change, CommitLog, CommitRecord
from ._decide import Decision, Selection
from ._frame import Frame, Step
from ._pause import Pause, _Paused
from ._recorders import Dispatcher, FlowEvent, Hooks
from ._redact import RunSecrets
from ._scope import KeyedScope, Scope, _ScopeState, frozen_mapping, open_scope
from ._subflows import enter_subflow, finish_subflow
from ._values import freeze

if TYPE_CHECKING:
    from ._chart import Chart, Node, StageFn
    from ._checkpoint import Checkpoint

__all__ = ["EngineOptions", "Frame", "Step"]

_new = object.__new__



class EngineOptions(Protocol):
    """The run settings the traverser reads (``run.RunOptions`` provides them)."""

    @property
    def recorders(self) -> tuple[Any, ...]: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def max_loop_iterations(self) -> int: ...
    @property
    def max_depth(self) -> int: ...


class _Engine:
    def __init__(self, chart: Chart, options: EngineOptions, run_id: str) -> None:
        self.chart = chart
        self.nodes = chart.nodes
        self.options = options
        self.run_id = run_id
        self.dispatch = Dispatcher(options.recorders)
        self.log = CommitLog()
        self.counter = 0
        self.visits: dict[str, int] = {}
        self.max_loops = options.max_loop_iterations
        self.deadline: float | None = None

    # -- the walk ---------------------------------------------------------------------------

    async def walk(self, node_id: str | None, frame: Frame, parent: str | None,
                   control: str | None = None) -> Any:
        output: Any = None
        nodes = self.nodes
        dispatch = self.dispatch
        visits = self.visits
        while node_id is not None:
            node = nodes[node_id]
            kind = node.kind
            if kind == "stage" or kind == "decider":
                # one step, inline (``begin``, the function, ``ended``/``decided``): a plain
                # stage costs no coroutine of the engine's own, and most steps are plain
                deadline = self.deadline
                if deadline is not None and time.monotonic() > deadline:
                    self.timed_out(node)
                counter = self.counter
                self.counter = counter + 1
                nid = node.id
                rid = f"{nid}#{counter}"
                passes = visits.get(nid, 0)
                visits[nid] = passes + 1
                # ``open_scope``, inlined, its ``__init__`` too (the fields of ``_ScopeState``)
                scope: Any = _new(_ScopeState)
                scope._frame = frame
                scope._rid = rid
                scope._stage_id = nid
                scope._stage = node.name
                scope._break_reason = None
                scope._staged = {}
                scope._reads = {}
                scope._emits = []
                scope._watcher = None
                scope.__class__ = KeyedScope if node.keyed_scope else Scope
                if dispatch.h_stage_start:
                    self.fire(dispatch.h_stage_start, "stage_start", rid, node)
                fn = node.fn
                try:
                    if fn is None:  # the builder gives every stage and decider a function
                        raise TypeError(f"{kind} {node.name!r} has no function to run")
                    out = fn(scope)
                    if out is not None and (type(out) is CoroutineType
                                            or hasattr(type(out), "__await__")):
                        out = await out
                except BaseException as exc:
                    self.failed(exc, scope, node, frame, kind, parent, control, passes)
                if dispatch.h_stage_end:
                    self.fire(dispatch.h_stage_end, "stage_end", rid, node)
                if kind == "stage":
                    if type(out) is Pause:
                        self.ended(scope, node, frame, parent, control, passes, out, "stage")
                    decision: dict[str, Any] | None = None
                elif (type(out) is Decision and type(out.branch) is str
                      and out.branch in node.branches):  # ``decided``'s common case, inlined
                    decision = {"chosen": out.branch}
                    if out.evidence is not None:
                        decision["evidence"] = out.evidence
                else:
                    decision = self.decided(scope, node, frame, parent, control, passes, out)
                # ``commit`` of a step, inlined (no error or pause; fields in ``commit``'s
                # order): most steps are a plain stage's or a decider's
                staged = scope._staged
                changes = apply_staged(staged, frame) if staged else None
                shown = decision
                secrets = frame.secrets
                if secrets.active:  # no recorded string repeats a mask
                    if changes:
                        changes = [c if c.op == "delete" else _scrubbed(c, secrets)
                                   for c in changes]
                    shown = secrets.scrub(decision)
                records = self.log.records
                record: CommitRecord = _new(CommitRecord)
                record.idx = len(records)
                record.runtime_stage_id = rid
                record.stage_id = nid
                record.stage = scope._stage
                record.kind = kind
                record.ns = frame.ns
                record.read_ns = None
                found = scope._reads
                record.reads = tuple(found) if found else ()
                record.changes = tuple(changes) if changes else ()
                record.parent = parent
                record.control = control
                record.loop_pass = passes
                record.decision = shown
                emits = scope._emits
                record.emits = tuple(emits) if emits else ()
                record.error = None
                record.break_reason = scope._break_reason
                record.paused = False
                records.append(record)
                if dispatch.h_commit:
                    self.fire(dispatch.h_commit, "commit", rid, node, value=record)
                if decision is not None and dispatch.h_decision:
                    self.fire(dispatch.h_decision, "decision", rid, node,
                              data=secrets.scrub(decision))
                if dispatch.h_stage_executed or (scope._break_reason is not None
                                                 and dispatch.h_break):
                    self.executed(node, rid, frame, scope)
                if decision is None:
                    output = out
                    if frame.break_reason is not None:
                        return output
                    if node.children:
                        output = await self.parallel(node, node.children, frame, rid, None)
                else:
                    branch = decision["chosen"]
                    if frame.break_reason is not None:
                        return branch
                    target = node.branches[branch] if branch in node.branches else \
                        node.branches[node.default]  # type: ignore[index]
                    if (node.next is None and node.loop_to is None) or nodes[target].loop_to:
                        # a branch that loops back never returns to the decider's next: hop
                        node_id, parent, control = target, rid, rid
                        continue
                    try:
                        output = await self.nested(target, frame, rid, rid)
                    except _Paused as paused:
                        paused.frames.append(("after", node.id, rid, None))
                        raise
                    if frame.break_reason is not None:
                        return output
            elif kind == "selector":
                chosen, rid = await self.selector(node, frame, parent, control)
                if frame.break_reason is not None:
                    return chosen
                if chosen:
                    output = await self.parallel(node, [node.branches[b] for b in chosen],
                                                 frame, rid, rid)
            else:
                output, rid = await enter_subflow(self, node, frame, parent, control)
                if frame.break_reason is not None:
                    return output
            if node.loop_to is None and not dispatch.h_next:  # ``follow``'s plain hop
                node_id = node.next
            else:
                node_id = self.follow(node, frame, rid)
            parent, control = rid, None
        return output

    async def nested(self, node_id: str, frame: Frame, parent: str, control: str | None) -> Any:
        if frame.depth >= self.options.max_depth:
            raise RunError(
                f"chart {self.chart.name!r} nests deeper than max_depth={self.options.max_depth} "
                f"at {node_id!r}; raise max_depth or flatten the chart", run=None)
        frame.depth += 1
        try:
            return await self.walk(node_id, frame, parent, control)
        finally:
            frame.depth -= 1

    def follow(self, node: Node, frame: Frame, rid: str) -> str | None:
        target = node.loop_to
        if target is not None:
            count = frame.loops.get(target, 0)
            if count >= self.max_loops:
                raise LoopLimitError(
                    f"loop back to {target!r} from {node.name!r} ran {count} times, the limit "
                    f"(max_loop_iterations={self.max_loops}); add a break_() or raise the limit")
            frame.loops[target] = count + 1
            hooks = self.dispatch.h_loop
            if hooks:
                self.fire(hooks, "loop", rid, node, data={"target": target, "pass": count + 1})
            return target
        nxt = node.next
        if nxt is not None:
            hooks = self.dispatch.h_next
            if hooks:
                self.fire(hooks, "next", rid, node, data={"target": nxt})
        return nxt

    # -- one step ---------------------------------------------------------------------------

    def stamp(self, node: Node) -> tuple[str, int]:
        deadline = self.deadline
        if deadline is not None and time.monotonic() > deadline:
            self.timed_out(node)
        rid = f"{node.id}#{self.counter}"
        self.counter += 1
        visits = self.visits
        passes = visits.get(node.id, 0)
        visits[node.id] = passes + 1
        return rid, passes

    def timed_out(self, node: Node) -> NoReturn:
        raise FlowTimeoutError(
            f"run of chart {self.chart.name!r} timed out after {self.options.timeout}s "
            f"before stage {node.name!r}; raise timeout= or make the stages faster")

    def begin(self, node: Node, frame: Frame) -> tuple[Scope, int]:
        """Stamp one step (``stamp``, inlined: it runs for every step) and open its scope."""
        deadline = self.deadline
        if deadline is not None and time.monotonic() > deadline:
            self.timed_out(node)
        counter = self.counter
        self.counter = counter + 1
        node_id = node.id
        rid = f"{node_id}#{counter}"
        visits = self.visits
        passes = visits.get(node_id, 0)
        visits[node_id] = passes + 1
        scope = open_scope(frame, rid, node_id, node.name)
        hooks = self.dispatch.h_stage_start
        if hooks:
            self.fire(hooks, "stage_start", rid, node)
        return scope, passes

    def failed(self, exc: BaseException, scope: Scope, node: Node, frame: Frame, kind: str,
               parent: str | None, control: str | None, passes: int) -> NoReturn:
        """A step's function raised: its writes are committed with the error, then it raises."""
        message = f"{type(exc).__name__}: {exc}"
        record = self.commit(scope, node, frame, kind, parent, control, passes, error=message)
        message = record.error or message  # as recorded: under the policy's mask
        hooks = self.dispatch.h_error
        if hooks:
            self.fire(hooks, "error", scope._rid, node, data={"error": message})
        if not isinstance(exc, Exception):
            raise exc
        rid = scope._rid
        raise StageError(
            f"stage {node.name!r} ({rid}) raised {message}", stage_id=node.id,
            runtime_stage_id=rid) from exc

    async def call(self, node: Node, frame: Frame, parent: str | None, control: str | None,
                   fn: StageFn | None, kind: str, extra: tuple[Any, ...] = ()
                   ) -> tuple[Any, Scope, int]:
        """Run ``fn`` as one step. On failure its writes are committed, then it raises.

        (``walk`` runs the same steps inline for plain stages and deciders.)"""
        scope, passes = self.begin(node, frame)
        try:
            if fn is None:  # the builder gives every stage, decider and selector a function
                raise TypeError(f"{kind} {node.name!r} has no function to run")
            out = fn(scope, *extra)
            if out is not None and (type(out) is CoroutineType
                                    or hasattr(type(out), "__await__")):
                out = await out
        except BaseException as exc:
            self.failed(exc, scope, node, frame, kind, parent, control, passes)
        hooks = self.dispatch.h_stage_end
        if hooks:
            self.fire(hooks, "stage_end", scope._rid, node)
        return out, scope, passes

    async def stage(self, node: Node, frame: Frame, parent: str | None,
                    control: str | None, fn: StageFn | None = None, extra: tuple[Any, ...] = (),
                    kind: str = "stage") -> tuple[Any, str]:
        """One stage step (``walk`` runs the plain ones inline; a resume runs its ``fn``)."""
        out, scope, passes = await self.call(node, frame, parent, control,
                                             node.fn if fn is None else fn, kind, extra)
        self.ended(scope, node, frame, parent, control, passes, out, kind)
        return out, scope._rid

    def ended(self, scope: Scope, node: Node, frame: Frame, parent: str | None,
              control: str | None, passes: int, out: Any, kind: str) -> None:
        """A stage's function returned ``out``: commit the step (a ``pause()`` pauses).
        (``walk`` commits a plain stage's step the same way, inline.)"""
        if type(out) is Pause:
            rid = scope._rid
            if node.resume is None:
                self.commit(scope, node, frame, kind, parent, control, passes,
                            error="ConfigurationError: returned pause() without resume=")
                raise StageError(
                    f"stage {node.name!r} returned pause() but was declared without resume=; "
                    "declare it with resume=<fn(scope, input)> to make it pausable",
                    stage_id=node.id, runtime_stage_id=rid)
            self.commit(scope, node, frame, kind, parent, control, passes, paused=True)
            if self.dispatch.h_pause:
                self.fire(self.dispatch.h_pause, "pause", rid, node,
                          value=frame.secrets.scrub(out.data))
            raise _Paused(node.id, rid, out.data)
        self.commit(scope, node, frame, kind, parent, control, passes)
        dispatch = self.dispatch
        if dispatch.h_stage_executed or (scope._break_reason is not None and dispatch.h_break):
            self.executed(node, scope._rid, frame, scope)

    def decided(self, scope: Scope, node: Node, frame: Frame, parent: str | None,
                control: str | None, passes: int, out: Any) -> dict[str, Any]:
        """A decider's function returned ``out``: the decision ``walk`` records (its
        ``"chosen"`` is the branch taken). A choice that is no branch is committed with the
        error, and raises."""
        rid = scope._rid
        if isinstance(out, Decision):
            branch, evidence = out.branch, out.evidence
        else:
            branch, evidence = out, None
        decision: dict[str, Any] = {"chosen": branch}
        if evidence is not None:
            decision["evidence"] = evidence
        if not isinstance(branch, str) or (branch not in node.branches and node.default is None):
            known = ", ".join(map(repr, node.branches))
            message = (f"decider {node.name!r} chose {branch!r}, which is not one of its branches "
                       f"({known}); fix the branch id it returns (a rule's 'then', or the "
                       "default= given to decide()), or give the chart a .default(branch)")
            self.commit(scope, node, frame, "decider", parent, control, passes,
                        decision=decision, error=f"ValueError: {message}")
            raise StageError(message, stage_id=node.id, runtime_stage_id=rid)
        if branch not in node.branches:
            decision["fallback"] = node.default
        return decision

    async def selector(self, node: Node, frame: Frame, parent: str | None,
                       control: str | None) -> tuple[list[str], str]:
        out, scope, passes = await self.call(node, frame, parent, control, node.fn, "selector")
        rid = scope._rid
        evidence = None
        if isinstance(out, Selection):
            chosen, evidence = list(out.branches), out.evidence
        elif isinstance(out, str):
            chosen = [out]
        else:
            chosen = list(out or ())
        decision: dict[str, Any] = {"selected": chosen}
        if evidence is not None:
            decision["evidence"] = evidence
        unknown = [b for b in chosen if b not in node.branches]
        if unknown:
            message = (f"selector {node.name!r} chose unknown branches {unknown!r}; "
                       f"its branches are {', '.join(map(repr, node.branches))}")
            self.commit(scope, node, frame, "selector", parent, control, passes,
                        decision=decision, error=f"ValueError: {message}")
            raise StageError(message, stage_id=node.id, runtime_stage_id=rid)
        self.commit(scope, node, frame, "selector", parent, control, passes, decision=decision)
        if self.dispatch.h_selected:
            self.fire(self.dispatch.h_selected, "selected", rid, node,
                      data=frame.secrets.scrub(decision))
        self.executed(node, rid, frame, scope)
        return chosen, rid

    def executed(self, node: Node, rid: str, frame: Frame, scope: Scope) -> None:
        dispatch = self.dispatch
        if dispatch.h_stage_executed:
            self.fire(dispatch.h_stage_executed, "stage_executed", rid, node,
                      data={"kind": node.kind})
        reason = scope._break_reason
        if reason is not None and dispatch.h_break:
            self.fire(dispatch.h_break, "break", rid, node, data={"reason": reason})

    # -- commit -----------------------------------------------------------------------------

    def commit(self, scope: Scope, node: Node, frame: Frame, kind: str, parent: str | None,
               control: str | None, passes: int, *, decision: dict[str, Any] | None = None,
               error: str | None = None, paused: bool = False, read_ns: str | None = None,
               reads: tuple[str, ...] | None = None) -> CommitRecord:
        """Apply the scope's staged writes to state and log their net change as one record."""
        staged = scope._staged
        changes = apply_staged(staged, frame) if staged else None
        secrets = frame.secrets
        if secrets.active:  # no recorded string repeats what the policy masks
            if changes:
                changes = [c if c.op == "delete" else _scrubbed(c, secrets) for c in changes]
            decision = secrets.scrub(decision)
            error = secrets.scrub(error)
        if reads is None:
            found = scope._reads
            reads = tuple(found) if found else ()
        emits = scope._emits
        records = self.log.records
        # ``new_record`` and ``CommitLog.append``, inlined: one record for every step
        record: CommitRecord = _new(CommitRecord)
        record.idx = len(records)
        record.runtime_stage_id = rid = scope._rid
        record.stage_id = node.id
        record.stage = node.name
        record.kind = kind
        record.ns = frame.ns
        record.read_ns = read_ns
        record.reads = reads
        record.changes = tuple(changes) if changes else ()
        record.parent = parent
        record.control = control
        record.loop_pass = passes
        record.decision = decision
        record.emits = tuple(emits) if emits else ()
        record.error = error
        record.break_reason = scope._break_reason
        record.paused = paused
        records.append(record)
        hooks = self.dispatch.h_commit
        if hooks:
            self.fire(hooks, "commit", rid, node, value=record)
        return record

    def fire(self, hooks: Hooks, name: str, rid: str, node: Node, *,
             value: object = None, data: Mapping[str, Any] | None = None) -> None:
        event = FlowEvent(name, self.run_id, rid, node.id, node.name, None, value, data)
        for hook in hooks:
            hook(event)

    # -- parallel ---------------------------------------------------------------------------

    async def parallel(self, node: Node, children: Iterable[str], frame: Frame, rid: str,
                       control: str | None) -> dict[str, Any]:
        """Run children concurrently on the parent's state; results keyed by child id.

        Default: a failing child's exception becomes its result and the run goes on.
        ``fail_fast``: the first failure cancels the siblings (their writes so far commit)
        and is raised. A pause in any child pauses the run once all children settled.
        """
        if frame.depth >= self.options.max_depth:
            raise RunError(f"parallel children of {node.name!r} exceed max_depth="
                           f"{self.options.max_depth}; raise max_depth", run=None)
        if self.dispatch.h_fork:
            names = [self.nodes[c].name for c in children]
            self.fire(self.dispatch.h_fork, "fork", rid, node, data={"children": names})
        tasks = {
            child: asyncio.ensure_future(self.walk(child, frame.child(), rid, control))
            for child in children
        }
        if node.fail_fast:
            done, pending = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_EXCEPTION)
            failed = [t for t in done if t.exception() is not None
                      and not isinstance(t.exception(), _Paused)]
            if failed and pending:
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending)
            elif pending:
                await asyncio.wait(pending)
        else:
            await asyncio.wait(tasks.values())
        results: dict[str, Any] = {}
        first_pause: _Paused | None = None
        first_error: BaseException | None = None
        for child, task in tasks.items():
            if task.cancelled():
                results[child] = asyncio.CancelledError()
                continue
            exc = task.exception()
            if isinstance(exc, _Paused):
                first_pause = first_pause or exc
            elif exc is not None:
                if not isinstance(exc, StageError) or node.fail_fast:
                    first_error = first_error or exc
                results[child] = exc
            else:
                results[child] = task.result()
        if first_error is not None:
            raise first_error
        if first_pause is not None:
            first_pause.frames.append(("after_fork", node.id, rid, None))
            raise first_pause
        return results

    # -- resume -----------------------------------------------------------------------------

    async def resume_level(self, cp: Checkpoint, level: int, frame: Frame, answer: object
                           ) -> Any:
        frames = cp.frames
        if level == len(frames):
            node = self.nodes[cp.paused_stage]
            if self.dispatch.h_resume:
                self.fire(self.dispatch.h_resume, "resume", cp.paused_runtime_stage_id, node,
                          value=answer)
            output, rid = await self.stage(node, frame, cp.paused_runtime_stage_id, None,
                                           fn=node.resume, extra=(answer,), kind="resume")
            if frame.break_reason is not None:
                return output
            if node.children:
                output = await self.parallel(node, node.children, frame, rid, None)
            return await self.walk(self.follow(node, frame, rid), frame, rid) \
                if (node.next or node.loop_to) else output
        spec = frames[level]
        node = self.nodes[spec.node]
        if spec.kind == "subflow":
            inner = Frame(ns=spec.ns or spec.rid, state=_frozen_state(spec.state),
                          args=frozen_mapping(spec.args), env=frame.env,
                          readonly=frozenset(spec.args or {}), dispatch=self.dispatch,
                          redaction=frame.redaction, run_id=self.run_id, depth=frame.depth + 1,
                          secrets=frame.secrets)
            try:
                out = await self.resume_level(cp, level + 1, inner, answer)
            except _Paused as paused:
                paused.frames.append(("subflow", node.id, spec.rid, inner))
                raise
            passes = max(self.visits.get(node.id, 1) - 1, 0)
            out = await finish_subflow(self, node, frame, spec.rid, passes, inner, out)
        else:
            inner_frame = frame if spec.kind == "after" else frame.child()
            try:
                out = await self.resume_level(cp, level + 1, inner_frame, answer)
            except _Paused as paused:
                paused.frames.append((spec.kind, node.id, spec.rid, None))
                raise
        if frame.break_reason is not None:
            return out
        nxt = self.follow(node, frame, spec.rid)
        return await self.walk(nxt, frame, spec.rid) if nxt is not None else out


def _scrubbed(change: Change, secrets: RunSecrets) -> Change:
    shown = secrets.scrub(change.value)
    return change if shown is change.value else Change(change.key, change.op, freeze(shown))


def _frozen_state(state: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: freeze(v) for k, v in (state or {}).items()}
