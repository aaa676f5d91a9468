"""The run browser's pages as HTML text: the runs list, one run, and a one-sentence problem.

Everything a recording or a request holds is escaped here (``_e``), and shown as the store keeps
it — a run recorded under redaction lists and reports masked. ``root`` is the path the app is
mounted at (``""`` standalone), so the same pages work inside another app.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote, urlencode

from ...flow._display import terminal_text
from ._query import RunFilter, RunPage

__all__ = ["Choice", "RunFacts", "problem_page", "run_page", "runs_page"]


@dataclass(frozen=True, slots=True)
class Choice:
    """A saved criterion the prove form offers: its form key and what it says."""

    key: str
    describe: str


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the run page shows beside the report."""

    run_id: str
    name: str
    kind: str
    status: str
    created_at: float
    answer: str | None
    usage: str
    kept: Sequence[str]
    """The latest kept proof's lines (empty: nothing proven yet)."""
    can_prove: str | None
    """``None`` when the agent can be rebuilt; else the sentence saying why it cannot."""
    choices: Sequence[Choice]
    job: str | None
    """A prove job queued or under way for this run."""


def _e(value: object) -> str:
    return escape(terminal_text(str(value)), quote=True)


def _text(value: str) -> str:
    """Escaped, line breaks kept (every other control character shown escaped)."""
    return "\n".join(_e(line) for line in value.split("\n"))


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _run_href(root: str, run_id: str) -> str:
    return f"{root}/runs/{quote(run_id, safe='')}"


def _document(root: str, title: str, store: str, body: str) -> str:
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta name=\"referrer\" content=\"no-referrer\">"
        f"<title>{_e(title)} · agentfootprint</title>"
        f"<link rel=\"stylesheet\" href=\"{_e(root)}/static/browser.css\">"
        f"<script src=\"{_e(root)}/static/browser.js\" defer></script></head><body>"
        f"<header class=\"top\"><a href=\"{_e(root)}/\">agentfootprint runs</a>"
        f"<span class=\"store\">{_e(store)}</span></header><main>{body}</main></body></html>\n")


def problem_page(root: str, store: str, status: int, sentence: str) -> str:
    """A 4xx page: the one sentence saying what was wrong and what to do."""
    return _document(root, f"{status}", store,
                     f"<h1>{status}</h1><p class=\"problem\" id=\"problem\">{_e(sentence)}</p>"
                     f"<p><a href=\"{_e(root)}/\">Back to the runs</a></p>")


def runs_page(root: str, store: str, page: RunPage, wanted: RunFilter) -> str:
    """The runs list: the filter form, one row a run, and the pager."""
    def options(name: str, values: Sequence[str], chosen: str | None) -> str:
        shown = [f"<option value=\"\">any {name}</option>"]
        for value in values:
            picked = " selected" if value == chosen else ""
            shown.append(f"<option value=\"{_e(value)}\"{picked}>{_e(value)}</option>")
        return "".join(shown)

    query = wanted.query(page=1)

    def field(name: str, label: str, kind: str, extra: str = "") -> str:
        return (f"<label>{label}<input type=\"{kind}\" name=\"{name}\" id=\"f-{name}\" "
                f"value=\"{_e(query.get(name, ''))}\"{extra}></label>")

    form = (
        f"<form class=\"filters\" method=\"get\" action=\"{_e(root)}/\" id=\"filters\">"
        f"<label>status<select name=\"status\" id=\"f-status\">"
        f"{options('status', page.statuses, wanted.status)}</select></label>"
        f"<label>agent<select name=\"agent\" id=\"f-agent\">"
        f"{options('agent', page.agents, wanted.agent)}</select></label>"
        + field("since", "since", "datetime-local", " step=\"1\"")
        + field("until", "until", "datetime-local", " step=\"1\"")
        + field("min_cost", "min cost (USD)", "number", " min=\"0\" step=\"any\"")
        + field("max_cost", "max cost (USD)", "number", " min=\"0\" step=\"any\"")
        + f"<button type=\"submit\">Filter</button><a href=\"{_e(root)}/\">clear</a></form>")
    rows = []
    for row in page.rows:
        cost = "—" if row.cost_usd is None else f"${row.cost_usd:.4f}"
        proof = " <span class=\"badge\">kept proof</span>" if row.proofs else ""
        rows.append(
            f"<tr data-run-id=\"{_e(row.run_id)}\">"
            f"<td><a class=\"run\" href=\"{_e(_run_href(root, row.run_id))}\">"
            f"{_e(row.run_id)}</a>{proof}</td>"
            f"<td>{_when(row.created_at)}</td><td>{_e(row.name)}</td><td>{_e(row.kind)}</td>"
            f"<td><span class=\"status {_e(row.status)}\">{_e(row.status)}</span></td>"
            f"<td class=\"num\">{cost}</td><td class=\"preview\">{_e(row.preview[:120])}</td></tr>")
    if rows:
        table = ("<table class=\"runs\" id=\"runs\"><thead><tr><th>run</th><th>created</th>"
                 "<th>agent</th><th>kind</th><th>status</th><th>cost</th><th>answer</th></tr>"
                 f"</thead><tbody>{''.join(rows)}</tbody></table>")
    else:
        table = "<p id=\"no-runs\">No run matches these filters.</p>"
    nav = [f"<span id=\"page-of\">page {page.page} of {page.pages} · {page.total} run(s)</span>"]
    if page.page > 1:
        nav.insert(0, f"<a rel=\"prev\" href=\"{_e(root)}/?"
                      f"{_e(urlencode(wanted.query(page=page.page - 1)))}\">← newer</a>")
    if page.page < page.pages:
        nav.append(f"<a rel=\"next\" href=\"{_e(root)}/?"
                   f"{_e(urlencode(wanted.query(page=page.page + 1)))}\">older →</a>")
    body = f"<h1>Runs</h1>{form}{table}<nav class=\"pages\">{''.join(nav)}</nav>"
    return _document(root, "Runs", store, body)


