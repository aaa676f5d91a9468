"""The scope: a stage's only door to state, and the reason every read and write is known.

``scope["key"]`` / ``scope.key`` read (tracked), ``scope["key"] = v`` / ``scope.key = v`` write,
``del scope["key"]`` deletes. Writes are staged: the stage reads its own writes, and the engine
commits the net change as one record when the stage ends (also when it raises). Reads return
copies of lists and dicts, so mutating what you read never changes state behind the log's back:
write the new value back. ``scope.args`` and ``scope.env`` are read-only and untracked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ._describe import summarize
from ._recorders import FlowEvent
from ._redact import REDACTED
from ._values import (
    MISSING,
    Appended,
    DraftList,
    FrozenList,
    copy_value,
    freeze,
    thaw,
)

if TYPE_CHECKING:
    from ._frame import Frame

__all__ = ["KeyedScope", "ReadView", "Scope", "open_scope", "peek"]

_SCALARS: Final = frozenset((str, int, float, bool, type(None)))


class _ScopeState:
    """A scope's own fields, assigned the plain way.

    ``Scope`` reserves ``__setattr__`` for state writes, so its ``__init__`` sets its fields
    through their slot descriptors, which costs about twice as much; the engine opens a scope
    for every step, so it builds this and makes it a ``Scope`` (``open_scope``; the engine's
    ``walk`` sets these same fields inline, so a field added here is added there too).
    """

    __slots__ = ("_break_reason", "_emits", "_frame", "_reads", "_rid", "_stage", "_stage_id",
                 "_staged", "_watcher")

    def __init__(self, frame: Frame, rid: str, stage_id: str, stage: str) -> None:
        self._frame = frame
        self._rid = rid  # the step's identity (its runtime id, stage id and name), held here
        self._stage_id = stage_id  # rather than in an object of its own: one a step
        self._stage = stage
        self._break_reason: str | None = None
        self._staged: dict[str, Any] = {}
        self._reads: dict[str, None] = {}
        self._emits: list[tuple[str, Any]] = []
        self._watcher: list[tuple[str, Any]] | None = None


class KeyedScope(_ScopeState):
    """State access for one executing stage, by key only (``scope["k"]``, not ``scope.k``).

    ``Scope`` adds the attribute form. A class with ``__getattr__`` is one CPython cannot
    specialise any attribute load for, so each ``scope._field`` the engine and these methods
    read would take the slow lookup; a chart built with ``keyed_scope=True`` (the agent's,
    whose stages never use the attribute form) gives its stages this class instead.
    """

    __slots__ = ()

    _frame: Frame
    _rid: str
    _stage_id: str
    _stage: str
    _break_reason: str | None
    _staged: dict[str, Any]
    _reads: dict[str, None]
    _emits: list[tuple[str, Any]]
    _watcher: list[tuple[str, Any]] | None

    # -- reading ----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        if self._watcher is None and not self._frame.dispatch.h_read:  # ``_read``, inlined
            staged = self._staged
            if key in staged:
                value = staged[key]
                if type(value) is Appended:
                    value = staged[key] = value.draft()
            else:
                value = self._frame.state.get(key, MISSING)
                self._reads[key] = None
            kind = type(value)
            if kind in _SCALARS:
                return value
            if kind is FrozenList:  # ``thaw``, inlined: the common read of a list
                out = DraftList(value)
                out._base, out._clean = value, len(value)
                return out
        else:
            value = self._read(key, False)
        if value is MISSING:
            raise KeyError(
                f"state has no key {key!r} at stage {self._stage!r}; "
                f"use scope.get({key!r}, default) when it may be absent"
            )
        return thaw(value)

    def get(self, key: str, default: object = None) -> Any:
        """Tracked read that returns ``default`` when the key is absent."""
        if self._watcher is None and not self._frame.dispatch.h_read:  # ``_read``, inlined
            staged = self._staged
            if key in staged:
                value = staged[key]
                if type(value) is Appended:
                    value = staged[key] = value.draft()
            else:
                value = self._frame.state.get(key, MISSING)
                self._reads[key] = None
        else:
            value = self._read(key, False)
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is FrozenList:  # ``thaw``, inlined
            out = DraftList(value)
            out._base, out._clean = value, len(value)
            return out
        return default if value is MISSING else thaw(value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._read(key, False) is not MISSING

    def _read(self, key: str, copy: bool = True) -> Any:
        staged = self._staged
        if key in staged:
            value = staged[key]
            if type(value) is Appended:
                value = staged[key] = value.draft()
        else:
            value = self._frame.state.get(key, MISSING)
            self._reads[key] = None
        frame = self._frame
        hooks = frame.dispatch.h_read
        if hooks or self._watcher is not None:
            shown = frame.shown(key, value)
            if self._watcher is not None:
                self._watcher.append((key, value))
            if hooks:
                event = FlowEvent("read", frame.run_id, self._rid, self._stage_id, self._stage,
                                  key, copy_value(shown))
                for hook in hooks:
                    hook(event)
        return value if not copy or type(value) in _SCALARS else thaw(value)

    # -- writing ----------------------------------------------------------------------------

    def __setitem__(self, key: str, value: Any) -> None:
        if type(key) is not str:
            raise TypeError(f"state keys are strings; got {key!r} at stage {self._stage!r}")
        frame = self._frame
        if key in frame.readonly:
            raise KeyError(
                f"{key!r} is an input of subflow {frame.ns!r} and is read-only inside it; "
                f"read it, and write your result under another key"
            )
        self._staged[key] = value
        hooks = frame.dispatch.h_write
        if hooks:
            shown = frame.shown(key, value)
            event = FlowEvent("write", frame.run_id, self._rid, self._stage_id, self._stage,
                              key, shown)
            for hook in hooks:
                hook(event)

    def append(self, key: str, item: Any) -> None:
        """``items = scope.get(key) or []; items.append(item); scope[key] = items``, cheaper.

        The same read, write and recorded change (an ``append`` of the new items), but an
        append to a long committed list neither copies it nor walks it: a stage that only adds
        to a growing list (a usage row per model call) costs the same at its 1,000th call as
        at its 10th. With a recorder watching reads or writes, or when ``key`` holds no
        non-empty committed list, it is exactly the three lines above.
        """
        frame = self._frame
        dispatch = frame.dispatch
        if (type(key) is str and self._watcher is None and not dispatch.h_read
                and not dispatch.h_write and key not in frame.readonly):
            staged = self._staged
            if key in staged:
                pending = staged[key]
                if type(pending) is Appended:
                    pending.items.append(item)
                    return
            else:
                base = frame.state.get(key)
                if type(base) is FrozenList and base:
                    self._reads[key] = None
                    staged[key] = Appended(base, [item])
                    return
        items = self.get(key) or []
        items.append(item)
        self[key] = items

    def __delitem__(self, key: str) -> None:
        frame = self._frame
        if key in frame.readonly:
            raise KeyError(f"{key!r} is an input of subflow {frame.ns!r} and cannot be deleted")
        self._staged[key] = MISSING
        hooks = frame.dispatch.h_delete
        if hooks:
            event = FlowEvent("delete", frame.run_id, self._rid, self._stage_id, self._stage, key)
            for hook in hooks:
                hook(event)

    # -- everything else --------------------------------------------------------------------

    @property
    def args(self) -> Mapping[str, Any]:
        """The run's input (a subflow's mapped input); read-only, untracked."""
        return self._frame.args

    @property
    def env(self) -> Mapping[str, Any]:
        """Run environment passed as ``run(env=...)``; read-only, untracked."""
        return self._frame.env

    @property
    def runtime_stage_id(self) -> str:
        return self._rid

    @property
    def run_id(self) -> str:
        return self._frame.run_id

    def emit(self, name: str, payload: object = None) -> None:
        """Record a named event on this step and deliver it to ``on_emit`` recorders."""
        frame = self._frame
        shown = payload
        if frame.redaction is not None:
            shown = self._masked_emit(name, payload)
        secrets = frame.secrets
        if secrets.active or secrets.masks_numbers:  # else scrub is identity: skip the call
            shown = secrets.scrub(shown, numbers=True)
        self._emits.append((name, shown))
        dispatch = frame.dispatch
        hooks = dispatch.h_emit
        if not hooks:
            return
        gates = dispatch.emit_gates
        if gates is None:
            event = FlowEvent("emit", frame.run_id, self._rid, self._stage_id, self._stage,
                              name, shown)
            for hook in hooks:
                hook(event)
            return
        built: FlowEvent | None = None  # built for the first hook that wants this emit
        index = 0
        for hook in hooks:
            gate = gates[index]
            index += 1
            if gate is not None:
                try:
                    if not gate(name):
                        continue
                except Exception as exc:
                    dispatch.gate_failed(index - 1, exc)
            if built is None:
                built = FlowEvent("emit", frame.run_id, self._rid, self._stage_id, self._stage,
                                  name, shown)
            hook(built)

    def _masked_emit(self, name: str, payload: object) -> object:
        """``payload`` as a run with a redaction policy records it (before scrubbing)."""
        frame = self._frame
        policy = frame.redaction
        assert policy is not None
        if policy.is_redacted_emit(name):
            return REDACTED
        if policy.has_key_rules and payload is not REDACTED:
            # state's redacted values were learned as they were committed: only this
            # step's own writes are new
            frame.secrets.learn_state(policy, {
                k: v.draft() if type(v) is Appended else v
                for k, v in self._staged.items() if v is not MISSING})
        return payload

    def redacts(self, key: str) -> bool:
        """Whether this run records ``key`` masked (its redaction policy names it)."""
        return self._frame.redacts(key)

    def recorded(self, value: object) -> Any:
        """``value`` as this run's record may show it: no string repeats what the run's
        redaction masked so far (for a stage that writes a record of its own elsewhere)."""
        return self._frame.secrets.scrub(value)

    def break_(self, reason: str | None = None) -> None:
        """Stop after this stage: it finishes, its writes commit, nothing after it runs."""
        if self._break_reason is None:
            _set_break_reason(self, reason or "")
        frame = self._frame
        if frame.break_reason is None:
            frame.break_reason = reason or ""

    # -- engine side ------------------------------------------------------------------------

    def _watch(self, watcher: list[tuple[str, Any]] | None) -> list[tuple[str, Any]] | None:
        previous = self._watcher
        _set_watcher(self, watcher)
        return previous

    def _shown(self, key: str, value: Any) -> str:
        frame = self._frame
        return REDACTED if frame.redacts(key) else frame.secrets.scrub(summarize(value))

    def __repr__(self) -> str:
        return f"<Scope {self._rid}>"


class Scope(KeyedScope):
    """State access for one executing stage: ``scope.key`` reads, writes and deletes too."""

    __slots__ = ()

    def __init__(self, frame: Frame, rid: str, stage_id: str, stage: str) -> None:
        # slot descriptors directly: __setattr__ is reserved for state writes
        _set_frame(self, frame)
        _set_rid(self, rid)
        _set_stage_id(self, stage_id)
        _set_stage(self, stage)
        _set_break_reason(self, None)
        _set_staged(self, {})
        _set_reads(self, {})
        _set_emits(self, [])
        _set_watcher(self, None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = self._read(name)
        if value is MISSING:
            raise AttributeError(
                f"state has no key {name!r} at stage {self._stage!r}; "
                f"use scope.get({name!r}) when it may be absent"
            )
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or hasattr(type(self), name):
            raise AttributeError(
                f"{name!r} is reserved on Scope; write it as scope[{name!r}] = ..."
            )
        self[name] = value

    def __delattr__(self, name: str) -> None:
        del self[name]


def peek(scope: KeyedScope, key: str, default: object = None) -> Any:
    """A tracked read, like ``scope.get``, that hands back the value itself, not a copy.

    For the framework's own stages that only look at a long committed value (the agent
    sending its history): a committed list or dict is read-only, so sharing it is safe, and
    the read costs nothing per element. The read is recorded exactly as ``scope.get``'s.
    A value the stage wrote itself is its own and comes back as it is.
    """
    staged = scope._staged
    if key not in staged and scope._watcher is None and not scope._frame.dispatch.h_read:
        value = scope._frame.state.get(key, MISSING)  # ``_read`` of a committed value, inlined
        scope._reads[key] = None
    else:
        value = scope._read(key, False)
    return default if value is MISSING else value


def open_scope(frame: Frame, rid: str, stage_id: str, stage: str) -> Scope:
    """``Scope(frame, rid, stage_id, stage)``, built the cheaper way (see ``_ScopeState``)."""
    scope: Any = _ScopeState(frame, rid, stage_id, stage)  # (Any: no typing.cast call)
    scope.__class__ = Scope
    opened: Scope = scope
    return opened


def _slot_setter(name: str) -> Callable[[KeyedScope, Any], None]:
    setter: Callable[[KeyedScope, Any], None] = vars(_ScopeState)[name].__set__
    return setter


_set_frame = _slot_setter("_frame")
_set_rid = _slot_setter("_rid")
_set_stage_id = _slot_setter("_stage_id")
_set_stage = _slot_setter("_stage")
_set_break_reason = _slot_setter("_break_reason")
_set_staged = _slot_setter("_staged")
_set_reads = _slot_setter("_reads")
_set_emits = _slot_setter("_emits")
_set_watcher = _slot_setter("_watcher")


class ReadView:
    """Read-only, tracked view of a namespace, given to subflow input/output mappers."""

    __slots__ = ("_reads", "_state")

    _state: Mapping[str, Any]
    _reads: dict[str, None]

    def __init__(self, state: Mapping[str, Any]) -> None:
        self._state = state
        self._reads: dict[str, None] = {}

    def __getitem__(self, key: str) -> Any:
        self._reads[key] = None
        return thaw(self._state[key])

    def get(self, key: str, default: object = None) -> Any:
        self._reads[key] = None
        value = self._state.get(key, MISSING)
        return default if value is MISSING else thaw(value)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._reads[key] = None
        return key in self._state

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"state has no key {name!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """Every key, each counted as read."""
        for key in self._state:
            self._reads[key] = None
        out: dict[str, Any] = copy_value(dict(self._state))
        return out


def frozen_mapping(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType({k: freeze(v) for k, v in data.items()} if data else {})
