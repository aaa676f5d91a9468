"""``tree_of_thoughts``: grow several next steps from the best ones so far, level by level.

A beam search over thoughts: at each level every kept thought is expanded into ``breadth``
proposals (one mounted proposer per slot, run at once), each proposal is scored, and the
``beam`` best are kept for the next level. The selector, the scores and the stop decision are
on the record, so the recording shows every branch that was explored and why one won.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, RunError
from ..flow import Chart, Decision, Scope, Selection, flow_chart
from ..flow._scope import ReadView
from ..runs import trace
from ._base import Runner, check_runner, is_runner
from ._members import with_member
from ._pattern import (
    MAX_PASSES,
    Pattern,
    begin,
    call_user,
    check_budget,
    rule,
    skip,
    take_answer,
    wire,
)

__all__ = ["Thought", "propose_message", "score_message", "tree_of_thoughts"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class Thought:
    """One proposal, as the scorer sees it."""

    task: str
    """The problem the pattern was given."""
    text: str
    """What the proposer answered."""
    path: tuple[str, ...]
    """The thoughts it grew from, first level first (empty at level 1)."""
    level: int
    """1 for the first proposals, 2 for their children, and so on."""


Score = Callable[[Thought], float | Awaitable[float]]


def propose_message(task: str, path: Sequence[str], option: int, breadth: int) -> str:
    """What the proposer is sent: the problem, the steps so far, which option this is."""
    text = f"Problem:\n{task}"
    if path:
        text += "\n\nSteps so far:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(path, 1))
    return text + f"\n\nPropose the next step (option {option} of {breadth})."


def score_message(thought: Thought) -> str:
    """What a scoring runner is sent; its answer's first number is the score."""
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate([*thought.path, thought.text], 1))
    return (f"Problem:\n{thought.task}\n\nProposed steps:\n{steps}\n\n"
            "Rate how promising the last step is from 0 to 10; answer with the number.")


