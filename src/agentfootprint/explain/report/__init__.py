"""The HTML report: one self-contained file that shows why a run answered what it did.

People would rather look than read. ``render_html_report(recording)`` turns a recording into a
single HTML document — inline CSS, script and SVG, no network, no CDN, no external font. Its
first sentence says what is proven: the proven cause (from a live localization or the proof the
run store keeps), or "Not proven yet" with the exact ``agentfootprint prove`` command. Then: the
run's chart with the executed path lit (a composition's member agents drawn as one box each,
their own stages in closed ``<details>``), an iteration timeline, what the model saw at each LLM
call (each injected piece marked by its source; the tool calls it asked for with their
arguments and results; its model, tokens, latency and cost), the usage table, the backtrack
board (the proof first, then the suspects with their proxy scores and verdict stamps, and the
proven sentence highlighted in the exact prompt), the context-integrity findings with every
check's disposition, and the audit chain status (``chain_head=`` from the run store). A failed
run's page names its error, the step that raised it and the request or context at that moment.
The page fits any screen from 390 px up: wide things scroll inside their own boxes.

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
