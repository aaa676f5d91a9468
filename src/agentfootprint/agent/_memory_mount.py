"""Memory in the loop: the turn resolved in Seed, recall mounted after it, writes after Finalize.

Each memory's read chart runs as a subflow right after Seed and lifts its ``recall`` into the
agent's state; each recalled entry then lands as its own tracked injection
(``memory:<id>#<entry>``), with an evaluation row saying which turn it came from. Each write
chart runs after Finalize with the turn's ``new_messages`` (and, for causal memories, the run's
evidence).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..flow import Scope
from ..flow._builder import FlowBuilder
from ..flow._durable import durable_step
from ..flow._scope import ReadView
from ..runs import trace
from ._spec import AgentSpec

__all__ = ["MemoryStages", "end_turn_claim", "mount_memories"]


class MemoryStages:
    """The memory-related parts of the loop's stage set (mixed into it)."""

    spec: AgentSpec

    if TYPE_CHECKING:  # provided by the loop's stage set

        def _seed(self, scope: Scope, turn: int) -> None: ...

        @staticmethod
        def _host_turn(scope: Scope) -> int: ...

    async def seed_with_memory(self, scope: Scope) -> None:
        """Seed, with the turn resolved once over the memories' stores (seed 000).

        The run claims its turn under an owner token kept in state: a replay presents the same
        token and keeps its turn; if the turn was given back and another run took it meanwhile
        (possible only when nothing was written under it), the replay resolves a new one.
        """
        resumed = scope.args.get(trace.RESUME_STATE)
        if resumed is None:
            rid = scope.runtime_stage_id  # a composition member's claim is its own
            owner = scope.run_id if "/" not in rid else f"{scope.run_id}/{rid}"
            scope[trace.TURN_CLAIM] = owner
            self._seed(scope, await self._resolve_turn(scope, self._host_turn(scope), owner))
            return
        from ..memory._stages import identity_record
        from ..memory._turn import resolve_turn_number

        identity = scope.args[trace.IDENTITY]
        scope[trace.IDENTITY] = identity_record(identity)
        turn = int(resumed[trace.TURN])
        owner = str(resumed.get(trace.TURN_CLAIM) or scope.run_id)
        self._seed(scope, turn)
        scope[trace.TURN_CLAIM] = owner
        stores = self._written_stores()
        if not await resolve_turn_number(stores=stores, identity=identity, host_turn=turn,
                                         claim=False) <= turn:
            return  # entries of this turn are stored: it is this run's, written in part
        if not await _reclaim(stores, identity, turn, owner):
            scope[trace.TURN] = await self._resolve_turn(scope, turn + 1, owner)

    def _written_stores(self) -> list[Any]:
        return [m.store for m in self.spec.memories if m.write is not None]

    async def _resolve_turn(self, scope: Scope, host_turn: int, owner: str) -> int:
        """The turn, resolved once over every store this run writes to and claimed there."""
        from ..memory._stages import identity_from_record, identity_record
        from ..memory._turn import resolve_turn_number

        given = scope.args[trace.IDENTITY]  # a composition member's input is the record
        identity = identity_from_record(given) or given
        if not isinstance(given, dict):
            scope[trace.IDENTITY] = identity_record(identity)
        return await durable_step(  # the claim is a durable run's step (flow/_durable.py)
            "turn-claim", lambda: resolve_turn_number(
                stores=self._written_stores(), identity=identity, host_turn=host_turn,
                owner=owner))

    def _recall_pieces(self, scope: Scope) -> list[tuple[str, Any, dict[str, Any]]]:
        """``(injection id, memory, piece)`` for everything each memory recalled this turn.

        A piece that holds one entry is its own injection, ``memory:<id>#<entry id>``, so an
        explanation (and an ablation) can point at a single stored entry.
        """
        out = []
        for memory in self.spec.memories:
            recall = scope.get(trace.MEMORY_RECALL.of(memory.id)) or {}
            for piece in recall.get("pieces") or ():
                ids = piece.get("entry_ids") or []
                key = (f"{memory.injection_id}#{ids[0]}" if len(ids) == 1
                       else memory.injection_id)
                out.append((key, memory, piece))
        return out

    def _recall_rows(self, scope: Scope) -> list[dict[str, Any]]:
        """Evaluation rows for recall: one per recalled piece, or one saying nothing came.

        A retrieved piece (RAG) carries its score and rank into its row, and every candidate
        the retrieval judged and dropped gets a row that did not fire: the near misses.
        """
        rows = []
        pieces = self._recall_pieces(scope)
        for memory in self.spec.memories:
            recall = scope.get(trace.MEMORY_RECALL.of(memory.id)) or {}
            flavor = recall.get("flavor", "memory")
            floor = recall.get("threshold")
            mine = [(key, piece) for key, owner, piece in pieces if owner is memory]
            trigger = f"memory recall ({memory.type}, {memory.strategy.kind})"
            if not mine:
                rows.append({"id": memory.injection_id, "flavor": flavor,
                             "trigger": trigger, "fired": False,
                             "reason": "nothing to recall", "entry_ids": [], "turns": [],
                             "store": memory.store.name})
            for key, piece in mine:
                ids, turns = list(piece["entry_ids"]), list(piece["turns"])
                where = f"turn {turns[0]}" if len(turns) == 1 else (
                    f"turns {', '.join(map(str, turns))}" if turns else "unnumbered entries")
                row = {"id": key, "flavor": flavor, "trigger": trigger, "fired": True,
                       "reason": f"recalled from {where}: {', '.join(ids)}",
                       "entry_ids": ids, "turns": turns, "store": memory.store.name}
                if "score" in piece:
                    bar = "" if floor is None else f" >= {floor:.2f}"
                    row.update(score=piece["score"], rank=piece["rank"],
                               reason=f"retrieved {ids[0]!r} (rank {piece['rank']}, "
                                      f"score {piece['score']:.2f}{bar})")
                rows.append(row)
            for miss in recall.get("near_misses") or ():
                bar = "" if floor is None or miss["reason"] != "below-threshold" \
                    else f" < {floor:.2f}"
                rows.append({"id": f"{memory.injection_id}#{miss['id']}", "flavor": flavor,
                             "trigger": trigger, "fired": False,
                             "reason": f"retrieved but dropped ({miss['reason']}): rank "
                                       f"{miss['rank']}, score {miss['score']:.2f}{bar}",
                             "entry_ids": [miss["id"]], "turns": [],
                             "store": memory.store.name, "score": miss["score"],
                             "rank": miss["rank"]})
        return rows

    def note_decision(self, scope: Scope, chosen: str, rationale: str) -> None:
        """Keep a route choice for this turn's causal snapshot (only when one is written)."""
        memories = self.spec.memories
        if not memories or not any(m.type == "causal" and m.write is not None
                                   for m in memories):
            return
        scope[trace.ROUTE_DECISIONS] = [*(scope.get(trace.ROUTE_DECISIONS) or ()), {
            "stage_id": trace.ROUTE, "chosen": chosen, "rule": rationale,
            "iteration": scope[trace.ITERATION]}]

    def _run_evidence(self, scope: Scope, iteration: int) -> dict[str, Any]:
        """What a causal snapshot keeps of this turn: tool calls, route choices, cost."""
        calls: dict[str, dict[str, Any]] = {}
        for message in scope[trace.HISTORY]:
            for call in message.get("tool_calls") or ():
                calls[call["id"]] = {"name": call["name"], "args": call.get("args") or {},
                                     "result_preview": "", "errored": False}
            if message["role"] == "tool" and message.get("tool_call_id") in calls:
                text = str(message["content"])
                calls[message["tool_call_id"]]["result_preview"] = (
                    text if len(text) <= 200 else text[:199] + "…")
        decisions = list(scope.get(trace.ROUTE_DECISIONS) or ())
        return {"iterations": iteration, "tool_calls": list(calls.values()),
                "decisions": decisions,
                "token_usage": {"input": scope[trace.INPUT_TOKENS],
                                "output": scope[trace.OUTPUT_TOKENS]}}


