"""The HTML report: one self-contained file that shows why a run answered what it did.

People would rather look than read. ``render_html_report(recording)`` turns a recording into a
single HTML document — inline CSS, script and SVG, no network, no CDN, no external font — with
four parts: the run's chart with the executed path lit, an iteration timeline, what the model
saw at each LLM call (each injected piece marked by its source), and the backtrack board
(suspects with their proxy scores; with a localization — a live report or the proofs the run
store keeps — the proven causes first, each with the answer the agent gave without it, the
verdict stamps, and the proven sentence highlighted in the exact prompt). A failed run's page
names its error, the step that raised it and the request or context at that moment.

Contract: the page is built from the recording alone (plus the ids, scores, verdicts and
re-run answers of the explanation objects; re-run answers are withheld for a run recorded under
redaction, which never saw them), so a value redacted at the source never appears; every run
value is escaped; a Content-Security-Policy forbids every network source. Without ``backtrack`` the
board follows the proven cause (else the best-ranked removable suspect); without
``localization`` every claim on it is labelled a proxy and the page says how to prove one.

The two functions are imported from ``agentfootprint.explain``.
"""

from ..._lazy import moved_names as _moved_names

__all__: list[str] = []

__getattr__ = _moved_names(__name__, dict.fromkeys(
    ("render_html_report", "write_html_report"), "agentfootprint.explain"))
