"""Backtrack: from the answer to the exact context that reached it, hop by hop.

    ANSWER   the final answer (the step that handed it back)
    READ     the LLM call that produced it, with the exact system prompt, messages and tools
    LANDED   the step whose commit put the suspect into what the call read
    ALLOWED  the trigger that let it in, and why it fired that iteration
    BORN     where it was authored: the define_* declaration, the tool call, the user

In a composition the chain crosses members: when the followed source reached an earlier
member's call, the chain reads the final call's message, then a FROM hop names the member whose
answer that message is (never "the user's message"), and continues in that member's call — the
same through an agent used as a tool (its result is the answer of an inner run).

A failed run has no answer: its chain is FAILED (the error, the step that raised it), then the
REQUEST that failed (a provider error), the BATCH of tool calls under way, the CONTEXT the
call was sent and the STATE the step read (see ``failure.py``).

A paused run has no answer yet either: its chain starts with PAUSED (the step it stopped at and
what it waits on — for a tool, the pending call with its arguments as recorded), and what is
traced is that pending call: the candidates of the LLM call that asked for it are ranked
against it, and the chain READ/LANDED/ALLOWED/BORN follows the best-supported one
(``_paused.py``). A pausable flow stage gives PAUSED and the STATE it read.

When no candidate shares a word with what is explained (every score 0) and no crossing
applies — the chain would not follow a handed-on answer into another member or run, no
structured field is explained, the answer is not one a composition step picked among its
members' answers, and no candidate is masked (a masked piece cannot be scored) — the chain says
so (an OVERLAP hop: none) instead of claiming that the model read an arbitrary sentence.

Every hop names a runtime stage id and every value is rebuilt from the commit log, so the
chain is the same on a live result and on a recording loaded in another process. Which
suspect is followed is chosen by an influence score — a correlational proxy, labelled as
such; only re-runs (``localize_context_bug``) may say a source is the cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, cast

from ..flow._redact import REDACTED
from ..runs import trace
from ..runs._view import CallView, Explainable, RunView
from ._across import Reached, is_carrier, reached_calls, suspects_across
from ._display import explanation_html, explanation_repr
from ._failure import Failure, failure_of
from ._field import field_origin
from ._influence import rank_suspects
from ._paused import Paused, pause_of
from ._suspects import Suspect

__all__ = ["Backtrack", "Hop", "HopKind", "backtrack"]

HopKind = Literal["ANSWER", "READ", "FROM", "LANDED", "ALLOWED", "BORN", "FIELD", "ATTEMPT",
                  "PAUSED", "OVERLAP", "FAILED", "REQUEST", "BATCH", "CONTEXT", "STATE",
                  "DONE"]
"""Every kind of hop a chain can hold (see ``Hop.kind``)."""


@dataclass(frozen=True, slots=True)
class Hop:
    """One link of the chain."""

    kind: HopKind
    """ANSWER, READ, FROM (a message handed on by another member or agent), LANDED, ALLOWED
    or BORN; FIELD and ATTEMPT for a structured output's field; PAUSED (then the chain of the
    pending tool call, or STATE for a flow stage) for a paused run; OVERLAP when no candidate
    shares a word with what is explained (no source is followed); for a failed run FAILED,
    REQUEST, BATCH, CONTEXT, STATE, DONE."""
    text: str
    runtime_stage_id: str | None = None


@dataclass(slots=True)
class Backtrack:
    """The chain for the followed suspect, plus the ranked candidate set it was chosen from."""

    answer: str
    """What was explained: the answer (a field's ``name value``); empty for a failed or paused
    run, which has none (a paused run's pending tool call is ``pause.pending``)."""
    hops: list[Hop]
    suspect: Suspect | None
    """The source the chain follows; None when none is (no candidate, no overlap, a failure,
    a flow stage's pause)."""
    sentence: str | None
    """The sentence of the suspect that aligns best with the answer (highlighted)."""
    system_prompt: str
    """Exactly what the model saw as its system prompt."""
    ranked: list[Any] = field(default_factory=list)
    """Every candidate with its proxy score, best first."""
    failure: Failure | None = None
    """Set when the run failed: the hops then explain the error, not an answer."""
    pause: Paused | None = None
    """Set when the run is paused: the hops then explain what it stopped at (the pending tool
    call, ranked against the candidates of the call that asked for it), not an answer."""

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    @property
    def paused(self) -> bool:
        """The run is paused: ``answer`` is empty and the chain explains the pause."""
        return self.pause is not None

    @property
    def no_overlap(self) -> bool:
        """No candidate shares a word with what is explained: no source is followed."""
        return any(hop.kind == "OVERLAP" for hop in self.hops)

    def __str__(self) -> str:
        lines = [f"{hop.kind:<8} {hop.text}" for hop in self.hops]
        if self.failure is not None:
            lines.insert(0, "RUN FAILED — it gave no answer; the error is what to explain.")
        if self.pause is not None:
            lines.insert(0, self.pause.headline())
        if self.ranked:
            lines.append("")
            lines.append("Candidates that reached the call that asked for it (proxy scores "
                         "against the pending tool call, not causes):" if self.pause is not None
                         else "Candidates that reached the call (proxy scores, not causes):")
            for item in self.ranked:
                lines.append(f"  {item.score:0.3f}  {item.suspect.label}")
        return "\n".join(lines)


def backtrack(source: Explainable, *, suspect: str | None = None,
              strategy: str = "lexical_overlap", field: str | None = None) -> Backtrack:
    """The chain from the final answer of ``source`` (a RunResult, FlowRun or Recording).

    ``suspect`` follows a given source id instead of the best-ranked removable one. The run is
    read once (``RunView``); every hop is a field of the call the answer came from. In a
    composition every member's sources are candidates (each labelled with its member); when the
    followed one reached an earlier member, the chain crosses into that member.

    ``field`` (a name or dotted path of the run's structured output) explains that field
    instead: FIELD (its value and the answer that validated), ATTEMPT for each answer sent back,
    then the chain from that answer's call, ranked against the field (``explain/_field.py``).
    """
    failure = failure_of(source)
    if failure is not None:
        return _failed(failure)
    view = RunView.of(source)
    paused = pause_of(source, view) if field is None else None
    if paused is not None:
        return _paused(view, paused, suspect, strategy)
    origin = field_origin(view, field) if field is not None else None
    reached = reached_calls(view, origin.call if origin is not None else None)
    call = reached[0].call
    answer = view.answer if view.answer is not None and view.members else call.answer
    if origin is not None:
        answer = origin.text
    hops = ([_hop(kind, text, rid) for kind, text, rid in origin.hops] if origin is not None
            else [Hop("ANSWER", f"{_quote(answer)}", reached[0].composed_by or call.answered_by)])
    return _follow(answer, hops, reached, suspect, strategy, what="the answer",
                   crossing=origin is not None or _chosen_among_members(view))


def _chosen_among_members(view: RunView) -> bool:
    """The run's answer is a member's answer that a composition step picked (a vote, a
    judge), not one a member handed back itself: the chain crosses from that choice into the
    member's context, so it follows the member's source even when nothing overlaps."""
    makers, writer = view.answer_members()
    return bool(makers) and writer is not None and all(writer != m.ns for m in makers)


def _paused(view: RunView, paused: Paused, suspect: str | None, strategy: str) -> Backtrack:
    """The chain of a paused run: PAUSED, then the pending tool call traced from the call that
    asked for it (or, for a flow stage, the state it read) — never an empty answer traced."""
    hops = [_hop(*paused.hop())]
    if paused.call is None:
        state = paused.state_line()
        if state is not None:
            hops.append(_hop(*state))
        if suspect is not None:
            raise KeyError(f"no source {suspect!r} reached a call: the run paused at "
                           f"{paused.where} without an LLM call asking for it")
        return Backtrack("", hops, None, None, "", [], pause=paused)
    reached = reached_calls(view, paused.call)
    chain = _follow(paused.pending, hops, reached, suspect, strategy,
                    what="the pending tool call", asked=True)
    return Backtrack("", chain.hops, chain.suspect, chain.sentence, chain.system_prompt,
                     chain.ranked, pause=paused)


def _follow(target: str, hops: list[Hop], reached: list[Reached], suspect: str | None,
            strategy: str, *, what: str, crossing: bool = False,
            asked: bool = False) -> Backtrack:
    """Rank every source that reached the calls (``reached``, the first one read) against
    ``target`` and follow the chosen one: READ (and the FROM crossings into another member or
    run), LANDED, ALLOWED, BORN. ``what`` names the target in words; ``crossing`` says a
    0-score source may still be followed (a structured field's chain, an answer a composition
    step picked among its members' answers); ``asked`` words the first READ as the call that
    asked for a pending tool call.

    When the best score is 0 and no crossing applies — no source was asked for, the chosen
    one is in the first call itself and carries no other member's or run's answer — the
    chain READs the call and says that no piece overlaps ``what`` (OVERLAP), instead of
    pinning it on a sentence that shares nothing with it. A masked piece (the run's redaction)
    cannot be scored, so with one among the candidates no-overlap cannot be said and the chain
    follows as before."""
    call = reached[0].call
    owners = suspects_across(reached)
    ranked = rank_suspects(target, [piece for piece, _ in owners], strategy=strategy)
    deeper = {id(p) for p, n in owners if n.via is not None or n.composed_by is not None}
    chosen = _choose(ranked, suspect, deeper)
    if chosen is None:
        hops.append(_call_read(call, asked))
        return Backtrack(target, hops, None, None, call.system, ranked)
    found, sentence = chosen.suspect, chosen.sentence
    node = next(n for p, n in owners if p is found)
    if (suspect is None and not crossing and ranked[0].score <= 0 and node.via is None
            and node.composed_by is None and not is_carrier(found)
            and not any(REDACTED in item.suspect.text for item in ranked)):
        hops.append(_call_read(call, asked))
        hops.append(Hop("OVERLAP", f"none — no piece of context that reached "
                                   f"{call.runtime_stage_id} shares a word with {what} (every "
                                   "candidate scores 0.000): no source is followed",
                        call.runtime_stage_id))
        return Backtrack(target, hops, None, None, call.system, ranked)
    hops.extend(_crossings(node))
    at, here = node.call, node.view
    where = "the system prompt" if found.slot == "system" else "the conversation"
    inner = [n.run_id for n in node.chain() if n.link == "tool"]
    if inner:
        where = f"{where} of run {inner[-1]}"
    shown = _quote(sentence or found.text)
    read = (f"the model asked for it after reading {where} (sentence: {shown})"
            if asked and node.via is None else f"{where} the model saw (sentence: {shown})")
    hops.append(Hop("READ", f"{at.runtime_stage_id} — {read}", at.runtime_stage_id))
    hops.append(_landed(at, found))
    hops.append(_allowed(here, at, found))
    hops.append(_born(here, at, found))
    return Backtrack(target, hops, found, sentence, at.system, ranked)


def _call_read(call: CallView, asked: bool = False) -> Hop:
    """A READ of the call as a whole (no sentence in it is claimed)."""
    lead = "the model asked for it; it saw a system prompt" if asked else "system prompt"
    return Hop("READ", f"{call.runtime_stage_id} — {lead} "
                       f"({len(call.system)} chars), {len(call.messages)} messages, "
                       f"{len(call.tools)} tools", call.runtime_stage_id)


def _hop(kind: str, text: str, runtime_stage_id: str | None) -> Hop:
    return Hop(cast(HopKind, kind), text, runtime_stage_id)


def _crossings(node: Reached) -> list[Hop]:
    """READ and FROM hops from the final call down to the call ``node`` (none when it is the
    final call): each call read a message that was another member's (or run's) answer."""
    hops: list[Hop] = []
    chain = node.chain()
    if chain[0].composed_by is not None:
        hops.append(Hop("FROM", f"the answer was made by {chain[0].composed_by} from the answer "
                                f"of member {chain[0].name!r} "
                                f"({chain[0].call.runtime_stage_id})",
                        chain[0].composed_by))
    for reader, fed in pairwise(chain):
        call = reader.call
        if fed.link == "tool":
            piece = next((p for p in call.pieces if p.kind == "tool"
                          and fed.run_id in p.upstream), None)
            text = piece.text if piece is not None else fed.call.answer
            hops.append(Hop("READ", f"{call.runtime_stage_id} — the tool result the model saw "
                                    f"({_quote(text)})", call.runtime_stage_id))
            hops.append(Hop("FROM", f"that result of {fed.name} is the answer of its own run "
                                    f"{fed.run_id} (an agent used as a tool)",
                            piece.runtime_stage_id if piece is not None else None))
            continue
        piece = next((p for p in call.pieces if p.kind == "user" and fed.name in p.upstream),
                     None)
        text = piece.text if piece is not None else fed.call.answer
        member = reader.view.member_of(call)
        mount = member.ns if member is not None else None
        hops.append(Hop("READ", f"{call.runtime_stage_id} — the message the model was sent "
                                f"({_quote(text)})", call.runtime_stage_id))
        who = f"member {member.name!r} was" if member is not None else "it was"
        hops.append(Hop("FROM", f"{who} sent the answer of member {fed.name!r} "
                                f"({fed.call.runtime_stage_id}), handed on by the composition "
                                "— not the user's message", mount))
    return hops


def _failed(failure: Failure) -> Backtrack:
    """The chain of a failed run: the error and the step that raised it, then the context at
    that moment — never an answer traced to a source (a failed run has none)."""
    hops = [Hop("FAILED", f"{failure.error} — raised by {failure.where}",
                failure.runtime_stage_id)]
    hops.extend(_hop(kind, text, rid) for kind, text, rid in failure.context_lines())
    system = failure.call.system if failure.call is not None else ""
    return Backtrack("", hops, None, None, system, [], failure)


def _choose(ranked: list[Any], suspect: str | None, deeper: set[int] | None = None) -> Any:
    """The suspect to follow: the one asked for, else the best-ranked removable one — but not a
    message or tool result that merely carries another member's answer when a removable source
    behind it aligns with the answer too (the chain then crosses into that member)."""
    if suspect is not None:
        for item in ranked:
            if item.suspect.id == suspect:
                return item
        known = ", ".join(sorted({i.suspect.id for i in ranked}))
        raise KeyError(f"no source {suspect!r} reached the call; sources: {known}")
    removable = [item for item in ranked if item.suspect.removable]
    if removable and is_carrier(removable[0].suspect) and deeper:
        behind = [item for item in removable
                  if id(item.suspect) in deeper and not is_carrier(item.suspect)
                  and item.score > 0]
        if behind:
            return behind[0]
    if not removable:
        behind = [item for item in ranked
                  if deeper and id(item.suspect) in deeper and item.suspect.removable]
        if behind:
            return behind[0]
    return removable[0] if removable else (ranked[0] if ranked else None)


def _landed(call: CallView, found: Suspect) -> Hop:
    if found.slot == "system":
        position = next((p.position for p in call.pieces
                         if p.slot == "system" and p.id == found.id), None)
        where = (f" (piece {position + 1} of {call.system_pieces})"
                 if position is not None and call.system_pieces else "")
        return Hop("LANDED", f"{found.runtime_stage_id} wrote it into the system prompt{where}",
                   found.runtime_stage_id)
    return Hop("LANDED", f"{found.runtime_stage_id} appended it to the conversation",
               found.runtime_stage_id)


def _allowed(view: RunView, call: CallView, found: Suspect) -> Hop:
    if found.kind in ("injection", "message"):
        row = call.row(found.id)
        if row is not None:
            return Hop("ALLOWED", f"trigger {row['trigger']} — {row['reason']}",
                       call.evaluation_writer)
        return Hop("ALLOWED", "no evaluation was recorded for it", call.evaluation_writer)
    if found.kind == "tool":
        return Hop("ALLOWED", f"the model asked for tool {found.id!r} and the route chose "
                              "to run it", view.route_before(found.runtime_stage_id))
    if found.kind == "user" and found.upstream:
        return Hop("ALLOWED", "the composition sends each member the answer it is handed", None)
    if found.kind == "user":
        return Hop("ALLOWED", "the user's message is always sent", None)
    return Hop("ALLOWED", "the base system prompt is always sent", None)


def _born(view: RunView, call: CallView, found: Suspect) -> Hop:
    if found.kind == "injection" and found.flavor in ("memory", "rag"):
        row: Mapping[str, Any] = call.row(found.id) or {}
        memory_id = trace.MEMORY_INJECTION.strip(found.id).split(trace.ENTRY_SEPARATOR)[0]
        read = view.memory_read(memory_id, call)
        store = row.get("store", "the store")
        if found.flavor == "rag":
            chunk = (row.get("entry_ids") or ["?"])[0]
            return Hop("BORN", f"chunk {chunk!r} of {chunk.rpartition('#')[0]} in {store} "
                               f"(rank {row.get('rank', '?')}, score "
                               f"{row.get('score', float('nan')):.2f}), retrieved by "
                               f"define_rag({memory_id!r})", read)
        turns = ", ".join(map(str, row.get("turns", ()))) or "?"
        entries = ", ".join(row.get("entry_ids", ())) or "no entries"
        return Hop("BORN", f"store entries {entries} of {store}, written in turn(s) {turns}",
                   read)
    if found.kind in ("injection", "message"):
        factory = {"fact": "define_fact", "steering": "define_steering",
                   "instruction": "define_instruction", "skill": "define_skill"}.get(
            found.flavor or "", "define_injection")
        return Hop("BORN", f"{factory}({found.id!r})")
    if found.kind == "tool" and found.upstream:
        return Hop("BORN", f"the answer of agent tool {found.id!r} (its run "
                           f"{found.upstream[0]})", found.runtime_stage_id)
    if found.kind == "tool":
        return Hop("BORN", f"the result of tool {found.id!r}{_served_by(view, found)}",
                   found.runtime_stage_id)
    if found.kind == "user" and found.upstream:
        names = ", ".join(repr(name) for name in found.upstream)
        return Hop("BORN", f"the answer of {names}, not the user's message")
    if found.kind == "user":
        return Hop("BORN", "the user's message")
    return Hop("BORN", "Agent(system=...)")


def _served_by(view: RunView, found: Suspect) -> str:
    """`` from MCP server 'orders' (its tool 'lookup_order')`` when the ToolCalls step filed
    the result's row with an MCP origin (``tools/_mcp.py``); else nothing."""
    records = view.log.records_for(found.runtime_stage_id or "")
    if not records:
        return ""
    rows = view.log.value_at(trace.TOOL_RESULTS, records[-1].idx, ns=records[-1].ns, default=[])
    row = next((r for r in rows if isinstance(r, Mapping)
                and r.get("tool_call_id") == found.tool_call_id), None) \
        if isinstance(rows, list) else None
    if row is None or not row.get("mcp_server"):
        return ""
    return f" from MCP server {row['mcp_server']!r} (its tool {row.get('mcp_tool')!r})"


def _quote(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return '"' + (flat if len(flat) <= limit else flat[: limit - 1] + "…") + '"'
