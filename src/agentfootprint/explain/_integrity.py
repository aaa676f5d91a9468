"""Context integrity: deterministic checks that a recorded run contradicts itself.

``find_context_errors(run)`` reads a run (a RunResult, FlowRun or Recording) through its typed
view and files a finding wherever two things it recorded cannot both be right. Four checks, each
with a fixed id; none calls a model, none re-runs anything:

* ``parked-tool-offered`` — a tool was offered to a call while the run had **parked** it. In this
  codebase a tool is parked by a skill's step procedure (``define_skill(steps=...)``): while the
  procedure stands at step *k* (``skill_steps``), the tools of its other steps are held back from
  the tools slot. The recording names a step's tool when that step was current (its tools-slot
  row carries ``step``), so a tool the run offered as step *j* and that is in a later call's tool
  list while the same procedure stands at another step is a finding. (Permission and act()
  refusals judge one call, never park a tool; a permission halt ends the run.)
* ``dangling-tool-offer`` — a tool was offered after every result grounding it was evicted by
  the window. Which results ground a tool is declared by the reader (``grounds={"refund":
  ["lookup_order"]}``): a tool definition does not say it. Silent when the grounding tool never
  returned before (ordinary sequencing) or a result of it is still in the window.
* ``answer-contradicts-source`` — the answer states a labelled value (a number, a date or an
  identifier; exactly what counts is in ``explain/_claims.py``) that a tool result or fact sent
  to the answering call gives a different value under the same label.
* ``injection-fired-against-condition`` — an injection triggered by a rule or a tool return
  (``define_instruction(active_when=..., on_tool_return=...)``, steering, facts with rules)
  reached a call's system prompt or tool list while that call's own evaluation row says it did
  not fire (a frozen ``react_mode="classic"`` prompt does this), or its row says it fired on a
  tool return that the recorded previous batch does not hold (and the reverse).

Every check files one **disposition**: ``found`` (findings), ``nothing`` (it ran over N items
and found none) or ``could-not-run`` (and why: the window was not recorded, no grounds declared,
the answer states no labelled value...). So "no findings" and "no check ran" never read alike,
and a clean report covers only the checks that ran.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from ..flow._redact import REDACTED
from ..runs import trace
from ..runs._view import CallView, Explainable, RunView
from ._claims import Claim, claims_in, same_label, same_value

__all__ = ["CHECKS", "ContextError", "ContextErrorReport", "Disposition", "find_context_errors"]

CHECKS: Final = ("parked-tool-offered", "dangling-tool-offer", "answer-contradicts-source",
                 "injection-fired-against-condition")
"""Every check, in the order they run and are shown."""

Status = Literal["found", "nothing", "could-not-run"]
_GATED: Final = ("rule", "on_tool_return")
"""Trigger kinds whose firing depends on a condition the run evaluated."""
_TOOL_RETURN: Final = re.compile(r"^on_tool_return\((?P<tool>.*)\)$")


@dataclass(frozen=True, slots=True)
class ContextError:
    """One contradiction: which check, how bad, the sources involved, the evidence and why."""

    check: str
    severity: Literal["error", "warning"]
    sources: tuple[str, ...]
    """Ids that locate it: ``step:call_llm#12``, ``tool_call:c1``, ``injection:be-brief``,
    ``tool:refund`` — each one a handle the trace tools accept."""
    evidence: str
    explanation: str

    def line(self) -> str:
        return (f"[{self.severity}] {self.check} — {self.explanation}\n"
                f"    sources: {', '.join(self.sources)}\n    evidence: {self.evidence}")


@dataclass(frozen=True, slots=True)
class Disposition:
    """What one check did: found something, ran and found nothing, or could not run (why)."""

    check: str
    status: Status
    checked: int
    """How many items it compared (calls, offers, claims, evaluation rows)."""
    findings: int
    reason: str

    def line(self) -> str:
        verdict = {"found": f"FOUND {self.findings}", "nothing": "ran, found nothing",
                   "could-not-run": "COULD NOT RUN"}[self.status]
        return f"  {self.check:<34} {verdict} — {self.reason}"


@dataclass(frozen=True, slots=True)
class ContextErrorReport:
    """Findings plus the disposition ledger; ``str()`` is the text a person or a model reads."""

    run_id: str | None
    findings: tuple[ContextError, ...]
    dispositions: tuple[Disposition, ...]

    @property
    def ran(self) -> tuple[str, ...]:
        """The checks that ran (found something or nothing)."""
        return tuple(d.check for d in self.dispositions if d.status != "could-not-run")

    @property
    def clean(self) -> bool:
        """No finding *and* every check ran: the only state that reads as a clean bill."""
        return not self.findings and len(self.ran) == len(self.dispositions)

    def of(self, check: str) -> tuple[ContextError, ...]:
        return tuple(f for f in self.findings if f.check == check)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "findings": [asdict(f) for f in self.findings],
                "dispositions": [asdict(d) for d in self.dispositions]}

    def to_json(self) -> str:
        """The report as JSON (for the HTML report, exporters, a CI gate)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    def __str__(self) -> str:
        ran, total = len(self.ran), len(self.dispositions)
        if self.findings:
            head = f"CONTEXT ERRORS — {len(self.findings)} finding(s) from {ran} of {total} checks"
        elif ran == total:
            head = f"No context error found: all {total} checks ran and found nothing."
        elif ran:
            head = (f"No context error found by the {ran} of {total} checks that ran; "
                    f"⚠ {total - ran} could not run, so this covers only part of the run.")
        else:
            head = ("⚠ NO CHECK RAN — this is no evidence either way, not a clean run "
                    "(see why below).")
        lines = [head]
        lines.extend(f.line() for f in self.findings)
        lines.append("CHECKS:")
        lines.extend(d.line() for d in self.dispositions)
        lines.append("Green means no check that ran was violated; it does not mean no context "
                     "error exists.")
        return "\n".join(lines)


