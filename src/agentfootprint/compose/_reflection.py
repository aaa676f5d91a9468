"""``reflection``: write, critique, revise — until the critic accepts or the rounds run out.

A second runner reviewing the first catches mistakes one pass misses. The writer and the
critic are mounted once each and the loop goes back to the writer, so every draft and every
critique is its own subflow in one recording, and the accept decision after each critique is
a decider with the verdict on the record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..flow import Decision, Scope, flow_chart
from ..flow._scope import ReadView
from ..runs import trace
from ._base import Runner, check_runner
from ._pattern import (
    Pattern,
    begin,
    call_user,
    check_budget,
    check_callable,
    rule,
    skip,
    wire,
)

__all__ = ["critique_message", "reflection", "revision_message"]

Accept = Callable[[str], bool | Awaitable[bool]]


def critique_message(task: str, draft: str) -> str:
    """What the critic is sent: the task and the draft to review."""
    return f"Task:\n{task}\n\nDraft:\n{draft}"


def revision_message(task: str, draft: str, critique: str) -> str:
    """What the writer is sent after a rejected draft: the task, its draft, the critique."""
    return (f"Task:\n{task}\n\nYour previous draft:\n{draft}\n\nCritique:\n{critique}\n\n"
            "Write an improved draft.")


def reflection(writer: Runner, critic: Runner, *, max_rounds: int, accept: Accept,
               name: str = "Reflection") -> Pattern:
    """The writer drafts, the critic reviews; ``accept(critique)`` decides whether to stop.

    One round is one draft and its critique; there are at most ``max_rounds``. The writer gets
    the task first and ``revision_message(task, draft, critique)`` afterwards; the critic gets
    ``critique_message(task, draft)``. The answer is the last draft (never the critique):
    accepted, or the latest one when the rounds ran out (``stopped_early="max_rounds"``).
    State keeps ``draft``, ``critique``, ``rounds`` and ``accepted``.
    """
    where = "reflection"
    budget = check_budget(max_rounds, where=where, name="max_rounds")
    check_callable(accept, where=where, name="accept", what="critique -> bool (True stops)")
    writer_chart = check_runner(writer, f"{where} writer")
    critic_chart = check_runner(critic, f"{where} critic")

    def writer_message(parent: ReadView) -> str:
        task = str(parent[trace.TASK])
        critique = parent.get(trace.CRITIQUE)
        if critique is None:
            return task
        return revision_message(task, str(parent["draft"]), str(critique))

    def drafted(text: str) -> dict[str, Any]:
        return {"draft": text, "current": text, "final_content": text}

    def critic_message(parent: ReadView) -> str:
        return critique_message(str(parent[trace.TASK]), str(parent["draft"]))

    async def verdict(scope: Scope) -> Decision:
        rounds = int(scope.get(trace.ROUNDS) or 0) + 1
        scope[trace.ROUNDS] = rounds
        critique = str(scope[trace.CRITIQUE])
        accepted = bool(await call_user(accept, critique))
        scope[trace.ACCEPTED] = accepted
        if accepted:
            chosen, label = "accepted", f"accept() held in round {rounds}"
        elif rounds >= budget:
            chosen, label = "out_of_rounds", f"rejected; {rounds} of {budget} rounds used"
        else:
            chosen, label = "revise", f"rejected in round {rounds} of {budget}"
        evidence = [rule(0, chosen, label, True, critique=critique, rounds=rounds)]
        return Decision(chosen, {"chosen": chosen, "default": "out_of_rounds",
                                 "rules": evidence})

    def out_of_rounds(scope: Scope) -> None:
        scope[trace.STOPPED_EARLY] = "max_rounds"

    chart = (
        flow_chart("Start", begin, id="start", description="Take the task")
        .subflow("writer", writer_chart, name="Writer", **wire(writer_message, drafted, writer))
        .subflow("critic", critic_chart, name="Critic",
                 **wire(critic_message, lambda text: {trace.CRITIQUE: text}, critic))
        .decide("Verdict", verdict, id="verdict", description="Accept the draft or revise it")
        .branch("revise", "Revise", skip, id="revise", description="Revise the draft",
                loop_to="writer")
        .branch("accepted", "Accepted", skip, id="accepted",
                description="Hand back the accepted draft")
        .branch("out_of_rounds", "Out of rounds", out_of_rounds, id="out_of_rounds",
                description="Hand back the last draft; the round budget is spent")
        .default("out_of_rounds")
        .end()
        .build(description=name)
    )
    return Pattern(kind="Reflection", chart=chart, runners=[writer, critic],
                   remake=lambda rs: reflection(rs[0], rs[1], max_rounds=max_rounds,
                                                accept=accept, name=name))
