"""Member agents with memory inside a composition: whose conversation, which turn, whose claim.

A member agent's seed needs an ``identity`` (whose memory it reads and writes); it then
resolves its own turn as ``max(host_turn, max_stored_turn + 1)`` over the stores it writes to
and claims it under an owner of its own (the run id and its seed step), as a standalone run
does (seed 000). So two members writing one conversation never share a turn number, in a
``Sequence`` or side by side in a ``Parallel``, and a loop's body that runs twice takes two.

A composition run hands each member the identity given to ``run(..., identity=...)``, else the
member's own ``Agent(identity=...)``; a member with neither is refused before anything runs.
The identity record is the composition's run argument too, so a paused run's checkpoint
carries it and ``resume`` restores it in another process; the outermost start stage records
it in the run's own state, so an explanation re-runs the members under the same one. When the
run ends (not paused), each member run's claim is settled or given back, as an agent's own run
does. Nothing here runs for a composition without memory members.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agent._agent import Agent
from ..errors import ConfigurationError
from ..flow import FlowRun
from ..flow._scope import ReadView
from ..runs import trace

if TYPE_CHECKING:
    from ..memory._identity import MemoryIdentity

__all__ = ["MemberRun", "member_run", "memory_agents", "with_member"]


@dataclass(frozen=True, slots=True)
class MemberRun:
    """What one composition run hands its memory members (kept in a context variable)."""

    identity: MemoryIdentity | None
    """The identity given to the composition's run (wins over a member's own)."""

    def args(self) -> dict[str, Any]:
        """The composition's own run arguments that carry it across a pause."""
        from ..memory._stages import identity_record

        return {trace.IDENTITY: None if self.identity is None
                else identity_record(self.identity)}


member_run: ContextVar[MemberRun | None] = ContextVar("agentfootprint_member_run",
                                                      default=None)


def memory_agents(runners: Any) -> Iterator[tuple[str, Agent]]:
    """``(where, agent)`` for every agent with memory in the tree of ``runners``, once each."""
    seen: set[int] = set()

    def walk(items: Any, where: str) -> Iterator[tuple[str, Agent]]:
        for runner in items:
            if isinstance(runner, Agent):
                if runner.spec.memories and id(runner) not in seen:
                    seen.add(id(runner))
                    yield where, runner
            else:
                nested = getattr(runner, "runners", None)
                if isinstance(nested, list):
                    yield from walk(nested, type(runner).__name__)

    yield from walk(runners, "")


def missing_identity(where: str, agent: Agent) -> ConfigurationError:
    """The one-sentence error for a memory member that has no identity to run under."""
    return ConfigurationError(
        f"{where} member Agent {agent.name!r} has memory but no identity: pass "
        f"identity=MemoryIdentity('conversation-id') to {where}.run(...) or to that Agent(...)")


def identity_of(agent: Agent, given: MemoryIdentity | None) -> MemoryIdentity | None:
    """The identity a member runs under: the run's, else the member's own."""
    own: MemoryIdentity | None = agent.identity
    return given if given is not None else own


def start_members(composition: Any, identity: object) -> MemberRun | None:
    """Check every memory member has an identity to run under (None: no memory members)."""
    from ..agent._checks import check_identity

    given = None if identity is None else check_identity(identity)
    members = list(memory_agents(composition.runners))
    if not members:
        return None
    for where, agent in members:
        if identity_of(agent, given) is None:
            raise missing_identity(where or type(composition).__name__, agent)
    return MemberRun(identity=given)


def resumed_members(flow: Mapping[str, Any]) -> MemberRun | None:
    """The member context a paused run's checkpoint carries (None: it had no memory)."""
    from ..memory._stages import identity_from_record

    args = flow.get("args")
    if not isinstance(args, Mapping) or trace.IDENTITY not in args:
        return None
    return MemberRun(identity=identity_from_record(args.get(trace.IDENTITY)))


def member_args(runner: object) -> dict[str, Any]:
    """What a memory member's mounted input adds: the identity record it runs under."""
    if not isinstance(runner, Agent) or not runner.spec.memories:
        return {}
    from ..memory._stages import identity_record

    members = member_run.get()
    chosen = identity_of(runner, members.identity if members is not None else None)
    if chosen is None:
        raise missing_identity("a composition", runner)
    return {trace.IDENTITY: identity_record(chosen)}


def with_member(runner: object, options: dict[str, Any]) -> dict[str, Any]:
    """Mount ``options`` whose input mapping also hands a memory member what it needs."""
    if not isinstance(runner, Agent) or not runner.spec.memories:
        return options
    take: Callable[[ReadView], Mapping[str, Any]] = options["input"]

    def take_with_member(parent: ReadView) -> Mapping[str, Any]:
        return {**take(parent), **member_args(runner)}

    return {**options, "input": take_with_member}


async def end_member_claims(composition: Any, run: FlowRun) -> int:
    """End each member run's hold on its turn, as an agent's own run does at its end; the
    highest turn a member took (1 when none did).

    A paused run keeps its claims. A member whose memory writes ran settles its claim; one that
    wrote nothing gives its turn back. Claims are found in the log (a member's seed writes its
    owner and turn, its mount its identity), so a resumed run also ends the claims of members
    that ran before the pause.
    """
    from ..memory._stages import identity_from_record
    from ..memory._turn import release_turn_claim

    claims: dict[str, tuple[str, int]] = {}
    identities: dict[str, Any] = {}
    wrote: set[str] = set()
    for record in run.log.records:
        values = {change.key: change.value for change in record.changes}
        owner, turn = values.get(trace.TURN_CLAIM), values.get(trace.TURN)
        if isinstance(owner, str) and isinstance(turn, int):
            claims[record.ns] = (owner, turn)
        if trace.IDENTITY in values:
            identities.setdefault(record.ns, values[trace.IDENTITY])
        tail = record.stage_id.rpartition("/")[2]
        if record.kind == "subflow-exit" and trace.MEMORY_WRITE.matches(tail):
            wrote.add(record.ns)
    highest = max((turn for _, turn in claims.values()), default=1)
    if run.paused:
        return highest
    stores = [m.store for _, agent in memory_agents(composition.runners)
              for m in agent.spec.memories if m.write is not None]
    for ns, (owner, turn) in claims.items():
        identity = identity_from_record(identities.get(ns))
        if identity is not None and stores:
            await release_turn_claim(stores=stores, identity=identity, turn=turn,
                                     owner=owner, keep=ns in wrote)
    return highest
