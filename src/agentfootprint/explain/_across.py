"""The calls behind an answer, across a composition's members and an agent's agent-tools.

A single agent's answer has one call behind it. A composition's answer has a chain: the last
member's call read a message that was the answer of an earlier member, whose call read its own
context — and so on back to the user. An agent that used another agent as a tool read a tool
result that was the answer of an inner run. ``reached_calls`` walks those links from the final
call (``RunView.feeders``, ``RunView.sub_runs``) and returns every call found, each with the
link it came by, so ``backtrack`` can cross into the member that fed the answer and
``suspects_of`` can offer every member's sources, each labelled with its member.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from ..runs._view import CallView, Piece, RunView

__all__ = ["Reached", "is_carrier", "reached_calls", "suspects_across"]


@dataclass(frozen=True, slots=True, eq=False)
class Reached:
    """One call behind the answer and how it was reached from the final call."""

    call: CallView
    view: RunView
    """The run the call belongs to: the outer run, or an agent-tool's inner run."""
    via: Reached | None = None
    """The call it fed (None for the final call, and for a member that fed no later call)."""
    link: str | None = None
    """``member`` (its answer was handed on as the next message) or ``tool`` (its run's
    answer was an agent-tool's result)."""
    name: str | None = None
    """The member's name (``"first"``), or the agent-tool's label (``"tool 'researcher'"``)."""
    run_id: str | None = None
    """For a ``tool`` link: the inner run's id."""
    composed_by: str | None = None
    """For a member the run's answer was made from (a merge of several answers): the step
    that made it."""

    def chain(self) -> list[Reached]:
        """The calls from the final call down to this one, final first."""
        out: list[Reached] = []
        node: Reached | None = self
        while node is not None:
            out.append(node)
            node = node.via
        return out[::-1]

    def pieces(self) -> list[Piece]:
        """The call's pieces; an inner run's are labelled with the agent-tool that ran it, and
        its message is the calling agent's request, not the user's."""
        if self.link != "tool" or self.name is None:
            return list(self.call.pieces)
        label = self.name
        return [replace(p, member=f"{p.member} of {label}" if p.member else label,
                        upstream=("the calling agent",) if p.kind == "user" else p.upstream)
                for p in self.call.pieces]


def is_carrier(piece: Piece) -> bool:
    """A message or tool result that is another member's or run's answer: following it means
    crossing into that member or run."""
    return bool(piece.upstream) and piece.kind in ("user", "tool")


def reached_calls(view: RunView, call: CallView | None = None) -> list[Reached]:
    """The final call (or ``call``), then every call whose answer reached it, nearest first;
    then the composition's other members (a losing sample, a critic that fed only a vote).

    When a composition's answer was made from several members' answers (a merge), each of
    those members' calls is a starting point, marked with the step that made the answer.
    """
    starts = [Reached(call if call is not None else view.call(), view)]
    if call is None and view.members:
        makers, writer = view.answer_members()
        found = [(m, view.answer_call(m)) for m in makers]
        roots = [Reached(c, view, None, "member", m.name, composed_by=writer)
                 for m, c in found if c is not None]
        if len(roots) > 1 or (roots and roots[0].call.answer != view.answer):
            starts = roots
    out: list[Reached] = []
    seen: set[tuple[int, int]] = set()
    queue: deque[Reached] = deque()

    def add(found: Reached) -> None:
        key = (id(found.view), found.call.record.idx)
        if key not in seen:
            seen.add(key)
            out.append(found)
            queue.append(found)

    def drain() -> None:
        while queue:
            node = queue.popleft()
            here = node.view
            if here.member_of(node.call) is not None:
                for member in here.feeders(node.call)[0]:
                    fed = here.answer_call(member)
                    if fed is not None:
                        add(Reached(fed, here, node, "member", member.name))
            links = here.sub_runs
            for piece in node.call.pieces:
                sub = links.get(piece.tool_call_id or "") if piece.kind == "tool" else None
                if sub is None or sub.recording is None:
                    continue
                inner = RunView.of(sub.recording)
                if inner.final is not None:
                    add(Reached(inner.final, inner, node, "tool", f"tool {sub.tool!r}",
                                sub.run_id))

    for start in starts:
        add(start)
    drain()
    if call is None:
        for member in view.members.values():
            answered = view.answer_call(member)
            if answered is not None:
                add(Reached(answered, view, None, "member", member.name))
                drain()
    return out


def suspects_across(reached: list[Reached]) -> list[tuple[Piece, Reached]]:
    """Every source that reached any of the calls, each once (first call first), with the call
    it reached."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for node in reached:
        for piece in node.pieces():
            key = (piece.kind, piece.id, piece.text)
            if key not in seen:
                seen.add(key)
                out.append((piece, node))
    return out
