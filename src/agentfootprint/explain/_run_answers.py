"""The whole-run answers of the trace toolpack: integrity, backtrack, narrative, inner runs.

``trace_answers.py`` answers questions about one step or key; these four read the run as a
whole (or descend into an agent that ran as a tool) and reuse the explain layer's own
functions, so a model reads the same text ``find_context_errors``, ``backtrack`` and
``narrative`` give a person:

    find_context_errors(check?)        the integrity findings and every check's disposition
    backtrack(suspect?)                the chain from the answer to the context that reached it
    read_narrative(from_line?, ...)    the run in plain English, a page of lines at a time
    inspect_tool_run(tool_call_id, …)  an agent used as a tool: its inner run's steps, answer
                                       and tool calls, one inner step or inner tool call

Redaction: values come from the recording, which the run already redacted. These answers quote
the answer, the prompt and tool results as a whole, so when the reader's own ``redaction=``
masks a key the run left readable they refuse (naming the per-step tools that mask it) rather
than serve it; ``inspect_tool_run`` reads the inner run through a view with the same policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..flow._narrative import render_entries
from ..flow._values import MISSING
from ..runs import trace
from ._backtrack import backtrack
from ._integrity import CHECKS, find_context_errors
from ._trace_answers import Answer, TraceAnswers, clamp
from ._trace_view import TraceLookupError, TraceView, preview

__all__ = ["RunAnswers"]

_NARRATIVE_LINES: Final = 40
_NARRATIVE_CAP: Final = 200
_LINE_CHARS: Final = 400
_BOUNDARY: Final = "⚠ boundary:"
"""How ``inspect_tool_call`` says a tool's inside is not traced (replaced for agent tools)."""


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


