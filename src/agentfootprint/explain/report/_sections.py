"""The report's lead line, per-call tool runs and usage, integrity findings and audit status.

Why a lead: a reader judges a page by its first line, so the page names what is proven before
anything else — the proven cause (from a live localization or the proof kept with the run),
or "not proven yet" and the exact command that proves it. Nothing on the page reads as a
verdict before it. Hooks for people and tests: ``#lead`` (``.proven`` / ``.not-proven`` /
``.failed``), ``.tool-runs`` with ``li.tool-run[data-tool]`` (``.args``, ``.result``),
``.call-usage[data-usage-call]``, ``#integrity`` (``li.finding``, ``tr.disposition``) and
``#audit`` (``data-chain``: ``verified`` / ``broken`` / ``no-chain`` / ``unchecked``).

Every run value is escaped here; nothing from the run reaches an attribute unescaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Literal

from ...runs._chain import check_chain_head
from ...runs._recording import Recording
from ...runs._usage import CallUsage, RunUsage
from .._integrity import ContextErrorReport
from .._kept import prove_command
from ._data import CallView, ReportData
from ._tool_runs import ToolRun

__all__ = ["AuditStatus", "audit_section", "audit_status", "call_usage_line", "integrity_section",
           "lead_html", "tool_runs_html", "usage_by_call"]

ChainState = Literal["verified", "broken", "no-chain", "unchecked"]


def _e(text: object) -> str:
    return escape(str(text), quote=True)


# -- the lead ----------------------------------------------------------------------------------


def lead_html(data: ReportData) -> str:
    """The page's first sentence: what is proven about this run, or how to prove it."""
    board = data.board
    if data.failure is not None:
        return (f'<p id="lead" class="lead failed"><b>RUN FAILED</b> — {_e(data.failure.error)}'
                f" (raised by {_e(data.failure.where)}). The error is the explanation: there is "
                'no answer to prove. <a href="#failure">The failure</a></p>')
    if data.pause is not None:
        return (f'<p id="lead" class="lead nothing paused"><b>RUN PAUSED</b> at '
                f"{_e(data.pause.where)} — {_e(data.pause.describe())}. It has no answer yet, "
                "so there is nothing to prove: the board traces what it stopped at. "
                '<a href="#board">The chain</a></p>')
    if board is None:
        return ('<p id="lead" class="lead none">This run made no LLM call: there is no answer '
                "to prove, only the path it took.</p>")
    if board.causes:
        names = "; ".join(cause.sentence() for cause in board.causes)
        lead = board.causes[0]
        without = (f' Without {"it" if lead.kind == "single" else "them"} the agent answered '
                   f"<q>{_e(_short(lead.answer_without))}</q>."
                   if lead.answer_without is not None else "")
        return (f'<p id="lead" class="lead proven"><b>PROVEN:</b> {_e(names)}.{without} '
                f'<a href="#proven">The proof</a></p>')
    command = f"<code>{_e(prove_command(data.run_id))}</code>"
    if board.reruns is None:
        return ('<p id="lead" class="lead not-proven"><b>Not proven yet.</b> No re-runs are '
                "kept with this run, so the suspects below are ranked by a proxy, not "
                f'convicted. Prove the cause with {command}. <a href="#board">The suspects</a></p>')
    if board.uncovered:
        return ('<p id="lead" class="lead not-proven"><b>Not proven yet.</b> The re-runs ran '
                f"out of budget before covering {_e(', '.join(board.uncovered))} (not innocent). "
                f'Prove further with {command} and a larger budget. <a href="#board">The '
                "suspects</a></p>")
    why = ("no suspect could be removed, so nothing was re-run" if board.baseline is None
           else "no removal of a suspect changed the answer as judged")
    return (f'<p id="lead" class="lead nothing"><b>Nothing proven:</b> {_e(why)}. '
            '<a href="#board">The suspects</a></p>')


def _short(text: str | None, limit: int = 160) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- per call: tool runs and usage --------------------------------------------------------------


def tool_runs_html(call: CallView) -> str:
    """The tool calls this call asked for: arguments and result, each escaped, as recorded."""
    if not call.tool_runs:
        return ""
    items = []
    for run in call.tool_runs:
        items.append(_tool_run(run))
    return (f"<h3>Tool calls ({len(call.tool_runs)}): arguments and results</h3>"
            f'<ol class="tool-runs">{"".join(items)}</ol>')


def _tool_run(run: ToolRun) -> str:
    status = f' <span class="status">{_e(run.status)}</span>' if run.status else ""
    ident = f" <small>{_e(run.call_id)}</small>" if run.call_id else ""
    result = (f'<pre class="result">{_e(run.result)}</pre>' if run.result is not None
              else '<p class="result empty">No result was recorded (the run stopped before '
                   "the tool ran).</p>")
    return (f'<li class="tool-run" data-tool="{_e(run.name)}">'
            f"<p class=\"tool-name\"><code>{_e(run.name)}</code>{ident}{status}</p>"
            f'<span class="caption">arguments</span><pre class="args">{_e(run.arguments)}</pre>'
            f'<span class="caption">result</span>{result}</li>')