def find_context_errors(source: Explainable, *,
                        grounds: Mapping[str, Iterable[str]] | None = None
                        ) -> ContextErrorReport:
    """The run's self-contradictions and the disposition of every check.

    ``grounds`` maps a tool to the tools whose results it needs (``{"refund":
    ["lookup_order"]}``); without it the dangling-offer check cannot run, and says so.
    """
    view = RunView.of(source)
    run_id = getattr(source, "run_id", None)
    checks = [_parked(view), _dangling(view, grounds), _contradictions(view),
              _against_condition(view)]
    findings = tuple(f for _, found in checks for f in found)
    return ContextErrorReport(run_id if isinstance(run_id, str) else None, findings,
                              tuple(d for d, _ in checks))


Outcome = tuple[Disposition, list[ContextError]]


def _done(check: str, checked: int, found: list[ContextError], what: str) -> Outcome:
    if found:
        return Disposition(check, "found", checked, len(found), f"over {checked} {what}"), found
    return Disposition(check, "nothing", checked, 0, f"compared {checked} {what}"), found


def _cannot(check: str, why: str) -> Outcome:
    return Disposition(check, "could-not-run", 0, 0, why), []


def _before(view: RunView, call: CallView, key: str) -> Any:
    return view.log.value_at(key, call.record.idx - 1, ns=call.record.ns, default=None)


def _names(tools: Sequence[Any]) -> list[str]:
    return [str(t["name"]) for t in tools if isinstance(t, Mapping) and "name" in t]


def _rows(value: Any) -> list[Mapping[str, Any]]:
    return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []


# -- (a) a parked tool still offered ---------------------------------------------------------


