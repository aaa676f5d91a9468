"""``swarm``: agents hand the work to one another until one answers, within a hop budget.

Specialists that pass a request along (triage to billing to refunds) solve what no single
prompt covers. After each agent answers, a router picks the next agent or finishes; by
default the agents themselves decide by writing a ``HANDOFF: <agent id>`` line. Each hand-off
is a decider with its reason on the record and each turn a mounted subflow, so the recording
shows the whole relay and the answer backtracks into the agent that gave it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, RunError
from ..flow import Decision, Scope, flow_chart
from ..flow._scope import ReadView
from ..runs import trace
from ._base import Runner, check_runner
from ._members import with_member
from ._pattern import Pattern, begin, call_user, check_budget, check_callable, check_ids, rule, skip

__all__ = ["Handoff", "handoff_marker", "handoff_message", "swarm"]

_MARKER = re.compile(r"^\s*HANDOFF\s*:\s*([^\s/#]+)\s*$", re.IGNORECASE | re.MULTILINE)
_RESERVED = frozenset({"start", "handoff", "done", "out_of_hops"})


@dataclass(frozen=True, slots=True)
class Handoff:
    """What a router sees after an agent answered."""

    task: str
    """The message the swarm was given."""
    agent: str
    """The id of the agent that just answered."""
    answer: str
    """Its answer."""
    hops: int
    """Hand-offs made so far."""


Route = Callable[[Handoff], str | Awaitable[str | None] | None]


def handoff_marker(turn: Handoff) -> str | None:
    """The default router: the last ``HANDOFF: <agent id>`` line of the answer, else finish."""
    found = _MARKER.findall(turn.answer)
    return found[-1] if found else None


def handoff_message(task: str, agent: str, answer: str) -> str:
    """What the next agent is sent: the original request and the note it was handed."""
    return f"{task}\n\nHanded over by {agent}:\n{answer}"


def swarm(*agents: tuple[str, Runner], max_hops: int, route: Route | None = None,
          start: str | None = None, name: str = "Swarm") -> Pattern:
    """``swarm(("triage", a), ("billing", b), max_hops=4)``: agents pass the work along.

    The ``start`` agent (default: the first) gets the message. After each answer,
    ``route(Handoff)`` returns the next agent's id, or None to finish with that answer (the
    default router reads a ``HANDOFF: <id>`` line). The next agent is sent
    ``handoff_message(task, agent, answer)``. A route to an unknown id fails the run. When
    ``max_hops`` hand-offs were made and the router asks for another, the swarm stops with
    the last answer (``stopped_early="max_hops"``). State keeps ``speaker``, ``hops`` and
    ``relay`` (the agent ids in the order they answered).
    """
    where = "swarm"
    budget = check_budget(max_hops, where=where, name="max_hops")
    if len(agents) < 2 or not all(isinstance(a, tuple) and len(a) == 2 for a in agents):
        raise ConfigurationError(
            f"{where} needs at least two (id, runner) agents, got {agents!r}")
    ids = [agent_id for agent_id, _ in agents]
    check_ids(ids, where=where, reserved=_RESERVED)
    router: Route = route if route is not None else handoff_marker
    check_callable(router, where=where, name="route", what="(Handoff) -> agent id or None")
    first = start if start is not None else ids[0]
    if first not in ids:
        raise ConfigurationError(
            f"{where}(start={first!r}) is not one of the agents ({', '.join(ids)}); "
            "pass one of their ids")
    charts = [(agent_id, check_runner(runner, f"{where} agent {agent_id!r}"))
              for agent_id, runner in agents]

    async def hand_off(scope: Scope) -> Decision:
        speaker = scope.get(trace.SPEAKER)
        hops = int(scope.get(trace.HOPS) or 0)
        if speaker is None:
            chosen, label = first, "the first agent takes the task"
            scope[trace.CURRENT] = str(scope[trace.TASK])
            evidence = [rule(0, chosen, label, True, start=first)]
            return Decision(chosen, {"chosen": chosen, "default": "done", "rules": evidence})
        answer = str(scope[trace.FINAL_CONTENT])
        turn = Handoff(task=str(scope[trace.TASK]), agent=str(speaker), answer=answer, hops=hops)
        wanted = await call_user(router, turn)
        if wanted is not None and wanted not in ids:
            raise RunError(f"{where}: route() sent {speaker!r}'s answer to {wanted!r}, which is "
                           f"not an agent here ({', '.join(ids)}); return one of them or None")
        if wanted is None:
            chosen, label = "done", f"{speaker} answered; no hand-off"
        elif hops >= budget:
            chosen, label = "out_of_hops", f"{speaker} asked for {wanted}; {hops} of {budget} " \
                "hops used"
        else:
            chosen, label = wanted, f"{speaker} handed off to {wanted} (hop {hops + 1} of " \
                f"{budget})"
            scope[trace.HOPS] = hops + 1
            scope[trace.CURRENT] = handoff_message(turn.task, turn.agent, answer)
        evidence = [rule(0, chosen, label, True, speaker=speaker, wanted=wanted, hops=hops)]
        return Decision(chosen, {"chosen": chosen, "default": "done", "rules": evidence})

    members = dict(agents)

    def turn_of(agent_id: str) -> dict[str, Any]:
        def take(parent: ReadView) -> dict[str, Any]:
            return {trace.MESSAGE: str(parent[trace.CURRENT])}

        def give(inner: ReadView) -> dict[str, Any]:
            text = str(inner.get(trace.FINAL_CONTENT, ""))
            return {"speaker": agent_id, "final_content": text, "relay": [agent_id]}

        return with_member(members[agent_id], {"input": take, "output": give})

    def out_of_hops(scope: Scope) -> None:
        scope[trace.STOPPED_EARLY] = "max_hops"

    builder = (flow_chart("Start", begin, id="start", description="Take the request")
               .decide("Hand off", hand_off, id="handoff",
                       description="Choose the agent that answers next"))
    for agent_id, chart in charts:
        builder = builder.branch(agent_id, agent_id, chart, id=agent_id, loop_to="handoff",
                                 **turn_of(agent_id))
    chart = (builder
             .branch("done", "Done", skip, id="done", description="Hand back the last answer")
             .branch("out_of_hops", "Out of hops", out_of_hops, id="out_of_hops",
                     description="Hand back the last answer; the hop budget is spent")
             .default("done")
             .end()
             .build(description=name))
    return Pattern(kind="Swarm", chart=chart, runners=[runner for _, runner in agents],
                   remake=lambda rs: swarm(*zip(ids, rs, strict=True), max_hops=max_hops,
                                           route=route, start=start, name=name))
