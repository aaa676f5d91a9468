"""A kept proof, read back: what the re-runs proved about a run, from the run store or live.

``localize_context_bug`` keeps its report beside the run as plain JSON (``to_proof()``);
``agentfootprint explain`` and the HTML report lead with it. ``KeptProof`` reads that JSON (or
a live ``ContextBugReport``, through the same JSON, so both render alike) into what those readers
show: the proven causes with the answer the agent gave without them, the criterion that judged
"wrong", the verdict rule, and each suspect's verdict. A field a proof lacks reads as unknown,
never guessed; a proof of another kind is not a localization and is skipped.

Re-run answers are not part of the recording, so the run's redaction never saw them: when the
run was recorded under redaction, ``answer_without`` is withheld (``redacted=True``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..flow._redact import REDACTED
from ..runs._recording import Recording
from ._localize import DEFAULT_BUDGET, ContextBugReport

__all__ = ["KeptCause", "KeptProof", "KeptVerdict", "is_redacted", "kept_proof",
           "prove_command"]

WITHHELD = ("(withheld: this run is recorded under redaction, and the re-run's answer was never "
            "masked by it)")


@dataclass(frozen=True, slots=True)
class KeptCause:
    """A proven cause: one source (``single``) or a set any one member of which suffices."""

    kind: str
    members: tuple[str, ...]
    labels: tuple[str, ...]
    why: str
    answer_without: str | None

    def sentence(self) -> str:
        """``fact 'x' caused the answer`` / ``either of {A, B} suffices``."""
        if self.kind == "either":
            return (f"either of {{{', '.join(self.labels)}}} suffices — removing the set "
                    "changes the answer, removing any one alone does not")
        return f"{self.labels[0]} caused the answer"


@dataclass(frozen=True, slots=True)
class KeptVerdict:
    """One suspect's verdict as kept."""

    id: str
    label: str
    rank: int | None
    score: float | None
    """The proxy score the ranking gave it."""
    verdict: str | None
    runs: int | None
    flips: int | None
    why: str
    answer_without: str | None

    @property
    def fraction(self) -> str | None:
        return f"{self.flips}/{self.runs}" if self.runs is not None and self.flips is not None \
            else None


@dataclass(frozen=True, slots=True)
class KeptProof:
    """A localization proof, read for showing."""

    answer: str
    criterion: str
    """How "wrong" was judged, in words (``the answer contains 'APPROVED'``)."""
    rule: str
    """The verdict rule (``deterministic model: one re-run per probe`` / ``CAUSAL at α = …``)."""
    baseline: str | None
    """``flips/runs`` of the unchanged agent; ``None`` when nothing was re-run."""
    causes: tuple[KeptCause, ...]
    """The CAUSAL causes only."""
    verdicts: tuple[KeptVerdict, ...]
    """Every suspect, in proxy-rank order."""
    uncovered: tuple[str, ...]
    reruns: int | None
    model_calls: int | None
    notes: tuple[str, ...]
    kept: int = 1
    """How many localization proofs the store holds for the run (this is the latest)."""

    @property
    def proven(self) -> list[str]:
        """Every member of a proven cause, first cause first."""
        return list(dict.fromkeys(m for cause in self.causes for m in cause.members))

    @property
    def lead(self) -> str | None:
        """The source the backtrack follows: the first member of the first proven cause."""
        return self.causes[0].members[0] if self.causes else None

    def verdict_of(self, source: str) -> KeptVerdict | None:
        return next((v for v in self.verdicts if v.id == source), None)

    def cost(self) -> str:
        parts = [self.rule]
        if self.reruns is not None:
            parts.append(f"{self.reruns} re-run(s)")
        if self.model_calls is not None:
            parts.append(f"{self.model_calls} model call(s)")
        return "; ".join(parts)

    def lines(self) -> list[str]:
        """The proof as the CLI leads with it."""
        more = f" (the latest of {self.kept} kept)" if self.kept > 1 else ""
        out = []
        if self.causes:
            for cause in self.causes:
                out.append(f"PROVEN: {cause.sentence()}.")
                out.append(f"  {cause.why or 'CAUSAL'}")
                if cause.answer_without is not None:
                    them = "it" if cause.kind == "single" else "them"
                    out.append(f"  without {them} the agent answered: "
                               f"{_quote(cause.answer_without)}")
        else:
            out.append("NOTHING PROVEN: the kept re-runs changed the answer by removing no "
                       "suspect" + (f" (baseline {self.baseline} flipped)" if self.baseline
                                    else "") + ".")
        out.append(f"  judged wrong when: {self.criterion} · {self.cost()} · kept proof{more}")
        if self.uncovered:
            out.append(f"  not covered before the budget ran out (not innocent): "
                       f"{', '.join(self.uncovered)}")
        return out


