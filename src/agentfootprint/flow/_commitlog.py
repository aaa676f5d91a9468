"""The delta-encoded commit log: one record per executed step, holding only what changed.

A record never copies the whole state. A list that grew by a suffix is stored as an ``append``
of the tail, so an agent's message history costs one message per iteration, and the log
grows linearly with the work. Any past state is rebuilt by replay (``state_at``), any past
value by folding one key's changes (``value_at``), and ``last_writer`` answers "who set this"
for the causal slice.

State lives in namespaces: ``""`` is the run's own state; each subflow execution gets its own
namespace named after its mount step (``"sf#4"``), so a subflow never sees its parent's keys.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import field
from typing import Any, Literal

from .._record import Compared, Value, record_class
from ._values import MISSING, copy_value

__all__ = ["Change", "CommitLog", "CommitRecord", "apply_change", "new_change", "new_record"]

Op = Literal["set", "append", "delete"]


# The three are dataclasses whose methods are written once (``_record.py``): generating them
# per class is paid by every cold start. Change is frozen, equal and hashed by its fields.


class _ChangeSlots:
    """``Change``'s fields, declared on a plain base: a change is built as this plain object,
    then made a ``Change`` (``__class__`` assignment, same layout), which costs less than
    setting a frozen object's three fields through their descriptors (the commit builds one
    per changed key)."""

    __slots__ = ("key", "op", "value")


@record_class
class Change(_ChangeSlots, Value):
    """One key's net change in one step."""

    key: str
    """The state key (top level of its namespace)."""
    op: Op
    """``set`` replaces, ``append`` adds ``value`` (a list) to the end, ``delete`` removes."""
    value: Any = None
    """The new value, the appended tail, or ``None`` for a delete."""

    def __init__(self, key: str, op: Op, value: Any = None) -> None:
        _set_key(self, key)
        _set_op(self, op)
        _set_value(self, value)

    def to_json(self) -> dict[str, Any]:
        if self.op == "delete":
            return {"key": self.key, "op": "delete"}
        return {"key": self.key, "op": self.op, "value": self.value}