async def _reclaim(stores: list[Any], identity: Any, turn: int, owner: str) -> bool:
    from ..memory._store import TurnClaimStore
    from ..memory._turn import distinct_stores, release_turn_claim

    won: list[Any] = []
    for store in distinct_stores(stores):
        if not isinstance(store, TurnClaimStore):
            continue  # its claims belong to nobody: the turn stays claimed there
        if not await store.claim_turn(identity, turn, owner=owner):
            await release_turn_claim(stores=won, identity=identity, turn=turn, owner=owner,
                                     keep=False)
            return False
        won.append(store)
    return True


async def end_turn_claim(spec: AgentSpec, run: object) -> None:
    """End a finished run's hold on its turn (seed 000: a claim belongs to its run).

    A run that paused keeps it (it resumes under the same turn). A run whose memory writes
    began settles it: the claim then lives as long as the turn's entries. A run that ended
    before writing anything (failed, or its input denied) gives the turn back; a replay
    (``resume_on_error``) claims it again under the same owner. A run killed outright keeps
    its claim, so it can be resumed.
    """
    if not spec.memories:
        return  # (before any import: a run without memory never loads it)
    from ..flow import FlowRun

    if not isinstance(run, FlowRun) or run.paused:
        return
    from ..memory._stages import identity_from_record
    from ..memory._turn import release_turn_claim

    owner, turn = run.state.get(trace.TURN_CLAIM), run.state.get(trace.TURN)
    identity = identity_from_record(run.state.get(trace.IDENTITY))
    if not isinstance(owner, str) or not isinstance(turn, int) or identity is None:
        return
    wrote = any(trace.MEMORY_WRITE.matches(record.stage_id.split("/", 1)[0])
                for record in run.log.records)
    await release_turn_claim(stores=[m.store for m in spec.memories if m.write is not None],
                             identity=identity, turn=turn, owner=owner, keep=wrote)


