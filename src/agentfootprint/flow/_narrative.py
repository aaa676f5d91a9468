"""The run in plain English, rendered from the commit log.

Because every record carries what the step read, changed, decided and emitted, the narrative
is a pure function of the log and the chart: it can be rendered for a run recorded in another
process, and read values are rebuilt from the log, never taken from live state. The
``NarrativeRecorder`` renders the same sentences live, one record at a time.

    Stage 2: Next step: Assess the risk.
      Step 1: Read credit_score = 580
      [Condition]: It evaluated "Low credit": credit_score 580 lt 620 ✓, and chose Reject.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._commitlog import CommitLog, CommitRecord, apply_change
from ._describe import summarize
from ._recorders import FlowEvent
from ._values import MISSING

if TYPE_CHECKING:
    from ._chart import Chart
    from ._run import FlowRun

__all__ = ["NarrativeEntry", "NarrativeRecorder", "NarrativeRenderer", "narrative",
           "render_entries"]


@dataclass(frozen=True, slots=True)
class NarrativeEntry:
    """One line of the narrative, tied to the step it describes."""

    kind: str
    """stage, step, condition, selected, fork, subflow, break, error, pause, resume, emit."""
    text: str
    depth: int
    runtime_stage_id: str
    stage_id: str


class NarrativeRenderer:
    """Turns records into entries, in order; keeps the state needed to show read values."""

    def __init__(self, chart: Chart | None = None, initial: dict[str, dict[str, Any]] | None = None,
                 *, max_value_length: int = 80) -> None:
        self.chart = chart
        self.max_len = max_value_length
        self.counters: dict[str, int] = {}
        self.states: dict[str, dict[str, Any]] = {
            ns: dict(values) for ns, values in (initial or {}).items()
        }

    def feed(self, record: CommitRecord) -> list[NarrativeEntry]:
        out: list[NarrativeEntry] = []
        rid, sid = record.runtime_stage_id, record.stage_id

        def add(kind: str, text: str, depth: int = 0) -> None:
            out.append(NarrativeEntry(kind, text, depth, rid, sid))

        node = self.chart.nodes.get(sid) if self.chart is not None else None
        desc = node.description if node is not None else None
        name = record.stage
        if record.kind == "subflow-enter":
            self.counters[record.ns] = 0
            add("subflow", f"Entering {name}: {desc}." if desc else f"Entering the {name} subflow.")
            seeded = self.states.setdefault(record.ns, {})
            for change in record.changes:
                apply_change(seeded, change)
                add("step", f"Input: {change.key} = {self.show(change.value)}", 1)
        elif record.kind == "subflow-exit":
            self._steps(record, add, reads=False)
            add("subflow", f"Exiting the {name} subflow.")
        else:
            n = self.counters.get(record.ns, 0) + 1
            self.counters[record.ns] = n
            if record.kind == "resume":
                inner = f"Execution resumed at {name}."
            elif n == 1:
                inner = f"The process began: {desc}." if desc else f"The process began with {name}."
            elif record.loop_pass:
                inner = (f"Looped back: {desc} (pass {record.loop_pass})." if desc
                         else f"Looped back to {name} (pass {record.loop_pass}).")
            else:
                inner = f"Next step: {desc}." if desc else f"Next, it moved on to {name}."
            add("stage", f"Stage {n}: {inner}")
            self._steps(record, add, reads=True)
            if record.decision is not None:
                self._decision(record, add)
        if record.error is not None:
            add("error", f"[Error]: An error occurred at {name}: {record.error}.")
        if record.break_reason is not None:
            reason = f" ({record.break_reason})" if record.break_reason else ""
            add("break", f"Execution stopped at {name}{reason}.")
        if record.paused:
            add("pause", f"Execution paused at {name}.")
        elif (node is not None and node.children and record.error is None
              and record.break_reason is None and self.chart is not None):
            names = [self.chart.nodes[c].name for c in node.children]
            add("fork", f"[Parallel]: Forking into {len(names)} parallel paths: "
                f"{', '.join(names)}.")
        return out

    def show(self, value: object) -> str:
        return summarize(value, self.max_len)

    def _steps(self, record: CommitRecord, add: Any, *, reads: bool) -> None:
        state = self.states.setdefault(record.ns, {})
        read_state = self.states.setdefault(record.read_namespace, {})
        i = 0
        if reads:
            for key in record.reads:
                i += 1
                add("step", f"Step {i}: Read {key} = {self.show(read_state.get(key, MISSING))}", 1)
        for change in record.changes:
            apply_change(state, change)
            i += 1
            if change.op == "delete":
                add("step", f"Step {i}: Delete {change.key}", 1)
            else:
                add("step", f"Step {i}: Write {change.key} = {self.show(state[change.key])}", 1)
        for emitted, payload in record.emits:
            add("emit", f"[emit] {emitted}: {self.show(payload)}", 1)

    def _branch_name(self, record: CommitRecord, branch: str) -> str:
        node = self.chart.nodes.get(record.stage_id) if self.chart is not None else None
        if node is None or self.chart is None:
            return branch
        target = node.branches.get(branch)
        if target is None or target not in self.chart.nodes:
            return branch
        return self.chart.nodes[target].name

    def _decision(self, record: CommitRecord, add: Any) -> None:
        decision = record.decision or {}
        evidence = decision.get("evidence")
        if "selected" in decision:
            chosen = decision["selected"]
            node = self.chart.nodes.get(record.stage_id) if self.chart is not None else None
            total = len(node.branches) if node is not None else len(chosen)
            if evidence:
                parts = []
                for rule in evidence["rules"]:
                    if rule["matched"]:
                        label = f' "{rule["label"]}"' if rule.get("label") else ""
                        parts.append(f"{rule['branch']}{label} ({_conditions(rule)})")
                text = "; ".join(parts) if parts else "none"
            else:
                text = ", ".join(self._branch_name(record, b) for b in chosen) or "none"
            add("selected", f"[Selected]: {len(chosen)} of {total} paths selected: {text}.", 1)
            return
        chosen_branch = decision.get("fallback") or decision.get("chosen", "")
        chosen_name = self._branch_name(record, str(chosen_branch))
        if not evidence:
            add("condition", f"[Condition]: A decision was made, and the path taken was "
                f"{chosen_name}.", 1)
            return
        matched = [r for r in evidence["rules"] if r["matched"]]
        if not matched:
            errors = sum(1 for r in evidence["rules"] if r.get("error"))
            threw = f" ({errors} rule{'s' if errors != 1 else ''} threw errors)" if errors else ""
            add("condition", f"[Condition]: No rules matched{threw}, fell back to default: "
                f"{chosen_name}.", 1)
            return
        rule = matched[0]
        label = f'"{rule["label"]}"' if rule.get("label") else f"rule {rule['rule']}"
        verb = "evaluated" if rule.get("type") == "filter" else "examined"
        add("condition", f"[Condition]: It {verb} {label}: {_conditions(rule)}, and chose "
            f"{chosen_name}.", 1)


def _conditions(rule: dict[str, Any]) -> str:
    if rule.get("type") == "function":
        return ", ".join(f"{i['key']}={i['value']}" for i in rule.get("inputs", ())) or "no reads"
    return ", ".join(
        f"{c['key']} {c['actual']} {c['op']} {json.dumps(c['threshold'], default=str)} "
        f"{'✓' if c['result'] else '✗'}"
        for c in rule.get("conditions", ())
    )


def render_entries(log: CommitLog, chart: Chart | None = None) -> list[NarrativeEntry]:
    """Every narrative entry of a recorded run."""
    renderer = NarrativeRenderer(chart, log.initial)
    out: list[NarrativeEntry] = []
    for record in log.records:
        out.extend(renderer.feed(record))
    return out


def narrative(run: FlowRun) -> str:
    """The run as indented English lines."""
    return "\n".join("  " * e.depth + e.text for e in render_entries(run.log, run.chart))


class NarrativeRecorder:
    """The narrative of a run as it happens: ``entries`` covers every step committed so far.

    Records are kept as they commit and rendered when ``entries`` or ``text()`` is read, so
    a run pays for the English only if somebody reads it.
    """

    id = "narrative"

    def __init__(self, chart: Chart | None = None) -> None:
        self.chart = chart
        self._entries: list[NarrativeEntry] = []
        self._pending: list[CommitRecord] = []
        self._renderer = NarrativeRenderer(chart)

    def clear(self) -> None:
        self._entries = []
        self._pending = []
        self._renderer = NarrativeRenderer(self.chart)

    def on_run_start(self, event: FlowEvent) -> None:
        initial = (event.data or {}).get("initial")
        if initial is not None:
            self.clear()
            self._renderer = NarrativeRenderer(self.chart, initial)

    def on_commit(self, event: FlowEvent) -> None:
        self._pending.append(event.value)

    @property
    def entries(self) -> list[NarrativeEntry]:
        if self._pending:
            pending, self._pending = self._pending, []
            for record in pending:
                self._entries.extend(self._renderer.feed(record))
        return self._entries

    def text(self) -> str:
        return "\n".join("  " * e.depth + e.text for e in self.entries)
