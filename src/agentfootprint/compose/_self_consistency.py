"""``self_consistency``: ask one runner ``n`` times on the same message, answer by majority.

Sampling the same question several times and keeping the most common answer trades calls for
reliability. Each sample is its own mounted branch, the tally is a decider whose evidence is
every ballot and its count, and the answer stage reads only the winning sample, so the
recording shows which samples agreed and the answer backtracks into the one that produced it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ..errors import RunError
from ..flow import Decision, Scope, flow_chart
from ..runs import trace
from ._base import Runner, check_runner
from ._pattern import (
    Pattern,
    begin,
    call_user,
    check_budget,
    check_callable,
    rule,
    take_answer,
    wire,
)

__all__ = ["default_ballot", "self_consistency"]

Ballot = Callable[[str], str | Awaitable[str]]
TieBreak = Literal["first"] | Callable[[list[str]], str | Awaitable[str]]


def default_ballot(answer: str) -> str:
    """What counts as "the same answer" by default: case and spacing ignored."""
    return " ".join(answer.split()).casefold()


def self_consistency(runner: Runner, *, n: int, vote: Ballot | None = None,
                     tie: TieBreak = "first", name: str = "SelfConsistency") -> Pattern:
    """``n`` samples of ``runner`` on the same message; the majority answer wins.

    ``vote(answer) -> str`` is the ballot an answer casts (default: ``default_ballot``; pass
    one that extracts the final number, say, so differently worded answers agree). The
    answer handed back is the first sample (in sample order) that cast the winning ballot.
    ``tie`` settles a tie for the most votes: ``"first"`` takes the tied ballot cast first in
    sample order; a function receives one answer per tied ballot and returns one of them.
    The tally is stored under ``votes`` and the winning sample id under ``winner``.
    """
    where = "self_consistency"
    count = check_budget(n, where=where, name="n", minimum=2)
    ballot_of: Ballot = vote if vote is not None else default_ballot
    check_callable(ballot_of, where=where, name="vote", what="answer -> ballot (str)")
    if tie != "first":
        check_callable(tie, where=where, name="tie",
                       what="(tied answers) -> one of them, or the string 'first'")
    chart = check_runner(runner, f"{where} runner")
    ids = [f"sample-{i}" for i in range(1, count + 1)]

    async def tally(scope: Scope) -> Decision:
        answers = {sid: str(scope.get(f"answer:{sid}", "")) for sid in ids}
        cast: dict[str, str] = {}
        for sid, answer in answers.items():
            cast[sid] = str(await call_user(ballot_of, answer))
        votes: dict[str, int] = {}
        first_by: dict[str, str] = {}
        for sid, ballot in cast.items():
            votes[ballot] = votes.get(ballot, 0) + 1
            first_by.setdefault(ballot, sid)
        most = max(votes.values())
        tied = [ballot for ballot, got in votes.items() if got == most]
        how = f"majority: {most} of {count} votes"
        if len(tied) == 1:
            won = tied[0]
        elif tie == "first":
            won, how = tied[0], f"tie at {most} of {count} votes: first cast wins"
        else:
            offered = [answers[first_by[ballot]] for ballot in tied]
            picked = await call_user(tie, offered)
            if picked not in offered:
                raise RunError(f"{where} tie={tie!r} returned {picked!r}, which is not one of "
                               f"the tied answers {offered!r}; return one of them")
            won = tied[offered.index(picked)]
            how = f"tie at {most} of {count} votes: broken by tie()"
        winner = first_by[won]
        scope[trace.VOTES] = votes
        scope[trace.WINNER] = winner
        rules = [rule(index, first_by[ballot], how if ballot == won else f"{got} of {count} votes",
                      ballot == won, ballot=ballot, votes=got)
                 for index, (ballot, got) in enumerate(votes.items())]
        return Decision(winner, {"chosen": winner, "default": ids[0], "rules": rules})

    def record_answer(sid: str) -> Callable[[str], dict[str, Any]]:
        return lambda text: {f"answer:{sid}": text}

    children = [(sid, chart, {"name": sid, **wire(lambda parent: str(parent[trace.CURRENT]),
                                                   record_answer(sid), runner)})
                for sid in ids]
    builder = (flow_chart("Start", begin, id="start", description="Take the message")
               .parallel(*children, fail_fast=True)
               .decide("Vote", tally, id="vote", description="Count the ballots"))
    for sid in ids:
        builder = builder.branch(sid, f"Answer from {sid}", take_answer(f"answer:{sid}"),
                                 id=f"take-{sid}", description=f"Hand back {sid}'s answer")
    return Pattern(kind="SelfConsistency", chart=builder.default(ids[0]).end().build(
        description=name), runners=[runner],
        remake=lambda rs: self_consistency(rs[0], n=n, vote=vote, tie=tie, name=name))