class RunAnswers:
    """The four whole-run answers over one ``TraceView``."""

    def __init__(self, view: TraceView, grounds: Mapping[str, Iterable[str]] | None = None
                 ) -> None:
        self.view = view
        self.grounds = grounds

    def _refuse_if_masked(self, tool: str) -> None:
        """Refuse when the reader masks keys the run recorded readable (names only)."""
        view = self.view
        if view.policy is None:
            return
        masked = sorted({k for keys in view.keys.values() for k in keys
                         if view.policy.is_redacted(k)} - set(view.run.steps.redacted))
        if masked:
            raise TraceLookupError(
                f"⚠ {tool} quotes the run's answer, prompt and tool results as a whole, and "
                f"your redaction= masks keys this run recorded readable ({', '.join(masked[:8])})"
                "; it is not served. trace_node, who_wrote and get_value serve those steps "
                "with the keys masked.")

    # -- find_context_errors ----------------------------------------------------------------

    def context_errors(self, args: dict[str, Any]) -> Answer:
        self._refuse_if_masked("find_context_errors")
        wanted = _text(args.get("check"))
        if wanted and wanted not in CHECKS:
            raise TraceLookupError(f"unknown check; the checks are: {', '.join(CHECKS)}.")
        report = find_context_errors(self.view.recording, grounds=self.grounds)
        text = str(report)
        if wanted:
            found = report.of(wanted)
            row = next(d for d in report.dispositions if d.check == wanted)
            lines = [f"{wanted}: {len(found)} finding(s)", *(f.line() for f in found),
                     "CHECK:", row.line()]
            text = "\n".join(lines)
        hint = ("NEXT: trace_node('<step id>') for a step named in sources · "
                "inspect_tool_call('<tool_call id>') · backtrack() for what the answer rests on")
        return f"{text}\n{hint}", "find_context_errors(...)"

    # -- backtrack --------------------------------------------------------------------------

    def backtrack(self, args: dict[str, Any]) -> Answer:
        self._refuse_if_masked("backtrack")
        suspect = _text(args.get("suspect")) or None
        recording = self.view.recording
        try:
            chain = backtrack(recording, suspect=suspect)
        except KeyError:
            ranked = backtrack(recording).ranked
            ids = list(dict.fromkeys(item.suspect.id for item in ranked))
            raise TraceLookupError(
                "unknown suspect: no source by that id reached the answering call. Sources "
                f"that did ({len(ids)}): {', '.join(ids[:12]) or 'none'}.") from None
        except ValueError:
            raise TraceLookupError(
                "backtrack follows an agent's answer to its context, and this run made no LLM "
                "call; trace_slice('<step id>') walks a flow run's causes.") from None
        text = str(chain)
        target = "the pending tool call" if chain.pause is not None else "the answer"
        text += (f"\n⚠ the chain follows the best proxy score (similarity to {target}): "
                 "evidence, not a cause — only re-runs (agentfootprint prove) prove one."
                 if suspect is None and chain.suspect is not None else "")
        text += "\nNEXT: trace_node('<step id>') on a hop · backtrack(suspect='<id>') follows " \
                "another candidate"
        return text, "backtrack(...)"

    # -- read_narrative ---------------------------------------------------------------------

    def narrative(self, args: dict[str, Any]) -> Answer:
        self._refuse_if_masked("read_narrative")
        entries = render_entries(self.view.log)
        start = clamp(args.get("from_line"), 0, 0, None)
        count = clamp(args.get("max_lines"), _NARRATIVE_LINES, 1, _NARRATIVE_CAP)
        total = len(entries)
        if total and start >= total:
            raise TraceLookupError(f"from_line={start} is past the end: the narrative has "
                                   f"{total} lines (0–{total - 1}).")
        lines = []
        for number, entry in enumerate(entries[start:start + count], start):
            text = entry.text if len(entry.text) <= _LINE_CHARS else \
                entry.text[:_LINE_CHARS] + "…"
            lines.append(f"{number:>4} {'  ' * entry.depth}{text}")
        end = start + len(lines)
        head = f"NARRATIVE lines {start}–{max(end - 1, start)} of {total}"
        tail = (f"more: read_narrative(from_line={end})" if end < total
                else "(end of narrative)")
        return "\n".join([head, *lines, tail]), f"read_narrative(from_line={start})"

    # -- inspect_tool_call, with the way inside --------------------------------------------

    def tool_call(self, answers: TraceAnswers, args: dict[str, Any]) -> Answer:
        """``inspect_tool_call``; for an agent that ran as a tool, the boundary line becomes
        the way into its inner run (kept) or says the inner run was not kept."""
        text, again = answers.tool_call(args)
        wanted = _text(args.get("tool_call_id"))
        sub = self.view.run.sub_runs.get(wanted)
        if sub is None:
            return text, again
        inside = (f"inside: agent run {sub.run_id} — inspect_tool_run('{wanted}') shows its "
                  "steps, tool calls and answer" if sub.recording is not None else
                  f"inside: agent run {sub.run_id} ⚠ its recording was not kept with this run")
        lines = [inside if line.startswith(_BOUNDARY) else line for line in text.splitlines()]
        return "\n".join(lines), again

    # -- inspect_tool_run -------------------------------------------------------------------

    def tool_run(self, args: dict[str, Any]) -> Answer:
        view = self.view
        wanted = _text(args.get("tool_call_id"))
        subs = view.run.sub_runs
        sub = subs.get(wanted)
        if sub is None:
            call = view.tool_calls().get(wanted)
            if call is not None:
                raise TraceLookupError(
                    f"tool call {wanted} ('{call['name']}') did not run an agent: no inner run "
                    f"is linked to it. inspect_tool_call('{wanted}') shows its arguments, "
                    "outcome and result.")
            known = [f"{cid} ({s.tool})" for cid, s in subs.items()]
            raise TraceLookupError(
                "unknown tool_call_id for an inner run. "
                + (f"Tool calls that ran an agent ({len(known)}): {', '.join(known[:8])}."
                   if known else "No tool call of this run ran an agent as a tool."))
        head = (f"INNER RUN {sub.run_id} — agent tool '{sub.tool}', called by {wanted}\n"
                "⚠ inner step ids and tool call ids are a different namespace: pass them back "
                "here (runtime_stage_id=, inner_tool_call_id=), never to trace_node.")
        if sub.recording is None:
            raise TraceLookupError(
                f"{head}\nits recording was not kept with this run (redacted or unreadable), "
                "so only the link is known; inspect_tool_call shows the outer call.")
        inner = TraceView(sub.recording, redaction=view.policy)
        answers = TraceAnswers(inner)
        again = f"inspect_tool_run('{wanted}')"
        step = _text(args.get("runtime_stage_id"))
        if step:
            body, _ = answers.node({"runtime_stage_id": step})
            return f"{head}\n{body}", again
        inner_call = _text(args.get("inner_tool_call_id"))
        if inner_call:
            body, _ = answers.tool_call({"tool_call_id": inner_call})
            return f"{head}\n{body}", again
        return f"{head}\n{_summary(inner)}", again


def _summary(inner: TraceView) -> str:
    """The inner run in brief: its steps, LLM calls, tool calls and answer."""
    rec = inner.recording
    log = inner.log
    lines = [f'"{rec.name}" · status: {rec.status} · {len(inner.steps)} steps executed']
    llm = inner.runs_of.get(trace.CALL_LLM, [])
    lines.append(f"LLM CALLS ({len(llm)}): {', '.join(llm[:12])}" + (" …" if len(llm) > 12
                                                                      else ""))
    steps = list(inner.steps)
    lines.append("STEPS: " + ", ".join(steps[:30]) + (" …" if len(steps) > 30 else ""))
    calls = inner.tool_calls()
    lines.append(f"TOOL CALLS ({len(calls)}):" if calls else "TOOL CALLS: none")
    for cid, call in list(calls.items())[:12]:
        result = call.get("result", MISSING)
        shown = "⚠ not found" if result is MISSING else preview(result, 120)
        lines.append(f"  - {cid} '{call['name']}' args {preview(call.get('args'), 120)} → "
                     f"{call.get('status') or '⚠ unknown'}: {shown}")
    answer = inner.value(trace.FINAL_CONTENT, len(log.records) - 1) if log.records else MISSING
    lines.append("ANSWER: " + ("⚠ none recorded" if answer is MISSING
                               else preview(answer, 400)))
    lines.append("NEXT: runtime_stage_id='<inner step>' for one inner step · "
                 "inner_tool_call_id='<id>' for one inner tool call")
    return "\n".join(lines)
