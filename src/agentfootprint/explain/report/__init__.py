"""The HTML report: one self-contained file that shows why a run answered what it did.

People would rather look than read. ``render_html_report(recording)`` turns a recording into a
single HTML document — inline CSS, script and SVG, no network, no CDN, no external font — with
four parts: the run's chart with the executed path lit, an iteration timeline, what the model
saw at each LLM call (each injected piece marked by its source), and the backtrack board
(suspects with their proxy scores, ablation stamps when a localization report is given, and
the culprit sentence highlighted in the exact prompt).

Contract: the page is built from the recording alone (plus the ids, scores and verdicts of the
explanation objects), so a value redacted at the source never appears; every run value is
escaped; a Content-Security-Policy forbids every network source. Without ``backtrack`` the
board follows the best-ranked removable suspect; without ``localization`` every claim on it is
labelled a proxy.

The two functions are imported from ``agentfootprint.explain``.
"""

from ..._lazy import moved_names as _moved_names

__all__: list[str] = []

__getattr__ = _moved_names(__name__, dict.fromkeys(
    ("render_html_report", "write_html_report"), "agentfootprint.explain"))
