"""The report page: ``ReportData`` rendered as one self-contained HTML document.

Every value from the run is escaped where it is written (``html.escape`` on text and
attributes); nothing from the run is ever placed inside the script, the stylesheet or a URL.
Stable hooks for people and tests: ``#chart`` (``#chart-svg`` with ``.node.ran``), ``#timeline``
(``button.step.llm[data-call]``), ``#model-view`` (``article.call-view`` with ``mark.inj``
carrying ``data-source``), ``#board`` (``li.suspect``, ``.stamp``, ``mark.culprit``,
``#proven`` with ``.proven-cause`` and ``.without``; ``#failure`` for a failed run), ``#usage``;
``#lead``, ``.tool-runs``, ``.call-usage``, ``#integrity`` and ``#audit`` (see ``_sections.py``).

Responsive by construction: nothing is wider than the viewport at 390 px — the chart scrolls
inside its own box, tables scroll inside ``.table-wrap``, long values wrap.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from html import escape
from itertools import pairwise

from ...runs._usage import CallUsage, RunUsage
from .._failure import Failure
from .._integrity import ContextErrorReport
from .._kept import prove_command
from .._paused import Paused
from ._assets import CSS, JS, PALETTE_SIZE, content_security_policy
from ._chart_svg import member_charts, render_chart_svg
from ._data import Board, CallView, Culprit, ReportData, Span, SuspectCard
from ._sections import (
    AuditStatus,
    audit_section,
    call_usage_line,
    integrity_section,
    lead_html,
    tool_runs_html,
    usage_by_call,
)
from ._usage import usage_section

__all__ = ["render_page"]


def render_page(data: ReportData, *, usage: RunUsage | None = None,
                integrity: ContextErrorReport | None = None,
                audit: AuditStatus | None = None) -> str:
    """The whole document: ``usage`` (``runs.usage_of``), ``integrity``
    (``find_context_errors``) and ``audit`` (the run against its kept chain head) add their
    sections and per-call lines."""
    colours = _Colours()
    per_call = usage_by_call(data.calls, usage) if usage is not None else {}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Why? — {_e(data.name)} · run {_e(data.run_id)}</title>",
        f"<style>{CSS}</style></head><body>",
        _header(data),
        "<main>",
        _chart_section(data),
        _timeline_section(data),
        _model_section(data, colours, per_call),
        usage_section(usage) if usage is not None else "",
        _board_section(data, colours),
        integrity_section(integrity) if data.calls or integrity is not None else "",
        audit_section(audit),
        "</main>",
        f"<script>{JS}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


class _Colours:
    """One palette slot per source, stable across the page."""

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}

    def of(self, source: str) -> str:
        slot = self._slots.setdefault(source, len(self._slots) % PALETTE_SIZE)
        return f"src-{slot}"


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _header(data: ReportData) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data.created_at))
    rows = [("run", data.run_id), ("status", f"{data.status} · {data.kind} run · {when}")]
    if data.question is not None:
        rows.append(("question", data.question))
    agent = data.kind == "agent" or bool(data.calls)
    if data.failure is not None:
        rows.append(("error", data.failure.error))
        rows.append(("raised by", data.failure.where))
    elif data.pause is not None:
        rows.append(("paused at", data.pause.where))
        rows.append(("waiting on", data.pause.describe()))
    elif agent or data.answer:
        rows.append(("answer" if agent else "output", data.answer))
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    title = (f"Why did {_e(data.name)} fail?" if data.failure is not None
             else f"Why did {_e(data.name)} pause?" if data.pause is not None
             else f"Why did {_e(data.name)} answer this?" if agent
             else f"What {_e(data.name)} did, and why")
    return (f'<header class="top"><h1>{title}</h1>{lead_html(data)}'
            f"<dl>{items}</dl>"
            '<nav><a href="#chart">chart</a><a href="#timeline">timeline</a>'
            '<a href="#model-view">what the model saw</a>'
            + ('<a href="#usage">usage and cost</a>' if data.calls else "")
            + '<a href="#board">backtrack board</a>'
            + ('<a href="#integrity">integrity</a>' if data.calls else "")
            + '<a href="#audit">audit</a></nav></header>')


def _chart_section(data: ReportData) -> str:
    ran = sum(1 for _ in data.chart_run.runs)
    return ('<section id="chart"><h2>The chart, with the executed path lit</h2>'
            f'<p class="legend">{ran} stage(s) ran.<span class="swatch lit"></span>ran '
            '(×N: how many times)<span class="swatch idle"></span>did not run · '
            "click a stage to find it on the timeline</p>"
            f'<div class="chart-wrap">{render_chart_svg(data.chart, data.chart_run)}</div>'
            f"{_members(data)}</section>")


def _members(data: ReportData) -> str:
    inner = member_charts(data.chart, data.chart_run)
    if not inner:
        return ""
    return ('<p class="legend">Each agent of the composition is one box (▸); open one to see '
            f'its own stages.</p><div class="members">{inner}</div>')


def _timeline_section(data: ReportData) -> str:
    groups = []
    for group in data.timeline:
        steps = []
        for step in group.steps:
            css = f"step {_e(step.kind)}" + (" failed" if step.failed else "")
            inner = (f"{_e(step.name)} <small>{_e(step.runtime_stage_id)}</small>"
                     + (f'<span class="detail">{_e(step.detail)}</span>' if step.detail else ""))
            attrs = (f'data-stage-id="{_e(step.stage_id)}" '
                     f'data-rid="{_e(step.runtime_stage_id)}"')
            if step.call_index is not None:
                steps.append(f'<li><button type="button" class="{css} llm" '
                             f'data-call="{step.call_index}" {attrs} aria-pressed="false" '
                             f'title="show what the model saw">{inner}</button></li>')
            else:
                steps.append(f'<li><div class="{css}" {attrs}>{inner}</div></li>')
        groups.append(f'<li class="iteration"><h3>{_e(group.label)}</h3>'
                      f'<ol class="steps">{"".join(steps)}</ol></li>')
    body = (f'<ol class="iterations">{"".join(groups)}</ol>' if groups
            else '<p class="empty">No step was recorded.</p>')
    return ('<section id="timeline"><h2>Timeline</h2>'
            '<p class="legend">Every executed step, grouped by iteration. Click an LLM call '
            "to see exactly what the model saw.</p>" + body + "</section>")


def _model_section(data: ReportData, colours: _Colours,
                   per_call: dict[int, CallUsage]) -> str:
    if not data.calls:
        return ('<section id="model-view"><h2>What the model saw</h2>'
                '<p class="empty">This run made no LLM call.</p></section>')
    shown = data.board.call_index if data.board and data.board.call_index is not None else (
        data.calls[-1].index)
    culprit = data.board.culprit if data.board else None
    tabs = "".join(
        f'<button type="button" class="call-tab{" selected" if c.index == shown else ""}" '
        f'data-call="{c.index}" aria-pressed="{"true" if c.index == shown else "false"}">'
        f"{_e(_call_title(c))}</button>" for c in data.calls)
    views = []
    for call in data.calls:
        mark = culprit if call.index == shown else None
        views.append(
            f'<article class="call-view" id="call-{call.index}" data-call-index="{call.index}" '
            f'data-rid="{_e(call.runtime_stage_id)}"{"" if call.index == shown else " hidden"}>'
            f"<header>{_e(_call_title(call))}"
            f"{_call_role(call, data)}</header>{call_usage_line(per_call.get(call.index))}"
            + _call_body(call, colours, mark) + "</article>")
    return ('<section id="model-view"><h2>What the model saw</h2>'
            '<p class="legend">Exactly what each call sent, rebuilt from the recording. Each '
            "injected piece is marked with its source.</p>"
            f'<div class="call-tabs">{tabs}</div>{"".join(views)}</section>')


def _call_role(call: CallView, data: ReportData) -> str:
    if call.failed is not None:
        return " — the call that failed (the run has no answer)"
    pause = data.pause
    if pause is not None:  # a paused run has no answer: no call produced one
        asked = pause.call is not None and pause.call.runtime_stage_id == call.runtime_stage_id
        return " — the call that asked for the pending tool call" if asked else ""
    return " — the call that produced the answer" if call.is_final else ""


def _call_title(call: CallView) -> str:
    parts = [call.runtime_stage_id]
    if call.scope:
        parts.append(call.scope)
    if call.iteration is not None:
        parts.append(f"iteration {call.iteration}")
    return " · ".join(parts)


def _call_body(call: CallView, colours: _Colours, culprit: Culprit | None) -> str:
    out = ["<h3>System prompt</h3>", _system_html(call, colours, culprit)]
    out.append(f"<h3>Messages ({len(call.messages)})</h3>")
    out.append(_messages_html(call, colours, culprit))
    if call.tools:
        items = "".join(
            f"<li><code>{_e(name)}</code>"
            + (f" — offered by <b>{_e(source)}</b>" if source else "") + "</li>"
            for name, source in call.tools)
        out.append(f'<h3>Tools offered ({len(call.tools)})</h3><ul class="tools">{items}</ul>')
    if call.injections:
        rows = "".join(
            f'<tr data-source="{_e(r.id)}"><td><b>{_e(r.id)}</b></td><td>{_e(r.flavor)}</td>'
            f"<td>{_e(r.trigger)}</td>"
            f'<td class="{"fired" if r.fired else "held"}">{"fired" if r.fired else "held"}</td>'
            f"<td>{_e(r.reason)}</td><td>{_e('; '.join(r.landed) or '—')}</td></tr>"
            for r in call.injections)
        out.append("<h3>Injections (who let each in, and how it landed)</h3>"
                   '<div class="table-wrap"><table class="injections"><thead><tr><th>source</th>'
                   "<th>flavor</th><th>trigger</th><th>this call</th><th>why</th><th>landed</th>"
                   f"</tr></thead><tbody>{rows}</tbody></table></div>")
    if call.failed is not None:
        out.append("<h3>The call failed — the model gave no answer</h3>"
                   f'<pre class="answer failed">{_e(call.failed)}</pre>')
        return "".join(out)
    answer = call.answer or ("(asked for " + ", ".join(call.asked_tools) + ")"
                             if call.asked_tools else "")
    out.append(f'<h3>The model answered</h3><pre class="answer">{_e(answer)}</pre>')
    out.append(tool_runs_html(call))
    return "".join(out)


def _system_html(call: CallView, colours: _Colours, culprit: Culprit | None) -> str:
    if not call.system:
        return '<p class="empty">No system prompt.</p>'
    where = (culprit.start, culprit.end) if culprit and culprit.message_index is None else None
    return f'<pre class="prompt system">{_marked(call.system, call.spans, where, colours)}</pre>'


def _messages_html(call: CallView, colours: _Colours, culprit: Culprit | None) -> str:
    if not call.messages:
        return '<p class="empty">No messages.</p>'
    items = []
    for message in call.messages:
        where = ((culprit.start, culprit.end)
                 if culprit and culprit.message_index == message.index else None)
        kind = "injected" if message.source and message.role != "tool" else ""
        label = {"tool": "tool result", "assistant": "assistant", "user": "user"}.get(
            message.role, message.role)
        if kind:
            label = f"{message.role} · injected"
        source = (f'<span class="src">{_e(message.source)}</span>' if message.source else "")
        content = _marked(message.content, (), where, colours)
        if message.tool_calls:
            content += _e(("\n" if message.content else "")
                          + "→ asks for " + ", ".join(message.tool_calls))
        attrs = f' data-source="{_e(message.source)}"' if message.source else ""
        items.append(f'<li class="msg role-{_e(message.role)} {kind}"{attrs}>'
                     f'<span class="role">{_e(label)}{source}</span>'
                     f'<pre class="content">{content}</pre></li>')
    return f'<ol class="messages">{"".join(items)}</ol>'


def _marked(text: str, spans: Iterable[Span], culprit: tuple[int, int] | None,
            colours: _Colours) -> str:
    """``text`` escaped, each span wrapped in a mark naming its source, the culprit highlighted.

    Pieces are cut at every boundary, so a culprit mark never crosses a source mark.
    """
    spans = list(spans)
    cuts = {0, len(text)}
    for each in spans:
        cuts.update((each.start, each.end))
    if culprit is not None:
        cuts.update(culprit)
    points = sorted(c for c in cuts if 0 <= c <= len(text))
    out: list[str] = []
    open_span: Span | None = None
    for start, end in pairwise(points):
        span: Span | None = next((s for s in spans if s.start <= start and end <= s.end), None)
        if span is not open_span:
            if open_span is not None:
                out.append("</mark>")
            if span is not None:
                css = "inj base" if span.source == "base" else f"inj {colours.of(span.source)}"
                label = ("base prompt" if span.source == "base"
                         else f"{span.flavor} · {span.source}" if span.flavor else span.source)
                out.append(f'<mark class="{css}" data-source="{_e(span.source)}" '
                           f'data-flavor="{_e(span.flavor)}" data-label="{_e(label)}" '
                           f'title="{_e(label)}">')
            open_span = span
        chunk = _e(text[start:end])
        if culprit is not None and culprit[0] <= start and end <= culprit[1]:
            chunk = f'<mark class="culprit">{chunk}</mark>'
        out.append(chunk)
    if open_span is not None:
        out.append("</mark>")
    return "".join(out)


def _board_section(data: ReportData, colours: _Colours) -> str:
    head = '<section id="board"><h2>Backtrack board</h2>'
    board = data.board
    if board is None:
        return head + '<p class="empty">This run made no LLM call: there is no answer to ' \
                      "backtrack.</p></section>"
    if board.failure is not None:
        return head + _failure_board(data, board, board.failure, colours) + "</section>"
    if board.pause is not None:
        return head + _pause_board(data, board, board.pause, colours) + "</section>"
    out = [head]
    banner: list[str] = []
    tiers = (f'<p class="tiers">Scores are a <b>proxy</b> ({_e(board.strategy)}): they '
             "order the suspects for re-runs and convict no one. Only isolated re-runs "
             "stamp CAUSAL — the answer flips without a source more often than with "
             "nothing removed, at a stated false-positive rate.</p>")
    if board.reruns is None:
        banner.append('<div class="banner proxy" id="not-proven">Nothing is proven yet: no '
                      "re-runs are kept for this run, so every line below is a proxy. Prove a "
                      f"cause with <code>{_e(prove_command(data.run_id))}</code> (or "
                      "<code>localize_context_bug(...)</code>).</div>")
    elif board.baseline is None:
        banner.append('<div class="banner proxy">No suspect could be removed, so nothing was '
                      "re-run: every line below is a proxy.</div>")
    else:
        flips, _, runs = board.baseline.partition("/")
        stable = not (flips.isdigit() and runs.isdigit() and int(flips) * 2 > int(runs))
        banner.append(f'<div class="banner {"stable" if stable else "unstable"}" id="baseline">'
                      f"Baseline: {_e(board.baseline)} re-runs flipped with nothing removed — "
                      + ("stable." if stable else "UNSTABLE: the answer is not reproducible, so "
                         "nothing could be proven.")
                      + (f" {_e(board.rule[:1].upper() + board.rule[1:])}." if board.rule
                         else "") + "</div>")
    out.append(_proven(board))  # the proof first, then how it was judged, then the proxy
    out.extend(banner)
    out.append(tiers)
    if board.confidence:
        out.append(f'<p class="note">{_e(board.confidence)}</p>')
    heading = ("The chain, from the answer back to the proven cause" if board.causes
               and board.culprit is not None and board.culprit.proven
               else "The chain, from the answer back to where it was born")
    out.append(f"<h3>{_e(heading)}</h3>")
    if board.follow_note:
        out.append(f'<p class="note">{_e(board.follow_note)}</p>')
    out.append(_hops(board))
    out.append(f"<h3>Suspects ({len(board.cards)}) that reached the call</h3>")
    out.append('<ol class="suspects">'
               + "".join(_card(card, board) for card in board.cards) + "</ol>")
    if board.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in board.notes)
                   + "</ul>")
    out.append(_exact_prompt(data, board, colours))
    out.append("</section>")
    return "".join(out)


def _proven(board: Board) -> str:
    """The proven causes, each with the answer the agent gave without it, and the criterion."""
    if board.reruns is None or board.baseline is None:
        return ""
    items = []
    for cause in board.causes:
        without = (f'<p class="without">Without {"it" if cause.kind == "single" else "them"} '
                   f"the agent answered: <q>{_e(cause.answer_without)}</q></p>"
                   if cause.answer_without is not None else "")
        items.append(f'<div class="proven-cause" data-members="{_e(" ".join(cause.members))}" '
                     f'data-kind="{_e(cause.kind)}"><p class="headline">PROVEN: '
                     f"{_e(cause.sentence())}.</p>"
                     + (f'<p class="why">{_e(cause.why)}</p>' if cause.why else "")
                     + without + "</div>")
    if not items:
        items.append('<div class="banner proxy">Nothing proven: no removal of the suspects '
                     "changed the answer as judged.</div>")
    criterion = (f'<p class="criterion">Judged wrong when {_e(board.criterion)}.</p>'
                 if board.criterion else "")
    return f'<div id="proven">{"".join(items)}{criterion}</div>'


def _hops(board: Board) -> str:
    return '<ol class="hops">' + "".join(
        f'<li class="hop" data-kind="{_e(hop.kind)}"><span class="hop-kind">{_e(hop.kind)}'
        f"</span><span>{_e(hop.text)}"
        + (f" <code>{_e(hop.runtime_stage_id)}</code>" if hop.runtime_stage_id else "")
        + "</span></li>" for hop in board.hops) + "</ol>"


def _pause_board(data: ReportData, board: Board, pause: Paused, colours: _Colours) -> str:
    """A paused run: what it stopped at, and (for a pending tool call) the chain from the call
    that asked for it, with the candidates ranked against it — proxies, nothing proven."""
    out = [f'<div class="banner proxy paused" id="pause"><b>RUN PAUSED</b> at '
           f"{_e(pause.where)} — {_e(pause.describe())}. The run has no answer yet, so "
           "there is none to trace and nothing to prove: what it stopped at is the "
           "explanation.</div>"]
    if not board.cards:
        out.append("<h3>The pause, and what the step read</h3>")
        out.append(_hops(board))
        return "".join(out)
    out.append(f'<p class="tiers">Scores are a <b>proxy</b> ({_e(board.strategy)}) of how '
               "much each source resembles the pending tool call: they convict no one.</p>")
    out.append("<h3>The chain, from the pending tool call back to where its context was "
               "born</h3>")
    out.append(_hops(board))
    out.append(f"<h3>Suspects ({len(board.cards)}) that reached the call that asked for "
               "it</h3>")
    out.append('<ol class="suspects">'
               + "".join(_card(card, board) for card in board.cards) + "</ol>")
    out.append(_exact_prompt(data, board, colours))
    return "".join(out)


def _failure_board(data: ReportData, board: Board, failure: Failure,
                   colours: _Colours) -> str:
    """A failed run: the error, where it was raised, the context at that moment."""
    out = [f'<div class="banner failed" id="failure"><b>RUN FAILED</b> — '
           f"{_e(failure.error)} — raised by {_e(failure.where)}. The run gave no answer, so "
           "there is none to trace and nothing to prove: the error is the explanation.</div>",
           "<h3>The failure, and the context at that moment</h3>", _hops(board)]
    call = next((c for c in data.calls if c.index == board.call_index), None)
    if call is not None:
        caption = ("the request that failed" if call.failed is not None
                   else "the last LLM call before the failure")
        out.append(f"<h3>The exact prompt of {_e(call.runtime_stage_id)} — {_e(caption)}</h3>"
                   f'<div class="exact-prompt" data-for-call="{call.index}">'
                   + _system_html(call, colours, None)
                   + _messages_html(call, colours, None) + "</div>")
    return "".join(out)


def _card(card: SuspectCard, board: Board) -> str:
    css = ["suspect"]
    if card.verdict == "CAUSAL":
        css.append("causal")
    if card.followed:
        css.append("followed")
    score = "n/a" if card.score is None else f"{card.score:.3f}"
    if card.verdict is not None:
        stamp_css = card.verdict.lower().replace(" ", "-")
        stamp = (f'<span class="stamp {stamp_css}">{_e(card.verdict)} '
                 f"{_e(card.fraction or '')}</span>")
    elif board.reruns is None:
        stamp = '<span class="stamp none">not re-run</span>'
    else:
        reason = "cannot be removed" if not card.removable else "not re-run"
        stamp = f'<span class="stamp none">no verdict — {reason}</span>'
    sentence = f'<q class="sentence">{_e(card.sentence)}</q>' if card.sentence else ""
    why = f'<p class="why">{_e(card.why)}</p>' if card.why else ""
    if card.answer_without is not None:
        why += (f'<p class="without">Without it the agent answered: '
                f"<q>{_e(card.answer_without)}</q></p>")
    followed = ' <span class="tier">followed</span>' if card.followed else ""
    return (f'<li class="{" ".join(css)}" data-source="{_e(card.source)}" '
            f'data-kind="{_e(card.kind)}" data-verdict="{_e(card.verdict or "")}">'
            f'<span class="rank">#{card.rank}</span><span class="label">{_e(card.label)}</span>'
            f'{followed}<span class="score">score {score} <span class="tier">proxy</span>'
            f"</span>{stamp}{sentence}{why}</li>")


def _exact_prompt(data: ReportData, board: Board, colours: _Colours) -> str:
    call = next((c for c in data.calls if c.index == board.call_index), None)
    if call is None:
        return ""
    culprit = board.culprit
    if culprit is None and any(hop.kind == "OVERLAP" for hop in board.hops):
        caption = "no source shares a word with it, so none is highlighted"
    elif culprit is None:
        caption = "no culprit sentence could be placed in the prompt"
    elif culprit.proven:
        either = next((c for c in board.causes if culprit.source in c.members
                       and c.kind == "either"), None)
        caption = (f"the proven cause, {culprit.source!r}, highlighted" if either is None
                   else f"{culprit.source!r} highlighted, one of the proven set "
                        f"{{{', '.join(either.members)}}}")
    else:
        caption = (f"the best-ranked source, {culprit.source!r}, highlighted "
                   "(a proxy, not proven)")
    return (f'<h3>The exact prompt of {_e(call.runtime_stage_id)} — {_e(caption)}</h3>'
            f'<div class="exact-prompt" data-for-call="{call.index}">'
            + _system_html(call, colours, culprit)
            + _messages_html(call, colours, culprit) + "</div>")
