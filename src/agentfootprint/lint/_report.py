"""What the lint found: ``LintFinding`` (one problem, its fix) and ``LintReport`` (all of them,
with which rules ran and which could not).

A rule that could not run (the twin finder without the embedding model) is listed in
``not_run`` with the reason and the fix, so "no findings" and "not checked" never read the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["LintFinding", "LintReport", "Severity"]

Severity = Literal["error", "warning", "info"]
_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class LintFinding:
    """One problem in a tool catalog, the tools it concerns and how to fix it."""

    rule: str
    """The rule id, e.g. ``near-duplicate`` or ``enum-in-prose``."""
    severity: Severity
    tools: tuple[str, ...]
    """The tool names concerned (two for a near-duplicate pair)."""
    message: str
    """What is wrong, in one sentence."""
    fix: str
    """What to change, in one sentence."""
    parameter: str | None = None
    """The parameter concerned, for a parameter rule."""
    score: float | None = None
    """The cosine similarity, for a near-duplicate pair."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "severity": self.severity,
                               "tools": list(self.tools), "message": self.message,
                               "fix": self.fix}
        if self.parameter is not None:
            out["parameter"] = self.parameter
        if self.score is not None:
            out["score"] = round(self.score, 4)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LintReport:
    """The findings of one lint, most severe first, and what was and was not checked."""

    findings: tuple[LintFinding, ...]
    tools_checked: int
    rules_run: tuple[str, ...]
    not_run: dict[str, str] = field(default_factory=dict)
    """Rule id → why it did not run and how to make it run."""
    threshold: float | None = None
    """The cosine at or above which two tools are reported as near-duplicates."""
    model: str | None = None
    """The embedding model the twin rule used, when it ran."""
    nearest: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Tool name → its nearest other tool and their cosine, when the twin rule ran: computed
    once per catalog, so a run can note, per tool call, how close the chosen tool was to being
    confused (a dict lookup in a ``stream.tool_start`` listener; no model at run time)."""

    @property
    def ok(self) -> bool:
        """True when no rule found anything (a rule in ``not_run`` checked nothing)."""
        return not self.findings

    def by_rule(self, rule: str) -> list[LintFinding]:
        """The findings of one rule."""
        return [finding for finding in self.findings if finding.rule == rule]

    def as_dict(self) -> dict[str, Any]:
        return {"tools_checked": self.tools_checked, "ok": self.ok,
                "findings": [finding.as_dict() for finding in self.findings],
                "rules_run": list(self.rules_run), "not_run": dict(self.not_run),
                "threshold": self.threshold, "model": self.model,
                "nearest": {name: {"tool": other, "cosine": round(cosine, 4)}
                            for name, (other, cosine) in self.nearest.items()}}

    def to_json(self) -> str:
        """The report as a JSON document (``agentfootprint lint-tools --format json``)."""
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False)

    def to_text(self) -> str:
        """The report for a person: a summary line, one line per finding, then rules not run."""
        counts = {s: sum(f.severity == s for f in self.findings) for s in _ORDER}
        summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n)
        lines = [f"{self.tools_checked} tools checked: "
                 f"{summary or 'no findings'}"]
        for finding in self.findings:
            subject = ", ".join(finding.tools)
            if finding.parameter:
                subject += f".{finding.parameter}"
            lines.append(f"{finding.severity:<7} {finding.rule:<20} {subject}: "
                         f"{finding.message} Fix: {finding.fix}")
        for rule, why in self.not_run.items():
            lines.append(f"not run {rule:<20} {why}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def sorted_findings(findings: list[LintFinding]) -> tuple[LintFinding, ...]:
    """Most severe first; then by rule and tool names, so a report reads the same every time."""
    return tuple(sorted(findings, key=lambda f: (_ORDER[f.severity], f.rule, f.tools,
                                                 f.parameter or "")))