def tree_of_thoughts(propose: Runner, score: Score | Runner, *, breadth: int, depth: int,
                     beam: int = 1, stop_at: float | None = None,
                     name: str = "TreeOfThoughts") -> Pattern:
    """Beam search: ``depth`` levels of ``breadth`` proposals per kept thought.

    ``propose`` is sent ``propose_message(task, path, option, breadth)``. ``score`` is a
    function ``(Thought) -> float`` or a runner sent ``score_message(thought)`` whose answer's
    first number is the score. Higher is better; ties keep proposal order. The ``beam`` best
    proposals of a level are expanded on the next; the search stops after ``depth`` levels,
    or earlier once the best score of a level reaches ``stop_at``. The answer is the text of
    the best proposal of the last level. State keeps ``level``, ``candidates`` (this level's
    proposals with their scores) and ``frontier`` (the kept paths).
    """
    where = "tree_of_thoughts"
    width = check_budget(breadth, where=where, name="breadth", minimum=2)
    levels = check_budget(depth, where=where, name="depth")
    keep = check_budget(beam, where=where, name="beam")
    if width * keep > MAX_PASSES:
        raise ConfigurationError(f"{where}: breadth * beam = {width * keep} proposals per level "
                                 f"is more than {MAX_PASSES}; lower breadth= or beam=")
    if stop_at is not None and (isinstance(stop_at, bool)
                                or not isinstance(stop_at, (int, float))):
        raise ConfigurationError(f"{where}(stop_at={stop_at!r}) must be a number or None")
    propose_chart = check_runner(propose, f"{where} propose")
    score_chart: Chart | None = None
    score_fn: Score | None = None
    runners: list[Runner] = [propose]
    if is_runner(score):
        score_chart = check_runner(score, f"{where} score")
        runners.append(score)
    elif callable(score):
        score_fn = score
    else:
        raise ConfigurationError(f"{where}(score={score!r}) must be a function "
                                 "(Thought) -> float or a runner that answers with a number")
    slots = [f"thought-{i}" for i in range(1, width * keep + 1)]
    slot_chart = propose_chart if score_chart is None else _scored(propose_chart, score_chart,
                                                                     propose, score)

    def expand(scope: Scope) -> Selection:
        level = int(scope.get(trace.LEVEL) or 0) + 1
        scope[trace.LEVEL] = level
        frontier = list(scope.get(trace.FRONTIER) or [{"path": []}])
        chosen = slots[: len(frontier) * width]
        scope[trace.EXPANDING] = list(chosen)
        rules = []
        for i, slot in enumerate(chosen):
            path = frontier[i // width]["path"]
            rules.append(rule(i, slot, f"option {i % width + 1} of {width}", True,
                              level=level, grows_from=path[-1] if path else "(the problem)"))
        return Selection(tuple(chosen), {"rules": rules})

    def slot_wiring(index: int) -> dict[str, Any]:
        def take(parent: ReadView) -> dict[str, Any]:
            path = list(list(parent.get(trace.FRONTIER) or [{"path": []}])[index // width]["path"])
            task = str(parent[trace.TASK])
            message = propose_message(task, path, index % width + 1, width)
            if score_chart is None:
                return {trace.MESSAGE: message}
            return {trace.MESSAGE: message, trace.TASK: task, trace.PATH: path,
                    trace.LEVEL: int(parent[trace.LEVEL])}

        def give(inner: ReadView) -> dict[str, Any]:
            if score_chart is None:
                return {trace.THOUGHT_OF.of(slots[index]): str(inner.get(trace.FINAL_CONTENT, ""))}
            return {trace.THOUGHT_OF.of(slots[index]): str(inner[trace.THOUGHT]),
                    trace.RATING_OF.of(slots[index]): str(inner[trace.RATING])}

        options = {"input": take, "output": give}
        return options if score_chart is not None else with_member(propose, options)

    async def judge(scope: Scope) -> None:
        task, level = str(scope[trace.TASK]), int(scope[trace.LEVEL])
        frontier = list(scope.get(trace.FRONTIER) or [{"path": []}])
        rows = []
        for i, slot in enumerate(scope[trace.EXPANDING]):
            text = str(scope[trace.THOUGHT_OF.of(slot)])
            path = list(frontier[i // width]["path"])
            if score_fn is not None:
                value = await call_user(score_fn, Thought(task, text, tuple(path), level))
            else:
                value = _first_number(str(scope[trace.RATING_OF.of(slot)]), slot)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RunError(f"{where} score() returned {value!r} for {slot}; "
                               "return a number (higher is better)")
            rows.append({"slot": slot, "text": text, "path": [*path, text],
                         "score": float(value)})
        ranked = sorted(rows, key=lambda row: -row["score"])
        scope[trace.CANDIDATES] = rows
        scope[trace.FRONTIER] = [{"path": row["path"]} for row in ranked[:keep]]
        scope[trace.BEST] = ranked[0]["slot"]
        scope[trace.BEST_SCORE] = ranked[0]["score"]

    def next_level(scope: Scope) -> Decision:
        level, best = int(scope[trace.LEVEL]), str(scope[trace.BEST])
        top = float(scope[trace.BEST_SCORE])
        if stop_at is not None and top >= stop_at:
            chosen, label = best, f"best score {top:g} reached stop_at={stop_at:g}"
        elif level >= levels:
            chosen, label = best, f"depth {levels} reached; {best} scored best"
        else:
            chosen, label = "deeper", f"level {level} of {levels} done"
        evidence = [rule(0, chosen, label, True, level=level, best=best, score=top)]
        return Decision(chosen, {"chosen": chosen, "default": "deeper", "rules": evidence})

    builder = (flow_chart("Start", begin, id="start", description="Take the problem")
               .select("Expand", expand, id="expand", fail_fast=True,
                       description="Propose next steps from the kept thoughts"))
    for index, slot in enumerate(slots):
        builder = builder.branch(slot, f"Propose {slot}", slot_chart, id=slot,
                                 **slot_wiring(index))
    decide = (builder.end()
              .then("Score", judge, id="score", description="Score the proposals, keep the best")
              .decide("Next", next_level, id="next", description="Go deeper or answer")
              .branch("deeper", "Deeper", skip, id="deeper", loop_to="expand"))
    for slot in slots:
        decide = decide.branch(slot, f"Answer with {slot}", take_answer(trace.THOUGHT_OF.of(slot)),
                               id=f"take-{slot}", description=f"Hand back {slot}")
    chart = decide.end().build(description=name)
    def remake(rs: list[Runner]) -> Pattern:
        return tree_of_thoughts(rs[0], rs[1] if score_chart is not None else score,
                                breadth=breadth, depth=depth, beam=beam, stop_at=stop_at,
                                name=name)

    return Pattern(kind="TreeOfThoughts", chart=chart, runners=runners, remake=remake)


def _scored(propose_chart: Chart, score_chart: Chart, propose: object, score: object) -> Chart:
    """One slot when a runner scores: propose, then score that proposal."""

    def rating_message(parent: ReadView) -> str:
        thought = Thought(str(parent[trace.TASK]), str(parent[trace.THOUGHT]),
                          tuple(parent[trace.PATH]), int(parent[trace.LEVEL]))
        return score_message(thought)

    return (flow_chart("Start", skip, id="start", description="Take the slot's input")
            .subflow("propose", propose_chart, name="Propose",
                     **wire(lambda parent: str(parent[trace.MESSAGE]),
                            lambda text: {trace.THOUGHT: text}, propose))
            .subflow("rate", score_chart, name="Rate",
                     **wire(rating_message, lambda text: {trace.RATING: text}, score))
            .build(description="Propose a step and score it"))


def _first_number(text: str, slot: str) -> float:
    found = _NUMBER.search(text)
    if found is None:
        raise RunError(f"tree_of_thoughts: the score runner answered {text!r} for {slot}, "
                       "which holds no number; prompt it to answer with a number")
    return float(found.group())