def _parked(view: RunView) -> Outcome:
    check = CHECKS[0]
    calls = view.calls
    if not calls:
        return _cannot(check, "the run made no LLM call, so nothing was offered")
    step_tools: dict[tuple[str, str], dict[int, str]] = {}
    """(namespace, skill) -> step number -> the tool the run offered as that step."""
    checked, found = 0, []
    procedure = False
    for call in calls:
        ns = call.record.ns
        pointer = _before(view, call, trace.SKILL_STEPS)
        rows = _rows(_before(view, call, trace.TOOLS_SLOT))
        if not isinstance(pointer, Mapping) or not isinstance(pointer.get("skill"), str):
            continue
        procedure = True
        skill, step = str(pointer["skill"]), pointer.get("step")
        known = step_tools.setdefault((ns, skill), {})
        for row in rows:
            if isinstance(row.get("step"), int) and row.get("source") == skill:
                known.setdefault(int(row["step"]), str(row.get("name")))
        total = pointer.get("total")
        if not isinstance(step, int) or not isinstance(total, int) or step > total:
            continue  # the procedure is finished: nothing is held any more
        offered = set(_names(call.tools))
        for held_step, tool in sorted(known.items()):
            if held_step == step:
                continue
            checked += 1
            if tool in offered:
                found.append(ContextError(
                    check, "error",
                    (f"step:{call.runtime_stage_id}", f"tool:{tool}", f"injection:{skill}"),
                    f"skill_steps before {call.runtime_stage_id}: skill {skill!r} at step "
                    f"{step} of {total}; '{tool}' is step {held_step}; tool_schemas sent: "
                    f"{', '.join(sorted(offered))}",
                    f"'{tool}' was offered to {call.runtime_stage_id} although skill "
                    f"{skill!r}'s procedure held it (it is step {held_step}, the run stood at "
                    f"step {step})."))
    if not procedure:
        return _cannot(check, "nothing in this run parks a tool (no skill step procedure "
                              "was in progress at any call)")
    if not checked:
        return _cannot(check, "a procedure ran but no call stood at a step while another "
                              "step's tool was known, so no held tool could be compared")
    return _done(check, checked, found, "held tool(s) against the tool lists sent")


# -- (b) a tool offered after its grounding results were evicted ------------------------------


def _dangling(view: RunView, grounds: Mapping[str, Iterable[str]] | None) -> Outcome:
    check = CHECKS[1]
    declared = {str(t): tuple(str(g) for g in gs) for t, gs in (grounds or {}).items()}
    if not declared:
        return _cannot(check, "no grounds declared: a tool does not say which results it "
                              "needs; pass grounds={'tool': ['tool whose result it needs']}")
    calls = view.calls
    windowed = [c for c in calls if c.window is not None]
    if not windowed:
        return _cannot(check, "the recording lacks the window data (the agent ran without "
                              "window=, so every call was sent the whole history)")
    checked, found = 0, []
    for call in windowed:
        assert call.window is not None
        kept = set(call.window.get("kept") or ())
        offered = set(_names(call.tools))
        for tool, needed in declared.items():
            if tool not in offered:
                continue
            for ground in needed:
                returned = [i for i, m in enumerate(call.history) if isinstance(m, Mapping)
                            and m.get("role") == "tool" and m.get("tool_name") == ground]
                if not returned:
                    continue  # never fetched: ordinary sequencing, not a dangling offer
                checked += 1
                if any(i in kept for i in returned):
                    continue
                ids = [str(call.history[i].get("tool_call_id")) for i in returned]
                summary = " (folded into a summary)" if call.window.get("summary") else ""
                found.append(ContextError(
                    check, "warning",
                    (f"step:{call.runtime_stage_id}", f"tool:{tool}",
                     *(f"tool_call:{i}" for i in ids)),
                    f"window before {call.runtime_stage_id} ({call.window.get('strategy')}) "
                    f"kept history {sorted(kept)}; the results of '{ground}' are at "
                    f"{returned}{summary}; tool_schemas sent include '{tool}'",
                    f"'{tool}' was offered to {call.runtime_stage_id} after the window evicted "
                    f"every result of '{ground}' it rests on ({', '.join(ids)})."))
    if not checked:
        return _cannot(check, "no declared tool was offered after a result it rests on had "
                              "been returned, so there was nothing to compare")
    return _done(check, checked, found, "offer(s) of a grounded tool")


# -- (c) the answer contradicts the result or fact it rests on ---------------------------------


