"""A typed view of a run, built once from its commit log: what each LLM call was sent, and why.

Explanations ask the same questions of every run — which calls were made, what exactly each one
was sent, which piece of the prompt came from where, who wrote it, which trigger let it in — and
the answers are all in the commit log, spread over a dozen declared keys. ``RunView`` reads them
once, through the trace contract, into plain objects:

* per LLM call (:class:`CallView`): the exact request (system prompt, the messages the window
  let through, the tools), its **pieces** (each system-prompt slice, sent message and tool, with
  its source, position, the step that landed it and the evaluation row that let it in), the
  answer, the tool calls asked for, model and tokens;
* per run: every call, the call whose answer the run handed back, and that answer.

A value redacted at the source reads as redacted here too; a shape the view cannot read is
skipped, never guessed. This module knows flows, not agents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..flow._commitlog import CommitLog, CommitRecord
from ..flow._redact import REDACTED
from ..flow._run import FlowRun
from . import trace
from ._members import Member, Members, SubRun
from ._recording import AgentRun, Recording
from ._window import windowed_messages

__all__ = ["CallView", "Explainable", "Member", "Piece", "PieceKind", "RunView", "StepIndex",
           "SubRun", "is_stage", "llm_started", "log_of"]

Explainable = AgentRun | FlowRun | Recording | CommitLog
"""Anything a run can be explained from: an agent's result, a flow run, a recording, a log."""

PieceKind = Literal["injection", "tool", "base", "user", "message"]

_NOT_CONTEXT = ("wrap-up", "step-nudge", "output-retry")
"""Messages the loop itself adds to the conversation: never a source of context."""
_LLM_START = "stream.llm_start"


def log_of(source: Explainable) -> CommitLog:
    """The commit log behind a result, a run, a recording or a log."""
    if isinstance(source, CommitLog):
        return source
    if isinstance(source, Recording):
        return source.commit_log()
    if isinstance(source, FlowRun):
        return source.log
    if isinstance(source, AgentRun) and isinstance(source.recording, FlowRun):
        return source.recording.log
    if isinstance(source, AgentRun) and isinstance(source.recording, Recording):
        return source.recording.commit_log()
    raise TypeError(f"{source!r} carries no commit log; pass a RunResult, FlowRun or Recording")


def llm_started(record: CommitRecord) -> Mapping[str, Any]:
    """The ``stream.llm_start`` payload an LLM call step emitted (model, provider), or {}."""
    return next((payload for name, payload in record.emits
                 if name.endswith(_LLM_START) and isinstance(payload, Mapping)), {})


def is_stage(record: CommitRecord, stage_id: str) -> bool:
    """True for ``stage_id`` at the top level or inside a subflow (``sf/stage_id``)."""
    return record.stage_id == stage_id or record.stage_id.endswith("/" + stage_id)


@dataclass(frozen=True, slots=True)
class Piece:
    """One source that reached a call, with the exact text the model saw.

    Explain calls it a ``Suspect``: every piece is a candidate cause of the answer.
    """

    kind: PieceKind
    id: str
    """Injection id, tool name, ``"base"`` or ``"user"``."""
    text: str
    flavor: str | None = None
    slot: str = "system"
    """``system`` or ``messages`` (tool results arrive in ``messages``)."""
    runtime_stage_id: str | None = None
    """The step that put it where the call read it (for a tool result: the ToolCalls step)."""
    removable: bool = True
    """Whether a rebuild can leave it out (the base prompt and the user's message cannot)."""
    position: int | None = None
    """Its place in the system prompt (pieces in prompt order), for a system piece."""
    member: str | None = None
    """In a composition: the member whose call it reached (``"first"``); or the agent-tool
    whose inner run it reached (``"tool 'researcher'"``). None for a single agent's run."""
    upstream: tuple[str, ...] = ()
    """For a message a composition handed on: the members whose answers it carries (it is
    not the user's message then); for an agent-tool's result: the inner run's id."""
    tool_call_id: str | None = None
    """For a tool result: the call it answers (the link to an agent-tool's inner run)."""

    @property
    def label(self) -> str:
        """``fact 'vip-override'``: an injection is named by its flavor, as it was defined.

        In a composition the member is named too (``fact 'bad-fact' (in first)``), and a message
        handed on from other members is named by them, never as the user's message.
        """
        kind = self.flavor if self.kind == "injection" and self.flavor else self.kind
        text = f"{kind} {self.id!r}"
        if self.kind == "user" and self.upstream:
            text = "the answer of " + ", ".join(repr(name) for name in self.upstream)
        return f"{text} (in {self.member})" if self.member else text


