"""What the HTML report shows, read from a recording: plain data, no markup.

Everything here comes from the recording's commit log (plus the ids, scores and verdicts of a
backtrack and a localization proof — live, or kept in the run store), so a value redacted at
the source stays ``[REDACTED]``. The answer a re-run gave without a proven cause is shown
beside it, except for a run recorded under redaction (that answer never went through the
run's policy). A failed run is shown as a failure: its error, the step that raised it and
the context at that moment — no call is "the call that produced the answer". Nested agents
(compositions) are read in their own namespace, so every LLM call of a pipeline gets its view.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...context._record import context_report
from ...flow._commitlog import CommitLog, CommitRecord
from ...flow._redact import REDACTED
from ...runs import trace
from ...runs._recording import Recording
from ...runs._view import RunView
from .._backtrack import Backtrack, Hop
from .._explain_run import follow_proof
from .._failure import Failure, failure_of
from .._kept import KeptCause, KeptProof, is_redacted, kept_proof
from .._localize import ContextBugReport
from .._paused import Paused, pause_of
from .._suspects import Suspect, is_stage
from ._text import as_text, dicts
from ._tool_runs import ToolRun, tool_runs_of

__all__ = [
    "Board",
    "CallView",
    "ChartRun",
    "Culprit",
    "InjectionRow",
    "Localization",
    "IterationGroup",
    "MessageView",
    "ReportData",
    "Span",
    "Step",
    "SuspectCard",
    "ToolRun",
    "build_report_data",
]


@dataclass(frozen=True, slots=True)
class Span:
    """A piece of the system prompt and the source that put it there."""

    start: int
    end: int
    source: str
    """Injection id, or ``"base"`` for the agent's own system prompt."""
    flavor: str


@dataclass(frozen=True, slots=True)
class InjectionRow:
    """One declared injection at one call: who let it in (or not) and how it landed."""

    id: str
    flavor: str
    trigger: str
    fired: bool
    reason: str
    landed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message the call sent, with the source that put it into the conversation."""

    index: int
    role: str
    content: str
    source: str | None
    """The injection id (``injected_by``) or the tool name of a tool result."""
    tool_calls: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CallView:
    """Exactly what the model saw at one LLM call, and what it answered."""

    index: int
    runtime_stage_id: str
    scope: str
    """The nested agent's mount path (``""`` at the top level)."""
    iteration: int | None
    system: str
    spans: tuple[Span, ...]
    messages: tuple[MessageView, ...]
    tools: tuple[tuple[str, str | None], ...]
    """(tool name, injection that offered it) for every tool the call offered."""
    injections: tuple[InjectionRow, ...]
    answer: str
    asked_tools: tuple[str, ...]
    is_final: bool
    failed: str | None = None
    """The error, when this call is the one that raised (the run failed on it)."""
    tool_runs: tuple[ToolRun, ...] = ()
    """Every tool call this call asked for, its arguments and its result."""


@dataclass(frozen=True, slots=True)
class Step:
    """One executed step on the timeline."""

    runtime_stage_id: str
    stage_id: str
    name: str
    kind: str
    detail: str
    call_index: int | None
    failed: bool


@dataclass(frozen=True, slots=True)
class IterationGroup:
    """Consecutive steps of one agent iteration (or of one stretch of a plain flow)."""

    label: str
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class ChartRun:
    """Which stages ran (and how often) and which edges were taken."""

    runs: dict[str, int]
    taken: frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class SuspectCard:
    """One candidate on the backtrack board."""

    rank: int
    label: str
    source: str
    kind: str
    score: float | None
    """The proxy score; ``None`` when it is not a finite number."""
    sentence: str
    removable: bool
    followed: bool
    verdict: str | None = None
    fraction: str | None = None
    why: str = ""
    answer_without: str | None = None
    """What the agent answered without this source (CAUSAL verdicts)."""


@dataclass(frozen=True, slots=True)
class Culprit:
    """Where the culprit sentence sits in the explained call's exact prompt."""

    source: str
    sentence: str
    message_index: int | None
    """``None``: in the system prompt; else the message that carries it."""
    start: int
    end: int
    """Offsets of the sentence in the system prompt or in that message's content."""
    proven: bool