def _contradictions(view: RunView) -> Outcome:
    check = CHECKS[2]
    final = view.final
    answer = view.answer if view.answer is not None else (final.answer if final else None)
    if final is None or not answer:
        return _cannot(check, "the run has no answer to compare")
    if answer == REDACTED:
        return _cannot(check, "the answer is redacted")
    stated = claims_in(answer)
    if not stated:
        return _cannot(check, "the answer states no labelled value (a number, date or "
                              "identifier after a label) to compare")
    sources = [p for p in final.pieces if p.text != REDACTED and (
        p.kind == "tool" or (p.kind == "injection" and p.flavor == "fact"))]
    if not sources:
        return _cannot(check, "no tool result or fact reached the answering call "
                              f"({final.runtime_stage_id}), or they are redacted")
    given = [(piece, claim) for piece in sources for claim in claims_in(piece.text)]
    checked, found = 0, []
    for claim in stated:
        values = [(piece, g) for piece, g in given if same_label(claim.label, g.label)
                  and same_value(claim, g) is not None]
        if not values:
            continue
        checked += 1
        if any(same_value(claim, g) for _, g in values):
            continue  # some source gives the answer's value: it may be the one cited
        if len({_canonical(g) for _, g in values}) != 1:
            continue  # the sources give that label several values: ambiguous, never a finding
        piece, given_value = values[0]
        cited = list(dict.fromkeys(p for p, _ in values))
        where = [f"tool_call:{p.tool_call_id}" if p.tool_call_id else f"injection:{p.id}"
                 for p in cited]
        steps = [f"step:{p.runtime_stage_id}" for p in cited if p.runtime_stage_id]
        kind = f"tool '{piece.id}' result" if piece.kind == "tool" else f"fact {piece.id!r}"
        found.append(ContextError(
            check, "error",
            tuple(dict.fromkeys((f"step:{final.runtime_stage_id}", *where, *steps))),
            f"answer: {claim.label_text} = {claim.value}; {kind}: "
            f"{given_value.label_text} = {given_value.value}",
            f"The answer says {claim.label_text} is {claim.value}, but the {kind} it was "
            f"given says {given_value.value}."))
    if not checked:
        return _cannot(check, "no label the answer states appears in a tool result or fact "
                              "it was given")
    return _done(check, checked, found, "stated value(s) against the results and facts given")


def _canonical(claim: Claim) -> str:
    return claim.value.lower().replace(",", "")


# -- (d) an injection that fired with the opposite of its condition ----------------------------


def _against_condition(view: RunView) -> Outcome:
    check = CHECKS[3]
    calls = view.calls
    if not calls:
        return _cannot(check, "the run made no LLM call")
    checked, found = 0, []
    recorded = False
    for call in calls:
        gated = {str(r.get("id")): r for r in call.evaluation
                 if str(r.get("trigger", "")).split("(")[0] in _GATED}
        if not gated:
            continue
        recorded = True
        landed = {p.id for p in call.pieces if p.kind == "injection"}
        landed |= {str(r.get("source")) for r in _rows(_before(view, call, trace.TOOLS_SLOT))}
        batch = {str(r.get("tool_name")) for r in _rows(_before(view, call, trace.TOOL_RESULTS))}
        for injection_id, row in gated.items():
            checked += 1
            fired = bool(row.get("fired"))
            flavor = str(row.get("flavor") or "injection")
            what = f"{flavor} {injection_id!r}"
            sources = (f"step:{call.runtime_stage_id}", f"injection:{injection_id}",
                       *((f"step:{call.evaluation_writer}",) if call.evaluation_writer else ()))
            if injection_id in landed and not fired:
                found.append(ContextError(
                    check, "error", sources,
                    f"context_evaluation for {call.runtime_stage_id}: fired=False "
                    f"({row.get('reason')!r}); yet {injection_id!r} is in the prompt it was sent",
                    f"{what} reached {call.runtime_stage_id} although its condition evaluated "
                    "false for that call."))
                continue
            tool = _TOOL_RETURN.match(str(row.get("trigger", "")))
            if tool is None:
                continue
            name = tool.group("tool")
            hit = any(t == name or _search(name, t) for t in batch)
            if fired and not hit:
                found.append(ContextError(
                    check, "error", sources,
                    f"context_evaluation: fired=True ({row.get('reason')!r}); tool_results "
                    f"before {call.runtime_stage_id}: {sorted(batch) or 'none'}",
                    f"{what} fired on a return of '{name}' that the recorded previous batch "
                    "does not hold."))
            elif not fired and name in batch:
                found.append(ContextError(
                    check, "warning", sources,
                    f"context_evaluation: fired=False ({row.get('reason')!r}); tool_results "
                    f"before {call.runtime_stage_id}: {sorted(batch)}",
                    f"{what} did not fire although the recorded previous batch holds a "
                    f"return of '{name}'."))
    if not recorded:
        return _cannot(check, "no injection with a rule or tool-return trigger was evaluated "
                              "(or the evaluation rows are redacted)")
    return _done(check, checked, found, "evaluation row(s) against what each call was sent")


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False