@dataclass(frozen=True, slots=True)
class CallView:
    """One LLM call: what it was sent, what it answered, and where every piece came from."""

    record: CommitRecord
    iteration: int | None
    system: str
    messages: list[Any]
    """The messages the call was sent (``history`` through the window)."""
    tools: list[Any]
    history: list[Any]
    """The whole conversation as it stood, window or not."""
    window: Mapping[str, Any] | None
    """The window's plan for this call (``kept``, ``summarized``, ``strategy``), if any."""
    pieces: tuple[Piece, ...]
    system_pieces: int
    """How many pieces the system prompt was assembled from (0 when it was not recorded)."""
    evaluation: tuple[Mapping[str, Any], ...]
    """Every injection's evaluation row for this call (fired or not), in order."""
    evaluation_writer: str | None
    answer: str
    tool_calls: list[Any]
    model: str | None
    provider: str | None
    answered_by: str | None
    """The step that handed this call's answer back (Finalize), when the run ended on it."""

    @property
    def runtime_stage_id(self) -> str:
        return self.record.runtime_stage_id

    def row(self, source_id: str) -> Mapping[str, Any] | None:
        """The evaluation row of ``source_id`` (an injection or a recalled piece), if any."""
        return next((r for r in self.evaluation if r.get("id") == source_id), None)