def usage_by_call(calls: tuple[CallView, ...], usage: RunUsage) -> dict[int, CallUsage]:
    """Each call view's usage row: by position when the counts agree, else by nested agent and
    order within it (a call with no usage row shows none, never another call's)."""
    if len(usage.calls) == len(calls):
        return {view.index: row for view, row in zip(calls, usage.calls, strict=True)}
    rows: dict[str, list[CallUsage]] = {}
    for row in usage.calls:
        rows.setdefault(row.scope.rsplit("#", 1)[0] if row.scope else "", []).append(row)
    out: dict[int, CallUsage] = {}
    seen: dict[str, int] = {}
    for view in calls:
        at = seen.get(view.scope, 0)
        seen[view.scope] = at + 1
        mine = rows.get(view.scope, [])
        if at < len(mine):
            out[view.index] = mine[at]
    return out


def call_usage_line(row: CallUsage | None) -> str:
    """One line under a call's title: model, latency, tokens (cached apart), cost."""
    if row is None:
        return ""
    cost = ('<span class="unknown">cost unknown (no price)</span>' if row.cost_usd is None
            else f"${row.cost_usd:.6f}")
    latency = "latency —" if row.latency_ms is None else f"{row.latency_ms:.1f} ms"
    model = " · ".join(_e(part) for part in (row.provider, row.model) if part) or "model unknown"
    return (f'<p class="call-usage" data-usage-call="{row.call}"><b>{model}</b> · {latency} · '
            f"{row.input_tokens} input tokens ({row.cache_read_tokens} cache read, "
            f"{row.cache_write_tokens} cache written) · {row.output_tokens} output · {cost} "
            f'<a href="#usage">all calls</a></p>')


# -- integrity ----------------------------------------------------------------------------------


def integrity_section(report: ContextErrorReport | None) -> str:
    """Findings of ``find_context_errors`` and the disposition of every check."""
    head = '<section id="integrity"><h2>Context integrity</h2>'
    if report is None:
        return (head + '<p class="empty">The integrity checks could not read this run.</p>'
                "</section>")
    ran, total = len(report.ran), len(report.dispositions)
    if report.findings:
        css, text = "unstable", (f"{len(report.findings)} self-contradiction(s) found by "
                                 f"{ran} of {total} checks.")
    elif ran == total:
        css, text = "stable", f"No context error found: all {total} checks ran and found nothing."
    elif ran:
        css, text = "proxy", (f"No context error found by the {ran} of {total} checks that ran; "
                              f"{total - ran} could not run, so this covers only part of the run.")
    else:
        css, text = "proxy", "No check ran: this is no evidence either way, not a clean run."
    out = [head, f'<div class="banner {css}" id="integrity-verdict">{_e(text)}</div>']
    if report.findings:
        items = "".join(
            f'<li class="finding {_e(f.severity)}" data-check="{_e(f.check)}">'
            f'<span class="severity">{_e(f.severity)}</span> <b>{_e(f.check)}</b> — '
            f"{_e(f.explanation)}"
            f'<span class="caption">evidence</span><pre class="content">{_e(f.evidence)}</pre>'
            f'<span class="caption">sources</span> <code>{_e(", ".join(f.sources))}</code></li>'
            for f in report.findings)
        out.append(f'<ol class="findings">{items}</ol>')
    rows = "".join(
        f'<tr class="disposition {_e(d.status)}" data-check="{_e(d.check)}">'
        f"<td><code>{_e(d.check)}</code></td><td>{_e(_status(d.status, d.findings))}</td>"
        f"<td>{d.checked}</td><td>{_e(d.reason)}</td></tr>" for d in report.dispositions)
    out.append("<h3>Every check and what it did</h3>"
               '<div class="table-wrap"><table class="dispositions"><thead><tr><th>check</th>'
               "<th>disposition</th><th>items</th><th>why</th></tr></thead>"
               f"<tbody>{rows}</tbody></table></div>"
               '<p class="legend">Green means no check that ran was violated; it does not mean '
               "no context error exists.</p></section>")
    return "".join(out)


def _status(status: str, findings: int) -> str:
    return {"found": f"found {findings}", "nothing": "ran, found nothing",
            "could-not-run": "could not run"}.get(status, status)


# -- audit --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditStatus:
    """The run against the audit chain head kept with it."""

    state: ChainState
    sentence: str


def audit_status(recording: Recording, kept_head: str | None) -> AuditStatus:
    """``kept_head``: what the run store kept (``store.chain_head(run_id)``), or ``None``.

    The page states the verdict, not the hashes (they change with every run id and clock;
    ``agentfootprint audit export RUN_ID`` writes the chain and its head)."""
    if kept_head is None:
        return AuditStatus("no-chain", "No chain: no audit chain head was kept with this run "
                           "(or given to the report), so it is not checked against one.")
    check = check_chain_head(recording, kept_head)
    if check.status == "intact":
        return AuditStatus("verified", "Chain verified: the run matches the audit chain head "
                           "kept when it was saved.")
    if check.broken:
        return AuditStatus("broken", "Does not match its chain head: " + check.sentence)
    return AuditStatus("unchecked", "Chain not checked: " + check.sentence)


def audit_section(status: AuditStatus | None) -> str:
    """The ``#audit`` section (empty when no status was computed)."""
    if status is None:
        return ""
    css = {"verified": "stable", "broken": "unstable"}.get(status.state, "proxy")
    return (f'<section id="audit" data-chain="{_e(status.state)}"><h2>Audit chain</h2>'
            f'<div class="banner {css}">{_e(status.sentence)}</div>'
            '<p class="legend">The chain is tamper-evident once its head is published '
            "elsewhere or keyed: <code>agentfootprint audit export RUN_ID</code> writes it, "
            "<code>agentfootprint audit verify FILE</code> checks it.</p></section>")