def kept_proof(source: ContextBugReport | Mapping[str, Any] | Sequence[Mapping[str, Any]]
               | None, *, redacted: bool = False) -> KeptProof | None:
    """The latest localization proof in ``source`` (a live report, one proof, or a run's
    proofs as the store returns them); ``None`` when there is none."""
    if source is None:
        return None
    if isinstance(source, ContextBugReport):
        found: list[Mapping[str, Any]] = [source.to_proof()]
    elif isinstance(source, Mapping):
        found = [source]
    else:
        found = [p for p in source if isinstance(p, Mapping)]
    local = [p for p in found if p.get("kind") == "localize"]
    if not local:
        return None
    return _read(local[-1], len(local), redacted)


def is_redacted(recording: Recording) -> bool:
    """True when anything in the run was recorded masked: its re-run answers are then not
    shown (the run's redaction never saw them)."""
    return REDACTED in json.dumps(recording.log, ensure_ascii=False, default=str)


def prove_command(run_id: str, *, phrase: str | None = None) -> str:
    """The exact command that proves a stored run's cause and keeps the proof."""
    wrong = f"--wrong-if-contains {_shell_word(phrase)}" if phrase else \
        "--wrong-if-contains PHRASE"
    return f"agentfootprint prove {run_id} --budget {DEFAULT_BUDGET} {wrong}"


def _read(proof: Mapping[str, Any], kept: int, redacted: bool) -> KeptProof:
    def without(value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        return WITHHELD if redacted else value

    labels: dict[str, str] = {}
    verdicts = []
    for row in _rows(proof.get("suspects")):
        sid = str(row.get("id"))
        labels.setdefault(sid, str(row.get("label") or sid))
        score = row.get("score")
        verdicts.append(KeptVerdict(sid, str(row.get("label") or sid), _int(row.get("rank")),
                                    float(score) if isinstance(score, int | float) else None,
                                    _str(row.get("verdict")),
                                    _int(row.get("runs")), _int(row.get("flips")),
                                    str(row.get("why") or ""),
                                    without(row.get("answer_without"))))
    causes = []
    for row in _rows(proof.get("causes")):
        members = tuple(str(m) for m in row.get("members") or () if isinstance(m, str))
        if row.get("verdict") != "CAUSAL" or not members:
            continue
        names = row.get("labels")
        shown = tuple(str(n) for n in names) if isinstance(names, list) and len(names) == len(
            members) else tuple(labels.get(m, m) for m in members)
        causes.append(KeptCause(str(row.get("kind") or "single"), members, shown,
                                str(row.get("why") or ""), without(row.get("answer_without"))))
    criterion = proof.get("criterion")
    judged = str(criterion.get("describe")) if isinstance(criterion, Mapping) and \
        criterion.get("describe") else "not recorded"
    alpha = proof.get("alpha")
    rule = ("deterministic model: one re-run per probe" if proof.get("model") == "deterministic"
            else f"sampling model: CAUSAL at α = {alpha:g}" if isinstance(alpha, int | float)
            else "verdict rule not recorded")
    base = proof.get("baseline")
    baseline = (f"{base.get('flips')}/{base.get('runs')}" if isinstance(base, Mapping)
                else None)
    uncovered = tuple(labels.get(str(u), str(u)) for u in proof.get("uncovered") or ())
    notes = tuple(str(n) for n in proof.get("notes") or ())
    return KeptProof(str(proof.get("answer") or ""), judged, rule, baseline, tuple(causes),
                     tuple(verdicts), uncovered, _int(proof.get("reruns")),
                     _int(proof.get("model_calls")), notes, kept)


def _rows(value: Any) -> list[Mapping[str, Any]]:
    return [row for row in value if isinstance(row, Mapping)] if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _quote(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return '"' + (flat if len(flat) <= limit else flat[: limit - 1] + "…") + '"'


def _shell_word(text: str) -> str:
    import shlex

    return shlex.quote(text)
