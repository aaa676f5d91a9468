"""A subflow step: map the input into a fresh namespace, walk the inner chart, map back.

``_Engine.walk`` hands a subflow node to ``enter_subflow``; a resume that finishes a paused
subflow calls ``finish_subflow``. Both commit their ``subflow-enter``/``subflow-exit`` records
through the engine (``engine.commit``), so the log is the same as when they were its methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import RunError, StageError
from ._frame import Frame
from ._pause import _Paused
from ._scope import ReadView, Scope, _set_break_reason, frozen_mapping
from ._values import MISSING, copy_value

if TYPE_CHECKING:
    from ._chart import Node
    from ._engine import _Engine

__all__ = ["enter_subflow", "finish_subflow"]


async def enter_subflow(engine: _Engine, node: Node, frame: Frame, parent: str | None,
                        control: str | None) -> tuple[Any, str]:
    mount = node.mount
    assert mount is not None
    rid, passes = engine.stamp(node)
    view = ReadView(frame.state)
    scope = Scope(frame, rid, node.id, node.name)
    try:
        mapped = dict(mount.input(view) or {}) if mount.input is not None else {}
        for key in mapped:
            if not isinstance(key, str):
                raise TypeError(f"input mapper returned non-string key {key!r}")
    except Exception as exc:
        message = frame.secrets.scrub(f"{type(exc).__name__}: {exc}")
        engine.commit(scope, node, frame, "subflow-enter", parent, control, passes,
                      error=message, reads=tuple(view._reads))
        raise StageError(f"subflow {node.name!r} ({rid}) input mapper raised {message}",
                         stage_id=node.id, runtime_stage_id=rid) from exc
    inner = Frame(ns=rid, state={}, args=frozen_mapping(mapped), env=frame.env,
                  readonly=frozenset(mapped), dispatch=engine.dispatch,
                  redaction=frame.redaction, run_id=engine.run_id, depth=frame.depth + 1,
                  secrets=frame.secrets)
    seed = Scope(inner, rid, node.id, node.name)
    seed._staged.update(copy_value(mapped))
    engine.commit(seed, node, inner, "subflow-enter", parent, control, passes,
                  read_ns=frame.ns, reads=tuple(view._reads))
    if engine.dispatch.h_subflow_entry:
        engine.fire(engine.dispatch.h_subflow_entry, "subflow_entry", rid, node,
                    value=copy_value({k: frame.shown(k, v) for k, v in mapped.items()}))
    if inner.depth > engine.options.max_depth:
        raise RunError(f"subflow {node.name!r} exceeds max_depth={engine.options.max_depth}",
                       run=None)
    try:
        out = await engine.walk(mount.root, inner, rid)
    except _Paused as paused:
        paused.frames.append(("subflow", node.id, rid, inner))
        raise
    except StageError as exc:
        scope = Scope(frame, rid, node.id, node.name)
        engine.commit(scope, node, frame, "subflow-exit", rid, None, passes,
                      error=f"StageError: {exc}", read_ns=inner.ns, reads=())
        if engine.dispatch.h_subflow_exit:
            engine.fire(engine.dispatch.h_subflow_exit, "subflow_exit", rid, node,
                        data={"error": frame.secrets.scrub(str(exc))})
        raise
    return await finish_subflow(engine, node, frame, rid, passes, inner, out), rid


async def finish_subflow(engine: _Engine, node: Node, frame: Frame, rid: str, passes: int,
                         inner: Frame, out: object) -> object:
    mount = node.mount
    assert mount is not None
    scope = Scope(frame, rid, node.id, node.name)
    if inner.break_reason is not None and mount.propagate_break:
        _set_break_reason(scope, inner.break_reason)
        if frame.break_reason is None:
            frame.break_reason = inner.break_reason
        if engine.dispatch.h_break:
            engine.fire(engine.dispatch.h_break, "break", rid, node,
                        data={"reason": inner.break_reason, "propagated_from": node.id})
    view = ReadView(inner.state)
    try:
        written = dict(mount.output(view) or {}) if mount.output is not None else {}
        for key, value in written.items():
            current = frame.state.get(key, MISSING)
            if (isinstance(value, list) and mount.array_merge == "concat"
                    and isinstance(current, list)):
                value = current + value
            elif isinstance(value, dict) and isinstance(current, dict):
                value = {**current, **value}
            scope[key] = value
    except Exception as exc:
        message = frame.secrets.scrub(f"{type(exc).__name__}: {exc}")
        engine.commit(scope, node, frame, "subflow-exit", rid, None, passes, error=message,
                      read_ns=inner.ns, reads=tuple(view._reads))
        raise StageError(f"subflow {node.name!r} ({rid}) output mapper raised {message}",
                         stage_id=node.id, runtime_stage_id=rid) from exc
    engine.commit(scope, node, frame, "subflow-exit", rid, None, passes, read_ns=inner.ns,
                  reads=tuple(view._reads))
    if engine.dispatch.h_subflow_exit:
        engine.fire(engine.dispatch.h_subflow_exit, "subflow_exit", rid, node,
                    value=copy_value({k: inner.shown(k, v) for k, v in inner.state.items()}))
    engine.executed(node, rid, frame, scope)
    return out