@dataclass(slots=True)
class RunView:
    """A run read once: its calls (each read when first asked for), the one that answered."""

    log: CommitLog
    records: tuple[CommitRecord, ...] = ()
    """The LLM call steps, in order."""
    answer: str | None = None
    final_record: CommitRecord | None = None
    _views: dict[int, CallView] = field(default_factory=dict, repr=False)
    _steps: StepIndex | None = field(default=None, repr=False)
    _members: Members | None = field(default=None, repr=False)
    _sub_runs: dict[str, SubRun] | None = field(default=None, repr=False)

    @property
    def steps(self) -> StepIndex:
        """Every step of the run indexed by runtime id, stage id, key and write (built once)."""
        if self._steps is None:
            self._steps = StepIndex.of(self.log)
        return self._steps

    @classmethod
    def of(cls, source: Explainable) -> RunView:
        log = log_of(source)
        records = tuple(r for r in log.records if is_stage(r, trace.CALL_LLM))
        answer = log.value_at(trace.FINAL_CONTENT, len(log.records) - 1, default=None) \
            if log.records else None
        answer = answer if isinstance(answer, str) else None
        return cls(log, records, answer, _final(log, records, answer))

    @property
    def calls(self) -> tuple[CallView, ...]:
        return tuple(self.call(record) for record in self.records)

    @property
    def final(self) -> CallView | None:
        return None if self.final_record is None else self.call(self.final_record)

    def call(self, record: CommitRecord | None = None) -> CallView:
        """The view of ``record``'s call (default: the call whose answer the run handed back)."""
        if record is None:
            if self.final_record is None:
                raise ValueError("this run made no LLM call; there is no answer to explain")
            record = self.final_record
        found = self._views.get(record.idx)
        if found is None:
            if not is_stage(record, trace.CALL_LLM):
                raise ValueError(f"step {record.runtime_stage_id!r} is not an LLM call")
            found = self._views[record.idx] = self._linked(_call_view(self.log, record))
        return found

    # -- across compositions and agent-tools ----------------------------------------------

    @property
    def member_index(self) -> Members:
        """The composition's members and who fed whom (built once; empty for one agent)."""
        if self._members is None:
            self._members = Members(self.log)
        return self._members

    @property
    def members(self) -> dict[str, Member]:
        """A composition's members by name (``"first"``, ``"p/a"``), each with its namespace
        (the subflow it ran as) and its answer; empty for a single agent's run."""
        return self.member_index.members

    @property
    def sub_runs(self) -> dict[str, SubRun]:
        """Agents run as tools in this run, by the outer tool call id (with the inner run's id
        and, when kept, its recording)."""
        if self._sub_runs is None:
            self._sub_runs = self.member_index.sub_runs()
        return self._sub_runs

    def member_of(self, call: CallView) -> Member | None:
        """The member of a composition that made ``call`` (None outside a composition)."""
        return self.member_index.member_at(call.record.ns)

    def feeders(self, call: CallView) -> tuple[list[Member], bool]:
        """The members whose answers reached ``call``'s message, and whether the user's did."""
        return self.member_index.feeders(call.record.ns)

    def answer_members(self) -> tuple[list[Member], str | None]:
        """The members whose answers the run's answer was made from, and the step that wrote
        it (a member's mount, or a stage that merged several answers); ``([], None)`` outside
        a composition."""
        return self.member_index.answer_feeders()

    def answer_call(self, member: Member) -> CallView | None:
        """The call of ``member`` whose answer it handed back (else its last call)."""
        own = [r for r in self.records if r.ns == member.ns]
        if not own:
            return None
        found = _final(self.log, own, member.answer)
        return None if found is None else self.call(found)

    def _linked(self, view: CallView) -> CallView:
        """``view`` with its pieces linked: the member they reached, a handed-on message's
        members, an agent-tool result's inner run."""
        index = self.member_index
        member = index.member_at(view.record.ns)
        links = self.sub_runs if any(p.kind == "tool" for p in view.pieces) else {}
        if member is None and not links:
            return view
        sent = index.input_of(member.ns) if member is not None else None
        upstream: tuple[str, ...] = ()
        if member is not None:
            upstream = tuple(m.name for m in index.feeders(member.ns)[0])
        pieces = []
        for piece in view.pieces:
            changes: dict[str, Any] = {}
            if member is not None:
                changes["member"] = member.name
            if piece.kind == "user" and upstream and piece.text == sent:
                changes["upstream"] = upstream
            sub = links.get(piece.tool_call_id or "") if piece.kind == "tool" else None
            if sub is not None:
                changes["upstream"] = (sub.run_id,)
            pieces.append(replace(piece, **changes) if changes else piece)
        return replace(view, pieces=tuple(pieces))

    def memory_read(self, memory_id: str, before: CallView) -> str | None:
        """The runtime stage id of the last read of memory ``memory_id`` before a call."""
        stage = trace.MEMORY_READ.of(memory_id)
        return next((r.runtime_stage_id for r in reversed(self.log.records[: before.record.idx])
                     if r.stage_id == stage), None)

    def route_before(self, runtime_stage_id: str | None) -> str | None:
        """The Route step that chose to run the step ``runtime_stage_id``."""
        if runtime_stage_id is None:
            return None
        records = self.log.records_for(runtime_stage_id)
        if not records:
            return None
        for record in reversed(self.log.records[: records[0].idx]):
            if is_stage(record, trace.ROUTE):
                return record.runtime_stage_id
        return None


