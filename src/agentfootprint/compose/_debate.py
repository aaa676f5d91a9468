"""``debate``: a proponent and an opponent argue for a fixed number of rounds; a judge rules.

Opposing arguments surface what a single answer glosses over, and a judge who reads both
sides makes the call. Each speech is a mounted subflow appended to a ``transcript`` in state,
so the recording holds every argument in order, and the verdict backtracks into the judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..flow import Decision, Scope, flow_chart
from ..flow._scope import ReadView
from ..runs import trace
from ._base import Runner, check_runner
from ._pattern import Pattern, as_answer, begin, check_budget, rule, skip, wire

__all__ = ["debate", "debate_message", "verdict_message"]


def _render(transcript: Sequence[Mapping[str, str]]) -> str:
    """Speeches alternate proponent, opponent, so entry ``i`` belongs to round ``i // 2 + 1``."""
    return "\n\n".join(f"[{entry['speaker']}, round {i // 2 + 1}]: {entry['text']}"
                       for i, entry in enumerate(transcript))


def debate_message(task: str, transcript: Sequence[Mapping[str, str]], speaker: str) -> str:
    """What a debater is sent: the question, the debate so far, and which side it speaks for."""
    text = f"Question:\n{task}"
    if transcript:
        text += f"\n\nThe debate so far:\n{_render(transcript)}"
    return text + f"\n\nYou speak as the {speaker}; make your case."


def verdict_message(task: str, transcript: Sequence[Mapping[str, str]]) -> str:
    """What the judge is sent: the question and the whole debate."""
    return f"Question:\n{task}\n\nThe debate:\n{_render(transcript)}\n\nGive your verdict."


def debate(proponent: Runner, opponent: Runner, judge: Runner, *, rounds: int,
           name: str = "Debate") -> Pattern:
    """``rounds`` rounds of proponent then opponent, then the judge's verdict is the answer.

    Each debater gets ``debate_message(task, transcript, "proponent" | "opponent")``; the
    judge gets ``verdict_message(task, transcript)``. ``transcript`` in state is a list of
    ``{"speaker", "text"}`` entries, one per speech, and ``round`` counts the rounds.
    """
    where = "debate"
    budget = check_budget(rounds, where=where, name="rounds")
    charts = {role: check_runner(runner, f"{where} {role}")
              for role, runner in (("proponent", proponent), ("opponent", opponent),
                                   ("judge", judge))}

    members = {"proponent": proponent, "opponent": opponent}

    def speech(speaker: str) -> dict[str, Any]:
        def message(parent: ReadView) -> str:
            return debate_message(str(parent[trace.TASK]), parent.get("transcript") or [], speaker)

        def spoken(text: str) -> dict[str, Any]:
            return {"transcript": [{"speaker": speaker, "text": text}]}

        return wire(message, spoken, members[speaker])

    def number(scope: Scope) -> None:
        scope[trace.ROUND] = int(scope.get(trace.ROUND) or 0) + 1

    def again(scope: Scope) -> Decision:
        done = int(scope[trace.ROUND])
        chosen = "next_round" if done < budget else "verdict"
        label = (f"round {done} of {budget} done" if chosen == "next_round"
                 else f"all {budget} rounds done")
        return Decision(chosen, {"chosen": chosen, "default": "verdict",
                                 "rules": [rule(0, chosen, label, True, round=done)]})

    chart = (
        flow_chart("Start", begin, id="start", description="Take the question")
        .then("Round", number, id="round", description="Start a round")
        .subflow("proponent", charts["proponent"], name="Proponent", **speech("proponent"))
        .subflow("opponent", charts["opponent"], name="Opponent", **speech("opponent"))
        .decide("Another round", again, id="again", description="Debate on or hand to the judge")
        .branch("next_round", "Next round", skip, id="next_round", loop_to="round")
        .branch("verdict", "To the judge", skip, id="to_judge")
        .default("verdict")
        .end()
        .subflow("judge", charts["judge"], name="Judge",
                 **wire(lambda parent: verdict_message(str(parent[trace.TASK]),
                                                       parent.get("transcript") or []),
                        as_answer, judge))
        .build(description=name)
    )
    return Pattern(kind="Debate", chart=chart, runners=[proponent, opponent, judge],
                   remake=lambda rs: debate(rs[0], rs[1], rs[2], rounds=rounds, name=name))
