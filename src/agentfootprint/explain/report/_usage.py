"""The report's usage section: every model call's latency, tokens (cached ones apart) and cost.

Read with ``runs.usage_of`` (what ``RunResult.usage`` and the run store's ``llm_calls`` table
read), so the three agree. A cost the price table does not know is shown as unknown, never as
$0; a budget the run crossed is named with the call it crossed at. Hook for people and tests:
``#usage`` with one ``tr.call`` per LLM call (``data-call``) and a ``tr.total``.
"""

from __future__ import annotations

from html import escape

from ...runs._usage import RunUsage

__all__ = ["usage_section"]


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _usd(value: float | None) -> str:
    return '<span class="unknown">unknown</span>' if value is None else f"${value:.6f}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


def usage_section(usage: RunUsage) -> str:
    """The ``#usage`` section; empty for a run that made no model call."""
    if not usage.calls:
        return ""
    rows = []
    for call in usage.calls:
        where = f" <small>{_e(call.scope)}</small>" if call.scope else ""
        rows.append(
            f'<tr class="call" data-call="{call.call}"><td>{call.call}{where}</td>'
            f"<td>{_e(call.iteration if call.iteration is not None else '')}</td>"
            f"<td>{_e(call.provider)}</td><td>{_e(call.model)}</td>"
            f"<td>{_ms(call.latency_ms)}</td><td>{call.input_tokens}</td>"
            f"<td>{call.cache_read_tokens}</td><td>{call.cache_write_tokens}</td>"
            f"<td>{call.output_tokens}</td><td>{_usd(call.cost_usd)}</td></tr>")
    rows.append(
        f'<tr class="total"><th colspan="4">all {len(usage.calls)} call(s)</th>'
        f"<th>{_ms(usage.latency_ms)}</th><th>{usage.input_tokens}</th>"
        f"<th>{usage.cache_read_tokens}</th><th>{usage.cache_write_tokens}</th>"
        f"<th>{usage.output_tokens}</th><th>{_usd(usage.cost_usd)}</th></tr>")
    notes = []
    if usage.unpriced:
        notes.append(f'<p class="note">Cost unknown: no price for '
                     f"{_e(', '.join(usage.unpriced))} (give one with "
                     "<code>Budget(prices={model: Price(...)})</code>).</p>")
    notes.extend(f'<p class="banner proxy">{_e(sentence)}</p>' for sentence in usage.budget)
    head = ("<tr><th>call</th><th>iteration</th><th>provider</th><th>model</th>"
            "<th>latency</th><th>input</th><th>cache read</th><th>cache written</th>"
            "<th>output</th><th>cost (USD)</th></tr>")
    return ('<section id="usage"><h2>Usage and cost</h2>'
            '<p class="legend">Tokens per model call: input counts every prompt token, '
            "cached ones included; cache read / written say how many came from or went into "
            "the provider's prompt cache.</p>"
            f'<div class="table-wrap"><table><thead>{head}</thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
            + "".join(notes) + "</section>")