@dataclass(slots=True)
class StepIndex:
    """The run's steps, by every handle a reader (a person, a model with tools) uses."""

    by_runtime_id: dict[str, list[CommitRecord]] = field(default_factory=dict)
    """runtime id -> its records (a subflow mount has an enter and an exit)."""
    runs_of: dict[str, list[str]] = field(default_factory=dict)
    """stage id -> runtime ids, in run order."""
    keys: dict[str, dict[str, None]] = field(default_factory=dict)
    """namespace -> keys seeded or written there, first seen first."""
    writes: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """(namespace, key) -> indexes of the records that changed it."""
    redacted: frozenset[str] = frozenset()
    """Keys whose recorded value is the redaction marker somewhere in the run."""

    @classmethod
    def of(cls, log: CommitLog) -> StepIndex:
        index = cls()
        marked: set[str] = set()
        for ns, state in log.initial.items():
            bucket = index.keys.setdefault(ns, {})
            for key, value in state.items():
                bucket[key] = None
                if value == REDACTED:
                    marked.add(key)
        for record in log.records:
            rid = record.runtime_stage_id
            if rid not in index.by_runtime_id:
                index.runs_of.setdefault(record.stage_id, []).append(rid)
            index.by_runtime_id.setdefault(rid, []).append(record)
            bucket = index.keys.setdefault(record.ns, {})
            for change in record.changes:
                bucket[change.key] = None
                index.writes.setdefault((record.ns, change.key), []).append(record.idx)
                if change.op == "set" and change.value == REDACTED:
                    marked.add(change.key)
        index.redacted = frozenset(marked)
        return index


def _final(log: CommitLog, records: Sequence[CommitRecord],
           answer: str | None) -> CommitRecord | None:
    """The latest call whose content is the run's answer; else the last call.

    In a composition the last call is not always the one that answered: a critic, a scorer or
    a sibling sample may run after it.
    """
    if not records:
        return None
    if answer:
        for record in reversed(records):
            if log.value_at(trace.LLM_CONTENT, record.idx, ns=record.ns, default=None) == answer:
                return record
    return records[-1]


def _rows(value: Any) -> list[Mapping[str, Any]]:
    """A recorded list of rows; anything else (redacted, missing) reads as none."""
    if not isinstance(value, list):
        return []
    return [row for row in value if isinstance(row, Mapping)]


def _call_view(log: CommitLog, record: CommitRecord) -> CallView:
    ns, idx, before = record.ns, record.idx, record.idx - 1
    system = log.value_at(trace.SYSTEM_PROMPT, before, ns=ns, default="")
    system = system if isinstance(system, str) else ""
    recorded = log.value_at(trace.HISTORY, before, ns=ns, default=[])
    history = recorded if isinstance(recorded, list) else []
    window = log.value_at(trace.WINDOW, before, ns=ns, default=None)
    window = window if isinstance(window, Mapping) else None
    wrapped = bool(log.value_at(trace.WRAP_UP_ASKED, before, ns=ns, default=False))
    tools = [] if wrapped else log.value_at(trace.TOOL_SCHEMAS, before, ns=ns, default=[])
    evaluation = tuple(_rows(log.value_at(trace.CONTEXT_EVALUATION, before, ns=ns, default=[])))
    evaluator = log.last_writer(trace.CONTEXT_EVALUATION, idx, ns=ns)
    started = llm_started(record)
    answer = log.value_at(trace.LLM_CONTENT, idx, ns=ns, default="")
    asked = log.value_at(trace.LLM_TOOL_CALLS, idx, ns=ns, default=[])
    system_pieces, rows = _system_pieces(log, record, system)
    message_pieces = _message_pieces(log, record, history, window)
    if recorded == REDACTED:  # masked whole: the user's part of it stands as the marker
        seeded = next((r.runtime_stage_id for r in log.records[:idx] if r.ns == ns
                       and any(c.key == trace.HISTORY for c in r.changes)), None)
        message_pieces.append(Piece("user", "user", REDACTED, None, "messages", seeded, False))
    return CallView(
        record=record, iteration=log.value_at(trace.ITERATION, before, ns=ns, default=None),
        system=system, messages=windowed_messages(history, window),
        tools=tools if isinstance(tools, list) else [], history=history, window=window,
        pieces=tuple(system_pieces + message_pieces),
        system_pieces=rows, evaluation=evaluation,
        evaluation_writer=log[evaluator].runtime_stage_id if evaluator is not None else None,
        answer=str(answer), tool_calls=asked if isinstance(asked, list) else [],
        model=started.get("model"), provider=started.get("provider"),
        answered_by=_answered_by(log, record))