@dataclass(frozen=True, slots=True)
class Board:
    """The backtrack board: the chain, the ranked candidates, the verdicts, the culprit."""

    answer: str
    hops: tuple[Hop, ...]
    cards: tuple[SuspectCard, ...]
    strategy: str
    call_index: int | None
    culprit: Culprit | None
    baseline: str | None
    confidence: str | None
    notes: tuple[str, ...]
    reruns: int | None
    causes: tuple[KeptCause, ...] = ()
    """The proven causes, when a proof is given or kept."""
    criterion: str | None = None
    """How "wrong" was judged, in words (with a proof)."""
    rule: str | None = None
    """The verdict rule and its cost, in words (with a proof)."""
    follow_note: str = ""
    failure: Failure | None = None
    """Set for a failed run: the board explains the error, not an answer."""
    uncovered: tuple[str, ...] = ()
    """Suspects the kept re-runs did not reach before their budget ran out (not innocent)."""
    pause: Paused | None = None
    """Set for a paused run: the board traces what it stopped at (the pending tool call),
    not an answer."""


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything one report page shows."""

    run_id: str
    name: str
    kind: str
    status: str
    created_at: float
    question: str | None
    answer: str
    chart: dict[str, Any]
    chart_run: ChartRun
    timeline: tuple[IterationGroup, ...]
    calls: tuple[CallView, ...]
    board: Board | None
    failure: Failure | None = None
    """Set for a failed run."""
    pause: Paused | None = None
    """Set for a paused run: where it stopped and what it waits on."""


Localization = ContextBugReport | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
"""A live report, one kept proof, or a run's proofs as ``store.proofs(run_id)`` returns them."""


def build_report_data(recording: Recording, *, backtrack: Backtrack | None = None,
                      localization: Localization = None) -> ReportData:
    """Read the report's content from ``recording`` (and the explanation objects given)."""
    log = recording.commit_log()
    failure = failure_of(recording)
    paused = pause_of(recording) if failure is None else None
    calls = _calls(log, failure)
    question = _text_or_none(_first_value(log, "user_message"))
    if failure is not None:
        answer = ""
        board: Board | None = _failure_board(recording, calls, failure, backtrack)
    elif paused is not None:  # no answer yet: the board traces the pause
        answer = ""
        board = _board(recording, log, calls, backtrack, localization, paused)
    else:
        if recording.kind == "agent" or calls:
            answer = _answer(log, calls)
        else:
            answer = _masked_output(recording.output, _redacted_keys(log))
        board = _board(recording, log, calls, backtrack, localization)
    return ReportData(
        run_id=recording.run_id, name=recording.name, kind=recording.kind,
        status=recording.status, created_at=recording.created_at, question=question,
        answer=answer, chart=recording.chart, chart_run=_chart_run(log),
        timeline=_timeline(log, calls), calls=tuple(calls), board=board, failure=failure,
        pause=paused)


# -- the chart and the timeline ----------------------------------------------------------------


def _chart_run(log: CommitLog) -> ChartRun:
    runs: dict[str, int] = {}
    by_rid: dict[str, str] = {}
    taken: set[tuple[str, str]] = set()
    for record in log.records:
        by_rid.setdefault(record.runtime_stage_id, record.stage_id)
        if record.kind == "subflow-exit":
            continue
        runs[record.stage_id] = runs.get(record.stage_id, 0) + 1
        parent = by_rid.get(record.parent) if record.parent else None
        if parent is not None and parent != record.stage_id:
            taken.add((parent, record.stage_id))
    return ChartRun(runs, frozenset(taken))


def _timeline(log: CommitLog, calls: list[CallView]) -> tuple[IterationGroup, ...]:
    call_of = {call.runtime_stage_id: call.index for call in calls}
    groups: list[IterationGroup] = []
    key: tuple[str, int | None] | None = None
    label = ""
    steps: list[Step] = []
    records = log.records
    for position, record in enumerate(records):
        if record.kind == "subflow-exit":
            continue
        owner = record
        if record.kind == "subflow-enter" and position + 1 < len(records):
            follower = records[position + 1]
            owner = follower if follower.ns == record.ns else record
        here = (record.ns, _iteration_of(log, owner))
        if here != key:
            if steps:
                groups.append(IterationGroup(label, tuple(steps)))
            steps, key, label = [], here, _group_label(*here)
        steps.append(Step(record.runtime_stage_id, record.stage_id, record.stage, record.kind,
                          _detail(log, record), call_of.get(record.runtime_stage_id),
                          record.error is not None))
    if steps:
        groups.append(IterationGroup(label, tuple(steps)))
    return tuple(groups)