def mount_memories(builder: FlowBuilder, spec: AgentSpec, *,
                    side: Literal["read", "write"]) -> FlowBuilder:
    """Mount each memory's read (after Seed) or write (after Finalize) chart as a subflow."""
    for memory in spec.memories:
        key = memory.id
        if side == "read":
            builder = builder.subflow(
                trace.MEMORY_READ.of(key), memory.read, name=f"Recall {key}",
                description=f"Recall from memory {key!r}",
                input=lambda s: {trace.IDENTITY: s[trace.IDENTITY], trace.TURN: s[trace.TURN],
                                 trace.MESSAGES: s[trace.HISTORY]},
                output=_recall_output(key))
        elif memory.write is not None:
            builder = builder.subflow(
                trace.MEMORY_WRITE.of(key), memory.write, name=f"Remember {key}",
                description=f"Write this turn to memory {key!r}",
                input=lambda s: {trace.IDENTITY: s[trace.IDENTITY], trace.TURN: s[trace.TURN],
                                 trace.NEW_MESSAGES: s[trace.NEW_MESSAGES],
                                 trace.RUN_EVIDENCE: s.get(trace.RUN_EVIDENCE)})
    return builder


def _recall_output(key: str) -> Callable[[ReadView], dict[str, Any]]:
    """Lift a memory read's recall (and its retrieval evidence) into the agent's state."""

    def output(inner: ReadView) -> dict[str, Any]:
        lifted = {trace.MEMORY_RECALL.of(key): inner.get(trace.RECALL)
                  or {"text": "", "entry_ids": [], "turns": []}}
        if trace.RETRIEVED in inner:
            lifted[trace.MEMORY_RETRIEVED.of(key)] = inner[trace.RETRIEVED]
        return lifted

    return output