def _system_pieces(log: CommitLog, call: CommitRecord, system: str) -> tuple[list[Piece], int]:
    """The system prompt's pieces, each with its exact slice of the text."""
    ns, before = call.ns, call.idx - 1
    rows = log.value_at(trace.SYSTEM_SLOT, before, ns=ns, default=None)
    writer_at = log.last_writer(trace.SYSTEM_SLOT if rows is not None else trace.SYSTEM_PROMPT,
                                call.idx, ns=ns)
    writer = log[writer_at].runtime_stage_id if writer_at is not None else None
    if rows is None:
        return ([Piece("base", "base", system, "base", "system", writer, False)]
                if system else []), 0
    pieces = []
    slot_rows = _rows(rows)
    for row in slot_rows:
        text = REDACTED if system == REDACTED else system[row["start"]:row["end"]]
        position = row.get("position")
        if row["source"] == "base":
            pieces.append(Piece("base", "base", text, "base", "system", writer, False, position))
        else:
            pieces.append(Piece("injection", row["source"], text, row.get("flavor"), "system",
                                writer, True, position))
    return pieces, len(slot_rows)


def _message_pieces(log: CommitLog, call: CommitRecord, history: list[Any],
                    window: Mapping[str, Any] | None) -> list[Piece]:
    """The sources in the conversation the call was sent (what the window left out is not)."""
    writers = _history_writers(log, call.idx, call.ns)
    writers += [None] * (len(history) - len(writers))
    sent = set(window["kept"]) if window is not None else None
    out = []
    for index, message in enumerate(history):
        if sent is not None and index not in sent:
            continue  # left out of the window: the model never read it
        if not isinstance(message, Mapping):
            continue
        marker = message.get("injected_by")
        content = message.get("content")
        text = content if isinstance(content, str) else str(content)
        if message.get("role") == "user" and marker is None:
            out.append(Piece("user", "user", text, None, "messages", writers[index], False))
        elif message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            out.append(Piece("tool", message.get("tool_name") or "?", text, None, "messages",
                             writers[index],
                             tool_call_id=call_id if isinstance(call_id, str) else None))
        elif marker is not None and marker not in _NOT_CONTEXT:
            out.append(Piece("message", marker, text, None, "messages", writers[index]))
    return out


def _history_writers(log: CommitLog, before: int, ns: str = "") -> list[str | None]:
    """For each message of ``history`` as of ``before``: the step whose commit added it.

    One pass over the log: appends own their tail; a whole rewrite keeps the owners of the
    unchanged prefix and gives the rest to the rewriting step.
    """
    initial = log.initial.get(ns, {}).get(trace.HISTORY, [])
    current: list[Any] = list(initial) if isinstance(initial, list) else []
    owners: list[str | None] = [None] * len(current)
    for record in log.records[:before]:
        if record.ns != ns:
            continue
        for change in record.changes:
            if change.key != trace.HISTORY:
                continue
            rid = record.runtime_stage_id
            if change.op == "append":
                current.extend(change.value)
                owners.extend([rid] * len(change.value))
            elif change.op == "delete" or not isinstance(change.value, list):
                current, owners = [], []
            else:
                new = list(change.value)
                keep = 0
                for old, fresh in zip(current, new, strict=False):
                    if old is not fresh and old != fresh:
                        break
                    keep += 1
                owners = owners[:keep] + [rid] * (len(new) - keep)
                current = new
    return owners


def _answered_by(log: CommitLog, call: CommitRecord) -> str | None:
    for record in log.records[call.idx:]:
        if is_stage(record, trace.FINALIZE) and record.ns == call.ns:
            return record.runtime_stage_id
    return None