def run_page(root: str, store: str, facts: RunFacts, token: str) -> str:
    """One run: its facts, its kept proof, the prove form, and its report (framed)."""
    href = _run_href(root, facts.run_id)
    answer = "—" if facts.answer is None else facts.answer
    details = (
        "<dl class=\"facts\">"
        f"<dt>agent</dt><dd id=\"run-name\">{_e(facts.name)} ({_e(facts.kind)})</dd>"
        f"<dt>status</dt><dd><span class=\"status {_e(facts.status)}\" id=\"run-status\">"
        f"{_e(facts.status)}</span></dd>"
        f"<dt>created</dt><dd>{_when(facts.created_at)}</dd>"
        f"<dt>usage</dt><dd>{_e(facts.usage)}</dd>"
        f"<dt>answer</dt><dd id=\"run-answer\">{_text(answer[:600])}</dd></dl>")
    kept_text = "\n".join(facts.kept) if facts.kept else "Nothing proven yet."
    kept = (f"<section class=\"panel\" id=\"kept\" data-kept=\"{'yes' if facts.kept else 'no'}\">"
            f"<h2>Kept proof</h2><pre class=\"lines\" id=\"kept-lines\">{_text(kept_text)}</pre>"
            "</section>")
    if facts.can_prove is not None:
        prove = (f"<section class=\"panel\" id=\"prove-off\"><h2>Prove the cause</h2>"
                 f"<p>{_e(facts.can_prove)}</p></section>")
    else:
        saved = ""
        if facts.choices:
            items = "".join(f"<option value=\"{_e(c.key)}\">{_e(c.describe)}</option>"
                            for c in facts.choices)
            saved = (f"<label>or a saved criterion<select name=\"saved\" id=\"saved\">"
                     f"<option value=\"\">—</option>{items}</select></label>")
        job = f" data-job=\"{_e(facts.job)}\"" if facts.job else ""
        prove = (
            f"<section class=\"panel\" id=\"prove\" data-jobs=\"{_e(root)}/jobs/\"{job}>"
            "<h2>Prove the cause</h2><p>What was wrong with the answer? The agent is re-run "
            "without each suspect, in isolation (nothing it writes is kept); the verdicts are "
            "kept with this run.</p>"
            f"<form class=\"prove\" id=\"prove-form\" method=\"post\" action=\"{_e(href)}/prove\">"
            f"<input type=\"hidden\" name=\"token\" value=\"{_e(token)}\">"
            "<label>the answer should not contain<input type=\"text\" name=\"phrase\" "
            "id=\"phrase\" maxlength=\"200\" autocomplete=\"off\" placeholder=\"e.g. APPROVED\">"
            f"</label>{saved}<button type=\"submit\" id=\"prove-button\">Prove</button></form>"
            "<p id=\"prove-status\" role=\"status\" aria-live=\"polite\"></p>"
            "<pre class=\"lines\" id=\"prove-result\"></pre></section>")
    frame = (f"<iframe class=\"report\" id=\"report\" title=\"the run's report\" "
             f"sandbox=\"allow-scripts\" src=\"{_e(href)}/report\"></iframe>")
    body = f"<h1>Run <code id=\"run-id\">{_e(facts.run_id)}</code></h1>{details}{kept}{prove}" \
           f"{frame}"
    return _document(root, f"Run {facts.run_id}", store, body)
