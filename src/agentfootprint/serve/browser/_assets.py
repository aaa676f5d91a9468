"""The run browser's stylesheet and script, served from the app itself (no CDN, no build step).

The pages allow scripts and styles from their own origin only (``PAGE_POLICY``), so nothing
inline runs and nothing is fetched from elsewhere; the script only starts a prove job and polls
its progress. The report is framed sandboxed (scripts, no same-origin), under its own policy.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSS", "JS", "PAGE_POLICY", "REPORT_POLICY"]

PAGE_POLICY: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                      "connect-src 'self'; frame-src 'self'; img-src 'none'; font-src 'none'; "
                      "base-uri 'none'; form-action 'self'; frame-ancestors 'self'")
"""The browser's own pages: their script, their stylesheet, their own origin's JSON."""
REPORT_POLICY: Final = "frame-ancestors 'self'"
"""Added to the report's own (meta) policy: only the browser may frame it."""

CSS: Final = """
:root { color-scheme: light; --ink: #1f2328; --muted: #59636e; --line: #d1d9e0;
  --accent: #1f6feb; --bad: #cf222e; --good: #1a7f37; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: #fff; }
header.top { display: flex; gap: 1rem; align-items: baseline; padding: .6rem 1.2rem;
  border-bottom: 1px solid var(--line); background: #f6f8fa; }
header.top a { font-weight: 600; color: var(--ink); text-decoration: none; }
header.top .store { color: var(--muted); font-size: 12px; }
main { padding: 1rem 1.2rem; }
h1 { font-size: 18px; margin: 0 0 .6rem; }
h2 { font-size: 15px; margin: 1.2rem 0 .4rem; }
a { color: var(--accent); }
form.filters { display: flex; flex-wrap: wrap; gap: .6rem 1rem; align-items: end;
  margin-bottom: 1rem; }
form.filters label, form.prove label { display: flex; flex-direction: column; font-size: 12px;
  color: var(--muted); gap: .2rem; }
input, select, button { font: inherit; padding: .25rem .4rem; border: 1px solid var(--line);
  border-radius: 4px; background: #fff; color: var(--ink); }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button:disabled { opacity: .5; cursor: default; }
table.runs { border-collapse: collapse; width: 100%; }
table.runs th, table.runs td { text-align: left; padding: .3rem .5rem;
  border-bottom: 1px solid var(--line); vertical-align: top; }
table.runs th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.preview { color: var(--muted); max-width: 40rem; overflow-wrap: anywhere; }
.status { font-size: 12px; padding: 0 .35rem; border-radius: 3px; border: 1px solid var(--line); }
.status.error, .status.failed { color: var(--bad); border-color: var(--bad); }
.status.ok, .status.done { color: var(--good); border-color: var(--good); }
.badge { font-size: 11px; color: var(--good); }
nav.pages { display: flex; gap: 1rem; margin-top: .8rem; color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
section.panel { border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem;
  margin: .8rem 0; }
pre.lines { white-space: pre-wrap; overflow-wrap: anywhere; margin: .4rem 0 0;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
form.prove { display: flex; flex-wrap: wrap; gap: .6rem 1rem; align-items: end; }
form.prove input[name=phrase] { min-width: 22rem; }
#prove-status { margin: .5rem 0 0; color: var(--muted); }
section[data-state=failed] #prove-status, section[data-state=refused] #prove-status {
  color: var(--bad); }
section[data-state=done] #prove-status { color: var(--good); font-weight: 600; }
iframe.report { width: 100%; height: 80vh; border: 1px solid var(--line); border-radius: 6px; }
p.problem { font-size: 15px; }
"""

JS: Final = r"""
(function () {
  "use strict";
  var section = document.getElementById("prove");
  var form = document.getElementById("prove-form");
  if (!section || !form) { return; }
  var status = document.getElementById("prove-status");
  var result = document.getElementById("prove-result");
  var kept = document.getElementById("kept-lines");
  var button = document.getElementById("prove-button");
  var jobs = section.dataset.jobs;

  function busy(state) { return state === "queued" || state === "running"; }

  function show(job) {
    section.dataset.state = job.state;
    section.dataset.verdict = job.verdict || "";
    if (job.state === "queued") {
      status.textContent = "Queued: prove that " + job.criterion + "…";
    } else if (job.state === "running") {
      status.textContent = "Re-running the agent without each suspect: " + job.done +
        " re-run(s) done" + (job.label ? " (latest: " + job.label + ")" : "") + "…";
    } else if (job.state === "failed") {
      status.textContent = "Could not prove: " + job.error;
    } else {
      status.textContent = job.verdict + " — " + job.done + " re-run(s); kept with the run.";
      result.textContent = job.lines.join("\n");
      if (kept) { kept.textContent = job.lines.join("\n"); }
      var frame = document.getElementById("report");
      if (frame) { frame.src = frame.src; }
    }
    button.disabled = busy(job.state);
  }

  function lost() {
    section.dataset.state = "failed";
    status.textContent = "Lost contact with the server; reload the page to see the job.";
    button.disabled = false;
  }

  function poll(id) {
    fetch(jobs + encodeURIComponent(id), {headers: {"Accept": "application/json"},
                                          credentials: "same-origin"})
      .then(function (response) { return response.json(); })
      .then(function (job) {
        if (job.error && !job.state) { lost(); return; }
        show(job);
        if (busy(job.state)) { window.setTimeout(function () { poll(id); }, 250); }
      })
      .catch(lost);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    result.textContent = "";
    section.dataset.state = "starting";
    status.textContent = "Starting the re-runs…";
    fetch(form.action, {method: "POST", credentials: "same-origin",
                        headers: {"Accept": "application/json"},
                        body: new URLSearchParams(new FormData(form))})
      .then(function (response) {
        return response.json().then(function (body) { return {ok: response.ok, body: body}; });
      })
      .then(function (answer) {
        if (!answer.ok) {
          section.dataset.state = "refused";
          status.textContent = answer.body.error;
          button.disabled = false;
          return;
        }
        show(answer.body);
        poll(answer.body.job);
      })
      .catch(lost);
  });

  if (section.dataset.job) { poll(section.dataset.job); }
}());
"""
