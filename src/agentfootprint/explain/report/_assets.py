"""The report's inline stylesheet and script, and the Content-Security-Policy that pins them.

Why inline and pinned: the report is one file that must open anywhere, offline, and must
never call out. The policy allows no source at all except this exact stylesheet and script
(by SHA-256), so even a value that slipped past escaping could neither run nor fetch.
The script only shows and hides markup the page already has; it never builds HTML from data.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

__all__ = ["CSS", "JS", "PALETTE_SIZE", "content_security_policy"]

PALETTE_SIZE: Final = 8
"""Distinct source colours (``src-0`` … ``src-7``), reused in order when there are more."""

CSS: Final = """
:root {
  --ink: #1d2330; --muted: #5d6779; --line: #d6dbe4; --paper: #ffffff; --bg: #f4f6f9;
  --lit: #1f6feb; --lit-soft: #dbe8fd; --idle: #eef0f4; --idle-ink: #8a93a3;
  --causal: #c62828; --causal-soft: #fde7e7; --ok: #2e7d32; --warn: #a86400;
  --culprit: #ffd54a;
  --src-0: #e3f2fd; --src-0-edge: #1e88e5; --src-1: #f3e5f5; --src-1-edge: #8e24aa;
  --src-2: #e8f5e9; --src-2-edge: #43a047; --src-3: #fff3e0; --src-3-edge: #fb8c00;
  --src-4: #e0f7fa; --src-4-edge: #00acc1; --src-5: #fce4ec; --src-5-edge: #d81b60;
  --src-6: #f1f8e9; --src-6-edge: #7cb342; --src-7: #ede7f6; --src-7-edge: #5e35b1;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px; color: var(--ink); background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; overflow-wrap: break-word; }
header.top { background: var(--ink); color: #fff; padding: 18px 28px 14px; }
header.top h1 { margin: 0 0 8px; font-size: 21px; font-weight: 650; }
header.top dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 3px 14px;
  margin: 0; }
header.top dt { color: #aab4c6; }
header.top dd { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
header.top nav { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 4px 16px;
  font-size: 13px; }
header.top nav a { color: #cfe0ff; }
main { padding: 18px 28px 40px; display: grid; grid-template-columns: minmax(0, 1fr);
  gap: 18px; max-width: 1500px; }
code { overflow-wrap: anywhere; }
.lead { margin: 6px 0 12px; padding: 9px 13px; border-radius: 8px; font-size: 15.5px;
  line-height: 1.45; color: var(--ink); background: #fff; border-left: 6px solid var(--line);
  overflow-wrap: anywhere; max-width: 1100px; }
.lead.proven { background: var(--causal-soft); border-left-color: var(--causal); }
.lead.proven b { color: var(--causal); }
.lead.not-proven, .lead.nothing { background: #fff8e1; border-left-color: #e0a800; }
.lead.failed { background: var(--causal-soft); border-left-color: var(--causal); }
.lead a { color: var(--lit); white-space: nowrap; }
.lead q { font-weight: 650; }
.table-wrap { overflow-x: auto; max-width: 100%; }
.table-wrap table { min-width: 520px; }
.members { display: grid; grid-template-columns: minmax(0, 1fr); gap: 6px; margin-top: 8px; }
details.member-chart { border: 1px solid var(--line); border-radius: 8px; padding: 6px 10px;
  background: #fbfcfe; min-width: 0; }
details.member-chart > summary { cursor: pointer; font-size: 13px; }
details.member-chart .chart-wrap { margin-top: 8px; }
svg.chart .node.member .box { stroke-width: 2; }
.call-usage { font-size: 12.5px; color: var(--muted); margin: 0 0 8px; overflow-wrap: anywhere; }
.call-usage b { color: var(--ink); }
.unknown { color: var(--warn); }
ol.tool-runs, ol.findings { list-style: none; margin: 0; padding: 0; display: grid; gap: 8px; }
li.tool-run, li.finding { border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px;
  background: #fff; min-width: 0; }
li.tool-run .tool-name { margin: 0 0 4px; font-weight: 650; }
li.tool-run .status { font-size: 11px; font-weight: 700; color: var(--ok); }
.caption { display: block; font-size: 11px; font-weight: 700; color: var(--muted);
  text-transform: uppercase; letter-spacing: .04em; margin: 6px 0 2px; }
pre.args, pre.result { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0;
  font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; padding: 6px 9px;
  background: #fbfcfe; border: 1px solid var(--line); border-radius: 6px; }
li.finding.error { border-color: var(--causal); }
li.finding .severity { font-size: 11px; font-weight: 800; text-transform: uppercase;
  color: var(--causal); }
li.finding.warning .severity { color: var(--warn); }
tr.disposition.found td:nth-child(2) { color: var(--causal); font-weight: 700; }
tr.disposition.could-not-run td:nth-child(2) { color: var(--warn); font-weight: 700; }
section { background: var(--paper); border: 1px solid var(--line); border-radius: 10px;
  padding: 14px 18px 18px; min-width: 0; }
h2 { font-size: 17px; margin: 0 0 6px; }
h3 { font-size: 14px; margin: 14px 0 6px; color: var(--muted); text-transform: uppercase;
  letter-spacing: .04em; }
.legend, .note, .tiers { color: var(--muted); font-size: 13px; margin: 4px 0 10px; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 3px;
  vertical-align: -1px; margin: 0 4px 0 10px; border: 1px solid var(--line); }
.swatch.lit { background: var(--lit-soft); border-color: var(--lit); }
.swatch.idle { background: var(--idle); }
.chart-wrap { overflow: auto; max-height: 760px; border: 1px solid var(--line);
  border-radius: 8px; background: #fbfcfe; }
svg.chart { display: block; font-size: 12px; }
svg.chart .box { fill: var(--idle); stroke: #c3c9d4; stroke-width: 1; }
svg.chart .node.ran .box { fill: var(--lit-soft); stroke: var(--lit); stroke-width: 2; }
svg.chart .label { fill: var(--idle-ink); }
svg.chart .node.ran .label { fill: var(--ink); font-weight: 600; }
svg.chart .cluster { fill: rgba(120, 130, 150, .05); stroke: #b9c0cc;
  stroke-dasharray: 5 4; }
svg.chart .node.ran > .cluster { stroke: var(--lit); fill: rgba(31, 111, 235, .04); }
svg.chart .cluster-title { fill: var(--muted); font-weight: 600; }
svg.chart .node.ran > .cluster-title { fill: var(--lit); }
svg.chart .runs { fill: var(--lit); font-weight: 700; font-size: 11px; }
svg.chart .node { cursor: pointer; outline: none; }
svg.chart .node.focus .box { stroke: var(--causal); stroke-width: 3; }
svg.chart .edge { fill: none; stroke: #c3c9d4; stroke-width: 1.3; stroke-dasharray: 4 3; }
svg.chart .edge.lit { stroke: var(--lit); stroke-width: 2.4; stroke-dasharray: none; }
svg.chart .arrow { fill: #c3c9d4; }
svg.chart .arrow.lit { fill: var(--lit); }
svg.chart .edge-label { fill: var(--idle-ink); font-size: 11px; }
svg.chart .edge-label.lit { fill: var(--lit); font-weight: 600; }
ol.iterations { list-style: none; margin: 0; padding: 0 0 6px; display: flex; gap: 10px;
  overflow-x: auto; align-items: flex-start; }
li.iteration { flex: 0 0 auto; min-width: 190px; max-width: 260px;
  border: 1px solid var(--line); border-radius: 8px; padding: 8px; background: #fbfcfe; }
li.iteration h3 { margin: 0 0 6px; }
ol.steps { list-style: none; margin: 0; padding: 0; display: grid; gap: 4px; }
.step { display: block; width: 100%; text-align: left; font: inherit; font-size: 13px;
  border: 1px solid var(--line); border-radius: 6px; background: #fff; padding: 4px 7px;
  color: var(--ink); }
.step small { color: var(--muted); font-family: ui-monospace, Menlo, Consolas, monospace;
  font-size: 11px; }
.step .detail { display: block; color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
.step.decider { border-style: dashed; }
.step.failed { border-color: var(--causal); background: var(--causal-soft); }
.step.match { outline: 2px solid var(--causal); }
button.step.llm { cursor: pointer; border-color: var(--lit); background: var(--lit-soft);
  font-weight: 600; }
button.step.llm:hover { filter: brightness(.97); }
button.step.llm.selected, .call-tab.selected { background: var(--lit); color: #fff; }
button.step.llm.selected small, button.step.llm.selected .detail { color: #e5eeff; }
.call-tabs { display: flex; flex-wrap: wrap; gap: 6px; margin-bottom: 10px; }
.call-tab { font: inherit; font-size: 12px; border: 1px solid var(--lit); color: var(--lit);
  background: #fff; border-radius: 14px; padding: 3px 10px; cursor: pointer; }
article.call-view > header { font-weight: 650; margin-bottom: 6px; }
pre.prompt, pre.content, pre.answer { white-space: pre-wrap; overflow-wrap: anywhere;
  font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; line-height: 1.55;
  margin: 0; padding: 10px 12px; background: #fbfcfe; border: 1px solid var(--line);
  border-radius: 8px; }
mark.inj { background: var(--src-0); border-bottom: 2px solid var(--src-0-edge);
  padding: 1px 0; color: inherit; border-radius: 3px; }
mark.inj::before { content: attr(data-label); font-family: system-ui, sans-serif;
  font-size: 10.5px; font-weight: 700; color: #fff; background: var(--src-0-edge);
  border-radius: 3px; padding: 0 5px; margin-right: 5px; vertical-align: 1px; }
mark.inj.base { background: transparent; border-bottom: 2px dotted #9aa3b2; }
mark.inj.base::before { background: #9aa3b2; }
mark.src-1 { background: var(--src-1); border-color: var(--src-1-edge); }
mark.src-1::before { background: var(--src-1-edge); }
mark.src-2 { background: var(--src-2); border-color: var(--src-2-edge); }
mark.src-2::before { background: var(--src-2-edge); }
mark.src-3 { background: var(--src-3); border-color: var(--src-3-edge); }
mark.src-3::before { background: var(--src-3-edge); }
mark.src-4 { background: var(--src-4); border-color: var(--src-4-edge); }
mark.src-4::before { background: var(--src-4-edge); }
mark.src-5 { background: var(--src-5); border-color: var(--src-5-edge); }
mark.src-5::before { background: var(--src-5-edge); }
mark.src-6 { background: var(--src-6); border-color: var(--src-6-edge); }
mark.src-6::before { background: var(--src-6-edge); }
mark.src-7 { background: var(--src-7); border-color: var(--src-7-edge); }
mark.src-7::before { background: var(--src-7-edge); }
mark.culprit { background: var(--culprit); outline: 2px solid var(--causal); color: inherit;
  border-radius: 2px; font-weight: 700; }
ol.messages { list-style: none; margin: 0; padding: 0; display: grid; gap: 6px; }
li.msg { display: grid; grid-template-columns: 120px minmax(0, 1fr); gap: 8px; align-items: start; }
li.msg .role { font-size: 12px; font-weight: 700; color: var(--muted); padding-top: 8px; }
li.msg .role .src { display: block; font-weight: 600; color: var(--ink); }
li.msg.injected pre, li.msg.role-tool pre { border-left: 4px solid var(--src-3-edge); }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.fired { color: var(--ok); font-weight: 700; }
td.held { color: var(--idle-ink); }
ul.tools { margin: 0; padding-left: 18px; font-size: 13px; }
.banner { border-radius: 8px; padding: 8px 12px; font-size: 13px; margin: 8px 0; }
.banner.proxy { background: #fff8e1; border: 1px solid #f2d27a; }
.banner.stable { background: #e8f5e9; border: 1px solid #a5d6a7; }
.banner.unstable { background: var(--causal-soft); border: 1px solid #ef9a9a; }
.banner.failed { background: var(--causal-soft); border: 2px solid var(--causal);
  font-size: 14px; }
.banner.failed b { color: var(--causal); }
.proven-cause { border: 2px solid var(--causal); background: var(--causal-soft);
  border-radius: 8px; padding: 8px 12px; margin: 8px 0; font-size: 13.5px; }
.proven-cause .headline { font-weight: 750; }
.proven-cause .why, .criterion { font-size: 12.5px; color: var(--muted); margin: 4px 0 0; }
.without q { font-weight: 650; color: var(--ink); }
li.suspect .without { margin: 6px 0 0; font-size: 12.5px; }
pre.answer.failed { border-color: var(--causal); color: var(--causal); }
ol.hops { list-style: none; margin: 0; padding: 0; display: grid; gap: 4px; }
li.hop { display: grid; grid-template-columns: 84px minmax(0, 1fr); gap: 8px; font-size: 13px; }
li.hop .hop-kind { font-weight: 800; color: var(--lit); letter-spacing: .04em; }
li.hop code { color: var(--muted); }
ol.suspects { list-style: none; margin: 0; padding: 0; display: grid;
  grid-template-columns: repeat(auto-fill, minmax(min(300px, 100%), 1fr)); gap: 10px; }
li.suspect { border: 1px solid var(--line); border-radius: 9px; padding: 9px 11px;
  position: relative; background: #fff; min-width: 0; }
li.suspect.causal { border: 2px solid var(--causal); background: var(--causal-soft); }
li.suspect.followed { box-shadow: 0 0 0 3px var(--lit-soft); }
li.suspect .rank { font-weight: 800; color: var(--muted); margin-right: 6px; }
li.suspect .label { font-weight: 650; overflow-wrap: anywhere; }
li.suspect .score { display: block; margin-top: 4px; font-size: 13px; }
.tier { font-size: 10.5px; font-weight: 700; text-transform: uppercase; border-radius: 3px;
  padding: 0 5px; background: #fff3cd; color: #7a5b00; border: 1px solid #f2d27a; }
.stamp { display: inline-block; margin-top: 6px; font-weight: 800; font-size: 12px;
  letter-spacing: .05em; border: 2px solid currentColor; border-radius: 4px; padding: 1px 7px;
  transform: rotate(-2deg); }
.stamp.causal { color: var(--causal); }
.stamp.not-confirmed { color: var(--ok); }
.stamp.inconclusive { color: var(--warn); }
.stamp.none { color: var(--idle-ink); border-style: dashed; transform: none; }
li.suspect q { display: block; margin-top: 6px; font-size: 13px; color: var(--ink); }
li.suspect .why { margin: 6px 0 0; font-size: 12px; color: var(--muted); }
.notes { margin: 8px 0 0; padding-left: 18px; font-size: 13px; color: var(--warn); }
.empty { color: var(--muted); font-style: italic; }
@media (max-width: 640px) {
  header.top { padding: 14px 14px 12px; }
  header.top h1 { font-size: 19px; }
  header.top dl { grid-template-columns: minmax(0, 1fr); }
  header.top dd { margin-bottom: 4px; }
  main { padding: 10px 8px 28px; gap: 12px; }
  section { padding: 10px 11px 14px; }
  li.msg { grid-template-columns: minmax(0, 1fr); gap: 2px; }
  li.msg .role { padding-top: 0; }
  li.hop { grid-template-columns: minmax(0, 1fr); gap: 0; }
  li.iteration { min-width: 170px; max-width: 230px; }
  .chart-wrap { max-height: 520px; }
}
"""

JS: Final = """
(function () {
  "use strict";
  var views = Array.prototype.slice.call(document.querySelectorAll(".call-view"));
  var pickers = Array.prototype.slice.call(document.querySelectorAll("button[data-call]"));
  function showCall(index, scroll) {
    views.forEach(function (view) { view.hidden = view.dataset.callIndex !== index; });
    pickers.forEach(function (el) {
      var on = el.dataset.call === index;
      el.classList.toggle("selected", on);
      el.setAttribute("aria-pressed", on ? "true" : "false");
    });
    if (scroll) {
      var target = document.getElementById("model-view");
      if (target) { target.scrollIntoView({block: "start"}); }
    }
  }
  pickers.forEach(function (el) {
    el.addEventListener("click", function () {
      showCall(el.dataset.call, el.classList.contains("step"));
    });
  });
  var nodes = Array.prototype.slice.call(document.querySelectorAll("#chart-svg .node"));
  var steps = Array.prototype.slice.call(document.querySelectorAll(".step[data-stage-id]"));
  function focusStage(id) {
    nodes.forEach(function (n) {
      n.classList.toggle("focus", n.getAttribute("data-stage-id") === id);
    });
    steps.forEach(function (s) { s.classList.toggle("match", s.dataset.stageId === id); });
  }
  nodes.forEach(function (n) {
    var id = n.getAttribute("data-stage-id");
    n.addEventListener("click", function (event) { event.stopPropagation(); focusStage(id); });
    n.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { focusStage(id); }
    });
  });
  steps.forEach(function (s) {
    s.addEventListener("mouseenter", function () { focusStage(s.dataset.stageId); });
  });
  nodes.forEach(function (n) {
    var member = n.getAttribute("data-member");
    if (!member) { return; }
    n.addEventListener("click", function () {
      var box = Array.prototype.slice.call(document.querySelectorAll("details.member-chart"))
        .filter(function (d) { return d.dataset.member === member; })[0];
      if (box) { box.open = !box.open; if (box.open) { box.scrollIntoView({block: "nearest"}); } }
    });
  });
  // a chart wider than its box opens centred on its main column (it scrolls both ways)
  function centre(root) {
    Array.prototype.slice.call(root.querySelectorAll(".chart-wrap")).forEach(function (w) {
      if (w.scrollWidth > w.clientWidth) { w.scrollLeft = (w.scrollWidth - w.clientWidth) / 2; }
    });
  }
  centre(document);
  Array.prototype.slice.call(document.querySelectorAll("details.member-chart")).forEach(
    function (d) { d.addEventListener("toggle", function () { if (d.open) { centre(d); } }); });
  document.documentElement.dataset.ready = "true";
}());
"""


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def content_security_policy() -> str:
    """No network source of any kind; only this page's own stylesheet and script may apply."""
    return (f"default-src 'none'; style-src '{_sha256(CSS)}'; script-src '{_sha256(JS)}'; "
            "img-src 'none'; font-src 'none'; connect-src 'none'; base-uri 'none'; "
            "form-action 'none'")