@record_class(kw_only=True)
class CommitRecord(Compared):
    """Everything one executed step did: what it read, what it changed, what it decided."""

    idx: int = -1
    """Position in the log (assigned on append)."""
    runtime_stage_id: str
    """Run-unique step id, ``[subflow/]stage_id#N``."""
    stage_id: str
    """The chart node id (subflow stages carry their mount prefix)."""
    stage: str
    """The stage's display name."""
    kind: str = "stage"
    """``stage``, ``decider``, ``selector``, ``subflow-enter``, ``subflow-exit`` or ``resume``."""
    ns: str = ""
    """The namespace the changes apply to."""
    read_ns: str | None = None
    """The namespace ``reads`` refer to when it differs from ``ns`` (subflow boundaries)."""
    reads: tuple[str, ...] = ()
    """Keys read from committed state, first read first (reads of own staged writes excluded)."""
    changes: tuple[Change, ...] = ()
    """The net changes, in the order their keys were first written."""
    parent: str | None = None
    """The runtime id of the step that led here (previous step, decider, fork or mount)."""
    control: str | None = None
    """For the first step of a decider or selector branch: that decider's runtime id."""
    loop_pass: int = 0
    """How many times this stage id ran before in this run (0 on the first visit)."""
    decision: dict[str, Any] | None = None
    """For deciders and selectors: the chosen branch(es) and the evidence."""
    emits: tuple[tuple[str, Any], ...] = ()
    """``scope.emit`` calls made by the step, in order (payloads already redacted)."""
    error: str | None = None
    """``"TypeName: message"`` when the step raised."""
    break_reason: str | None = None
    """Set when the step called ``scope.break_()`` (``""`` without a reason)."""
    paused: bool = False
    """True when the step paused the run."""

    def __init__(self, *, idx: int = -1, runtime_stage_id: str, stage_id: str, stage: str,
                 kind: str = "stage", ns: str = "", read_ns: str | None = None,
                 reads: tuple[str, ...] = (), changes: tuple[Change, ...] = (),
                 parent: str | None = None, control: str | None = None, loop_pass: int = 0,
                 decision: dict[str, Any] | None = None,
                 emits: tuple[tuple[str, Any], ...] = (), error: str | None = None,
                 break_reason: str | None = None, paused: bool = False) -> None:
        self.idx = idx
        self.runtime_stage_id = runtime_stage_id
        self.stage_id = stage_id
        self.stage = stage
        self.kind = kind
        self.ns = ns
        self.read_ns = read_ns
        self.reads = reads
        self.changes = changes
        self.parent = parent
        self.control = control
        self.loop_pass = loop_pass
        self.decision = decision
        self.emits = emits
        self.error = error
        self.break_reason = break_reason
        self.paused = paused

    @property
    def read_namespace(self) -> str:
        return self.ns if self.read_ns is None else self.read_ns

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "idx": self.idx,
            "runtime_stage_id": self.runtime_stage_id,
            "stage_id": self.stage_id,
            "stage": self.stage,
            "kind": self.kind,
            "ns": self.ns,
            "reads": list(self.reads),
            "changes": [c.to_json() for c in self.changes],
        }
        for name in ("read_ns", "parent", "control", "decision", "error", "break_reason"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.loop_pass:
            out["loop_pass"] = self.loop_pass
        if self.emits:
            out["emits"] = [[n, p] for n, p in self.emits]
        if self.paused:
            out["paused"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CommitRecord:
        return cls(
            idx=data["idx"],
            runtime_stage_id=data["runtime_stage_id"],
            stage_id=data["stage_id"],
            stage=data["stage"],
            kind=data.get("kind", "stage"),
            ns=data.get("ns", ""),
            read_ns=data.get("read_ns"),
            reads=tuple(data.get("reads", ())),
            changes=tuple(
                Change(c["key"], c["op"], c.get("value")) for c in data.get("changes", ())
            ),
            parent=data.get("parent"),
            control=data.get("control"),
            loop_pass=data.get("loop_pass", 0),
            decision=data.get("decision"),
            emits=tuple((n, p) for n, p in data.get("emits", ())),
            error=data.get("error"),
            break_reason=data.get("break_reason"),
            paused=data.get("paused", False),
        )


_new = object.__new__
_set_key = _ChangeSlots.__dict__["key"].__set__
_set_op = _ChangeSlots.__dict__["op"].__set__
_set_value = _ChangeSlots.__dict__["value"].__set__


def new_change(key: str, op: Op, value: Any = None) -> Change:
    """``Change(key, op, value)`` for the engine's commit: the same frozen object, built
    without the frozen dataclass's ``__init__`` (three ``object.__setattr__`` calls), which
    costs more than the rest of committing a scalar."""
    change: Change = _new(Change)
    _set_key(change, key)
    _set_op(change, op)
    _set_value(change, value)
    return change


def new_record(runtime_stage_id: str, stage_id: str, stage: str, kind: str, ns: str,
               read_ns: str | None, reads: tuple[str, ...], changes: tuple[Change, ...],
               parent: str | None, control: str | None, loop_pass: int,
               decision: dict[str, Any] | None, emits: tuple[tuple[str, Any], ...],
               error: str | None, break_reason: str | None, paused: bool) -> CommitRecord:
    """``CommitRecord(...)`` with every field given by position: the engine builds one per
    executed step, and the keyword-only dataclass ``__init__`` costs four times as much.
    Field for field the same record (``tests/flow/test_commit_fast_paths.py`` checks it)."""
    record: CommitRecord = _new(CommitRecord)
    record.idx = -1
    record.runtime_stage_id = runtime_stage_id
    record.stage_id = stage_id
    record.stage = stage
    record.kind = kind
    record.ns = ns
    record.read_ns = read_ns
    record.reads = reads
    record.changes = changes
    record.parent = parent
    record.control = control
    record.loop_pass = loop_pass
    record.decision = decision
    record.emits = emits
    record.error = error
    record.break_reason = break_reason
    record.paused = paused
    return record


def apply_change(state: dict[str, Any], change: Change) -> None:
    """Apply one change to a plain (replayed) state dict in place (the replay primitive)."""
    if change.op == "set":
        state[change.key] = copy_value(change.value)
    elif change.op == "append":
        current = state.get(change.key)
        if isinstance(current, list):
            current.extend(copy_value(change.value))
        else:
            state[change.key] = copy_value(change.value)
    else:
        state.pop(change.key, None)


@record_class
class CommitLog(Compared):
    """Append-only list of records plus the initial state of each namespace.

    ``initial`` holds what a namespace started with before any record (the run's seed state);
    subflow namespaces start empty and are seeded by their ``subflow-enter`` record.
    """

    records: list[CommitRecord] = field(default_factory=list)
    initial: dict[str, dict[str, Any]] = field(default_factory=dict)
    _positions: dict[tuple[str, str], list[int]] = field(default_factory=dict, repr=False)
    _by_runtime_id: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _indexed: int = field(default=0, repr=False)

    def __init__(self, records: list[CommitRecord] | None = None,
                 initial: dict[str, dict[str, Any]] | None = None,
                 _positions: dict[tuple[str, str], list[int]] | None = None,
                 _by_runtime_id: dict[str, list[int]] | None = None, _indexed: int = 0) -> None:
        self.records = [] if records is None else records
        self.initial = {} if initial is None else initial
        self._positions = {} if _positions is None else _positions
        self._by_runtime_id = {} if _by_runtime_id is None else _by_runtime_id
        self._indexed = _indexed

    def append(self, record: CommitRecord) -> CommitRecord:
        """Add a record; the query indexes catch up lazily, off the run's hot path."""
        records = self.records
        record.idx = len(records)
        records.append(record)
        return record

    def _index(self) -> None:
        records = self.records
        positions = self._positions
        by_runtime_id = self._by_runtime_id
        for idx in range(self._indexed, len(records)):
            record = records[idx]
            by_runtime_id.setdefault(record.runtime_stage_id, []).append(idx)
            ns = record.ns
            for change in record.changes:
                found = positions.setdefault((ns, change.key), [])
                if not found or found[-1] != idx:
                    found.append(idx)
        self._indexed = len(records)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CommitRecord]:
        return iter(self.records)

    def __getitem__(self, idx: int) -> CommitRecord:
        return self.records[idx]

    def records_for(self, runtime_stage_id: str) -> list[CommitRecord]:
        """Every record of one execution step (a subflow mount has an enter and an exit)."""
        self._index()
        return [self.records[i] for i in self._by_runtime_id.get(runtime_stage_id, ())]

    def find(self, stage: str) -> CommitRecord | None:
        """The latest record whose runtime id, stage id or name is ``stage``."""
        self._index()
        found = self._by_runtime_id.get(stage)
        if found:
            return self.records[found[-1]]
        for record in reversed(self.records):
            if record.stage_id == stage or record.stage == stage:
                return record
        return None

    def last_writer(self, key: str, before: int | None = None, *, ns: str = "") -> int | None:
        """Index of the last record before ``before`` (exclusive) that changed ``key``."""
        self._index()
        found = self._positions.get((ns, key))
        if not found:
            return None
        if before is None:
            return found[-1]
        i = bisect_left(found, before)
        return found[i - 1] if i else None

    def value_at(self, key: str, step: int, *, ns: str = "", default: object = MISSING) -> Any:
        """The value of ``key`` once record ``step`` (inclusive) committed; ``-1`` = initial."""
        self._index()
        found = self._positions.get((ns, key), [])
        end = bisect_right(found, step)
        anchor = end - 1
        while anchor >= 0:
            change = self._change(found[anchor], ns, key)
            if change.op != "append":
                break
            anchor -= 1
        if anchor >= 0:
            change = self._change(found[anchor], ns, key)
            if change.op == "delete":
                value: Any = MISSING
            else:
                value = copy_value(change.value)
        else:
            value = copy_value(self.initial.get(ns, {}).get(key, MISSING))
        for pos in found[anchor + 1 : end]:
            tail = self._change(pos, ns, key).value
            value = value + copy_value(tail) if isinstance(value, list) else copy_value(tail)
        return default if value is MISSING else value

    def state_at(self, step: int, *, ns: str = "") -> dict[str, Any]:
        """The whole namespace once record ``step`` (inclusive) committed, by replay."""
        state: dict[str, Any] = copy_value(self.initial.get(ns, {}))
        for record in self.records[: step + 1]:
            if record.ns == ns:
                for change in record.changes:
                    apply_change(state, change)
        return state

    def _change(self, idx: int, ns: str, key: str) -> Change:
        for change in reversed(self.records[idx].changes):
            if change.key == key:
                return change
        raise LookupError(f"record {idx} in namespace {ns!r} did not change {key!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "initial": copy_value(self.initial),
            "records": [r.to_json() for r in self.records],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CommitLog:
        log = cls(initial=copy_value(data.get("initial", {})))
        for raw in data.get("records", ()):
            log.append(CommitRecord.from_json(raw))
        return log