def _iteration_of(log: CommitLog, record: CommitRecord) -> int | None:
    value = log.value_at(trace.ITERATION, record.idx - 1, ns=record.ns, default=None)
    if not isinstance(value, int) or isinstance(value, bool):
        value = log.value_at(trace.ITERATION, record.idx, ns=record.ns, default=None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _group_label(ns: str, iteration: int | None) -> str:
    scope = _scope(ns)
    if iteration is None:
        return scope or "run"
    return f"{scope} · iteration {iteration}" if scope else f"iteration {iteration}"


def _scope(ns: str) -> str:
    return ns.rsplit("#", 1)[0] if ns else ""


def _detail(log: CommitLog, record: CommitRecord) -> str:
    if record.error is not None:
        return f"failed: {record.error}"
    if record.decision is not None:
        chosen = record.decision.get("chosen")
        if isinstance(chosen, list):
            chosen = ", ".join(map(str, chosen))
        return f"→ {chosen}"
    if is_stage(record, trace.CALL_LLM):
        asked = _tool_names(log.value_at(trace.LLM_TOOL_CALLS, record.idx, ns=record.ns,
                                         default=[]))
        return f"asked for {', '.join(asked)}" if asked else "answered"
    if is_stage(record, trace.TOOL_CALLS):
        for change in record.changes:
            if change.key == trace.TOOL_RESULTS and isinstance(change.value, list):
                names = [str(r.get("tool_name")) for r in change.value if isinstance(r, dict)]
                return "ran " + ", ".join(names) if names else ""
    if record.break_reason is not None:
        return f"stopped: {record.break_reason}" if record.break_reason else "stopped"
    if record.paused:
        return "paused"
    return ""


# -- the LLM calls -----------------------------------------------------------------------------


def _calls(log: CommitLog, failure: Failure | None = None) -> list[CallView]:
    """One view per LLM call, in run order, with the injections ``context_report`` reads.

    In a failed run no call produced an answer; the call that raised carries the error (and
    no answer: what the log holds for it is the previous call's)."""
    run = RunView.of(log)
    if not run.records:
        return []
    reports: dict[str, dict[str, Any]] = {}
    for ns in dict.fromkeys(record.ns for record in run.records):
        for entry in context_report(_namespace_log(log, ns)):
            reports[entry["runtime_stage_id"]] = entry
    final_idx = run.final_record.idx if run.final_record is not None and failure is None \
        else -1
    raised = failure.runtime_stage_id if failure is not None and failure.kind == "provider" \
        else None
    out = []
    for index, record in enumerate(run.records):
        call = run.call(record)
        before, ns = record.idx - 1, record.ns
        entry = reports.get(record.runtime_stage_id, {})
        rows = log.value_at(trace.SYSTEM_SLOT, before, ns=ns, default=[])
        tool_rows = log.value_at(trace.TOOLS_SLOT, before, ns=ns, default=[])
        offered_by = {t.get("name"): t.get("source") for t in dicts(tool_rows)}
        tools = tuple((str(t.get("name")), _str_or_none(offered_by.get(t.get("name"))))
                      for t in dicts(call.tools))
        iteration = entry.get("iteration")
        out.append(CallView(
            index=index, runtime_stage_id=record.runtime_stage_id, scope=_scope(ns),
            iteration=iteration if isinstance(iteration, int) else None,
            system=call.system, spans=_spans(call.system, rows),
            messages=_messages(log.value_at(trace.HISTORY, before, ns=ns, default=[])),
            tools=tools,
            injections=tuple(_injection_row(r) for r in entry.get("injections", ())),
            answer="" if record.runtime_stage_id == raised else call.answer,
            asked_tools=() if record.runtime_stage_id == raised
            else _tool_names(call.tool_calls),
            is_final=record.idx == final_idx,
            failed=failure.error if failure is not None
            and record.runtime_stage_id == raised else None,
            tool_runs=() if record.runtime_stage_id == raised
            else tool_runs_of(log, record, call.tool_calls)))
    return out


def _namespace_log(log: CommitLog, ns: str) -> CommitLog:
    """One namespace's records as a top-level log, so ``context_report`` reads a nested agent."""
    if ns == "":
        return log
    view = CommitLog(initial={"": dict(log.initial.get(ns, {}))})
    for record in log.records:
        if record.ns == ns:
            view.append(replace(record, ns="", read_ns=None,
                                stage_id=record.stage_id.rsplit("/", 1)[-1]))
    return view


def _spans(system: str, rows: Any) -> tuple[Span, ...]:
    if system == REDACTED:
        return ()
    spans = []
    for row in dicts(rows):
        start, end = row.get("start"), row.get("end")
        if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(system):
            spans.append(Span(start, end, str(row.get("source")), str(row.get("flavor") or "")))
    spans.sort(key=lambda s: (s.start, s.end))
    clean: list[Span] = []
    for span in spans:
        if not clean or span.start >= clean[-1].end:
            clean.append(span)
    return tuple(clean)


def _messages(history: Any) -> tuple[MessageView, ...]:
    if not isinstance(history, list):
        return (MessageView(0, "history", as_text(history), None),)
    out = []
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            out.append(MessageView(index, "?", as_text(message), None))
            continue
        role = str(message.get("role", "?"))
        source = message.get("injected_by")
        if source is None and role == "tool":
            source = message.get("tool_name")
        out.append(MessageView(index, role, as_text(message.get("content", "")),
                               _str_or_none(source), _tool_names(message.get("tool_calls"))))
    return tuple(out)


def _injection_row(row: dict[str, Any]) -> InjectionRow:
    who = row.get("who", {})
    landed = []
    for piece in row.get("how", ()):
        if piece.get("slot") == "system":
            landed.append(f"system · piece {int(piece.get('position', 0)) + 1} · "
                          f"cache {piece.get('cache')}")
        elif piece.get("slot") == "tools":
            landed.append("tools · " + ", ".join(map(str, piece.get("tools", ()))))
        elif piece.get("slot") == "messages":
            landed.append(f"messages · {len(piece.get('messages', ()))} message(s)")
    return InjectionRow(str(row.get("id")), str(row.get("flavor") or ""),
                        str(who.get("trigger")), bool(who.get("fired")),
                        as_text(who.get("reason", "")), tuple(landed))


def _answer(log: CommitLog, calls: list[CallView]) -> str:
    final = log.value_at(trace.FINAL_CONTENT, len(log.records) - 1, default=None)
    if final is not None:
        return as_text(final)
    chosen = [call for call in calls if call.is_final]
    return chosen[0].answer if chosen else ""


# -- the board ---------------------------------------------------------------------------------


def _board(recording: Recording, log: CommitLog, calls: list[CallView],
           chain: Backtrack | None, localization: Localization,
           paused: Paused | None = None) -> Board | None:
    if paused is not None:  # a paused run has no answer, so no proof to follow
        if chain is None or chain.pause is None:
            from .._backtrack import backtrack

            chain = backtrack(recording)
        if not calls or paused.call is None:  # a flow stage's pause: the chain, no suspects
            return Board(answer="", hops=tuple(chain.hops), cards=(),
                         strategy="lexical_overlap", call_index=None, culprit=None,
                         baseline=None, confidence=None, notes=(), reruns=None, pause=paused)
    if not calls:
        return None
    kept = kept_proof(localization, redacted=is_redacted(recording)) if paused is None else None
    note = ""
    if chain is None:
        chain, note = follow_proof(recording, kept)
    followed = chain.suspect
    ranked: dict[str, Any] = {}
    for item in chain.ranked:
        ranked.setdefault(item.suspect.id, item)
    cards: list[SuspectCard] = []
    if kept is not None and kept.verdicts:
        for position, verdict in enumerate(kept.verdicts, start=1):
            item = ranked.get(verdict.id)
            suspect = item.suspect if item is not None else None
            cards.append(SuspectCard(
                verdict.rank or position, verdict.label, verdict.id,
                suspect.kind if suspect is not None else "", _finite(
                    verdict.score if verdict.score is not None
                    else item.score if item is not None else math.nan),
                item.sentence if item is not None else "",
                suspect.removable if suspect is not None else verdict.verdict is not None,
                suspect is not None and _same(suspect, followed), verdict.verdict,
                verdict.fraction, verdict.why, verdict.answer_without))
    else:
        for rank, item in enumerate(chain.ranked, start=1):
            cards.append(SuspectCard(
                rank, item.suspect.label, item.suspect.id, item.suspect.kind,
                _finite(item.score), item.sentence, item.suspect.removable,
                _same(item.suspect, followed)))
    asking = paused.call.runtime_stage_id if paused is not None and paused.call else None
    final = next((call for call in calls if call.runtime_stage_id == asking), None) or next(
        (call for call in calls if call.is_final), calls[-1])
    strategy = getattr(chain.ranked[0], "strategy", "lexical_overlap") if chain.ranked \
        else "lexical_overlap"
    return Board(
        answer=chain.answer, hops=tuple(chain.hops), cards=tuple(cards), strategy=strategy,
        call_index=final.index, culprit=_culprit(final, chain, kept),
        baseline=kept.baseline if kept is not None else None,
        confidence=_disagreement(chain, kept),
        notes=kept.notes if kept is not None else (),
        reruns=kept.reruns if kept is not None else None,
        causes=kept.causes if kept is not None else (),
        criterion=kept.criterion if kept is not None else None,
        rule=kept.cost() if kept is not None else None, follow_note=note,
        uncovered=kept.uncovered if kept is not None else (), pause=paused)


def _failure_board(recording: Recording, calls: list[CallView], failure: Failure,
                   chain: Backtrack | None) -> Board:
    """The board of a failed run: the error's chain, the call it concerns, no suspects."""
    if chain is None or chain.failure is None:
        from .._backtrack import backtrack

        chain = backtrack(recording)
    at = failure.call.runtime_stage_id if failure.call is not None else None
    index = next((call.index for call in calls if call.runtime_stage_id == at), None)
    return Board(answer="", hops=tuple(chain.hops), cards=(), strategy="lexical_overlap",
                 call_index=index, culprit=None, baseline=None, confidence=None, notes=(),
                 reruns=None, failure=failure)


def _disagreement(chain: Backtrack, kept: KeptProof | None) -> str | None:
    """Said when the proxy's leader is not what the re-runs proved; a proxy is never a winner
    beside a proof."""
    if kept is None or not kept.causes or not chain.ranked:
        return None
    leader = chain.ranked[0].suspect
    if leader.id in kept.proven:
        return None
    names = ", ".join(c.labels[0] if c.kind == "single" else "{" + ", ".join(c.labels) + "}"
                      for c in kept.causes)
    return f"The proxy's leader, {leader.label}, is not the cause: the re-runs proved {names}."


def _culprit(call: CallView, chain: Backtrack, kept: KeptProof | None) -> Culprit | None:
    """The proven cause's sentence when re-runs found one, else the followed suspect's."""
    lead = kept.lead if kept is not None else None
    proven = next((item for item in chain.ranked if item.suspect.id == lead), None) \
        if lead is not None else None
    if proven is not None:
        suspect, sentence = proven.suspect, proven.sentence
    elif chain.suspect is not None:
        suspect, sentence = chain.suspect, chain.sentence or chain.suspect.text
    else:
        return None
    sentence = sentence or suspect.text
    if suspect.slot == "system":
        for span in call.spans:
            if span.source == suspect.id:
                at = call.system.find(sentence, span.start, span.end)
                if at >= 0:
                    return Culprit(suspect.id, sentence, None, at, at + len(sentence),
                                   proven is not None)
        at = call.system.find(sentence)
        if at >= 0 and call.system != REDACTED:
            return Culprit(suspect.id, sentence, None, at, at + len(sentence),
                           proven is not None)
        return None
    for message in call.messages:
        if message.content == suspect.text or message.source == suspect.id:
            at = message.content.find(sentence)
            if at >= 0:
                return Culprit(suspect.id, sentence, message.index, at, at + len(sentence),
                               proven is not None)
    return None


def _same(a: Suspect, b: Suspect | None) -> bool:
    return b is not None and (a.kind, a.id, a.text) == (b.kind, b.id, b.text)


# -- small readers -----------------------------------------------------------------------------


def _first_value(log: CommitLog, key: str) -> Any:
    for record in log.records:
        for change in record.changes:
            if change.key == key and change.op == "set":
                return change.value
    return None


def _redacted_keys(log: CommitLog) -> frozenset[str]:
    return frozenset(change.key for record in log.records for change in record.changes
                     if change.value == REDACTED)


def _masked_output(value: Any, redacted: frozenset[str]) -> str:
    """A flow's output as text, with every value under a redacted key masked."""

    def mask(item: object) -> object:
        if isinstance(item, dict):
            return {k: REDACTED if k in redacted else mask(v) for k, v in item.items()}
        if isinstance(item, list):
            return [mask(v) for v in item]
        return item

    if value is None:
        return ""
    return as_text(mask(value))


def _tool_names(calls: Any) -> tuple[str, ...]:
    return tuple(str(call.get("name")) for call in dicts(calls))



def _text_or_none(value: Any) -> str | None:
    return None if value is None else as_text(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _finite(value: float) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None
