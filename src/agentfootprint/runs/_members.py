"""Who handed what to whom: a composition's members and an agent's agent-tools, from the log.

A composition mounts each runner as a subflow, so the whole pipeline leaves one commit log; each
member's run lives in its own namespace (the runtime id of its mount). What a member was *sent*
is written into its namespace by the mount's enter record, from keys of the parent namespace —
and those keys were written by earlier members' exit records, or by a stage that composed a
message from them (a merge, a hand-off note, a revision request). Walking those read→write
edges back from a member's input names the members whose answers it carries, so an explanation
never calls an upstream agent's output "the user's message".

An agent used as a tool (``agent.as_tool()``) runs in a run of its own; the outer ToolCalls step
records the link (``sub_runs``: tool call id → inner run id) and the inner recording
(``sub_recordings``), so the outer recording explains across the call offline too.

This module knows flows and the trace contract, not agents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..flow._commitlog import CommitLog, CommitRecord
from . import trace
from ._recording import Recording

__all__ = ["Member", "Members", "SubRun"]

_WALK_BUDGET = 2000
"""Records visited at most when tracing one input back (a bound, never reached in practice)."""


@dataclass(frozen=True, slots=True)
class Member:
    """One execution of a runner mounted in a composition that called a model itself."""

    name: str
    """How explanations name it: the mount path (``"first"``, ``"p/a"``), with the pass when it
    ran more than once (``"l/body (pass 2)"``)."""
    path: str
    """The mount's stage id path (``"p/a"``): the same for every pass of a loop."""
    ns: str
    """Its namespace in the commit log: the runtime id of its mount (``"p/a#3"``)."""
    answer: str | None
    """What it handed back (its ``final_content`` when its run ended), if it ended."""


@dataclass(frozen=True, slots=True)
class SubRun:
    """An agent run as a tool of another agent: the outer call and the inner run it started."""

    tool: str
    tool_call_id: str
    run_id: str
    ns: str
    """The namespace of the calling agent in the outer log."""
    recording: Recording | None
    """The inner run's recording, when it was kept (not redacted, readable)."""


class Members:
    """The member index of one log, built once: mounts, their answers, and who fed whom."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self.enters: dict[str, CommitRecord] = {}
        self.exits: dict[str, CommitRecord] = {}
        callers: set[str] = set()
        for record in log.records:
            if record.kind == "subflow-enter":
                self.enters[record.ns] = record
            elif record.kind == "subflow-exit" and record.read_ns is not None:
                self.exits[record.read_ns] = record
            elif _is_call(record):
                callers.add(record.ns)
        self.by_ns: dict[str, Member] = {}
        for ns, enter in self.enters.items():
            if ns not in callers:
                continue  # a memory subflow or a nested composition: not a member that answers
            path = enter.stage_id
            name = path if not enter.loop_pass else f"{path} (pass {enter.loop_pass + 1})"
            exit_ = self.exits.get(ns)
            answer = None
            if exit_ is not None:
                value = log.value_at(trace.FINAL_CONTENT, exit_.idx, ns=ns, default=None)
                answer = value if isinstance(value, str) else None
            self.by_ns[ns] = Member(name, path, ns, answer)

    @property
    def members(self) -> dict[str, Member]:
        """Every member by name, in the order they started."""
        return {m.name: m for m in self.by_ns.values()}

    def member_at(self, ns: str) -> Member | None:
        """The member whose own run is namespace ``ns`` (None at the top level)."""
        return self.by_ns.get(ns)

    def input_of(self, ns: str) -> str | None:
        """The message the member in ``ns`` was sent (its mount's ``message``)."""
        enter = self.enters.get(ns)
        if enter is None:
            return None
        value = self.log.value_at(trace.MESSAGE, enter.idx, ns=ns, default=None)
        return value if isinstance(value, str) else None

    def feeders(self, ns: str) -> tuple[list[Member], bool]:
        """Whose answers reached the input of the run in ``ns``, and whether the user's did.

        Walks back from the mount's enter record over read→write edges: an exit record of a
        member (a namespace that called a model) is a feeder and the walk stops there; an exit
        of a nested composition is descended into; a stage that composed the message (a merge,
        a hand-off) is followed through what it read; a key no step wrote at the top level,
        or a stage that read only run arguments at the top level, is the user's message.
        """
        enter = self.enters.get(ns)
        if enter is None:
            return [], True
        return self._walk(enter)

    def answer_feeders(self) -> tuple[list[Member], str | None]:
        """The members whose answers the run's own answer was made from, and the step that
        wrote that answer (a member's mount, or a stage that merged several answers)."""
        at = self.log.last_writer(trace.FINAL_CONTENT, len(self.log.records), ns="")
        if at is None or not self.by_ns:
            return [], None
        writer = self.log[at]
        return self._walk(writer)[0], writer.runtime_stage_id

    def _walk(self, start: CommitRecord) -> tuple[list[Member], bool]:
        found: dict[str, Member] = {}
        user = False
        seen: set[int] = set()
        stack: list[CommitRecord] = [start]
        while stack and len(seen) < _WALK_BUDGET:
            record = stack.pop()
            if record.idx in seen:
                continue
            seen.add(record.idx)
            if record.kind == "subflow-exit":
                member = self.by_ns.get(record.read_ns or "")
                if member is not None:
                    found.setdefault(member.ns, member)
                    continue
            if not record.reads and record.kind == "stage":
                # it read only run arguments: the user's message, or a nested mount's input
                outer = self.enters.get(record.ns)
                if outer is None:
                    user = True
                else:
                    stack.append(outer)
                continue
            where = record.read_namespace
            for key in record.reads:
                writers = self._writers(key, where, record.idx)
                if not writers:
                    outer = self.enters.get(where)
                    if outer is None:
                        user = True
                    else:
                        stack.append(outer)
                stack.extend(writers)
        ordered = sorted(found.values(), key=lambda m: self.enters[m.ns].idx)
        return ordered, user

    def _writers(self, key: str, ns: str, before: int) -> list[CommitRecord]:
        """The last writer of ``key`` before ``before``; for a collection the members add to
        (parallel branches merging their answers into a mapping, debaters appending to a
        transcript), every member exit that added to it."""
        log = self.log
        out: list[CommitRecord] = []
        at = log.last_writer(key, before, ns=ns)
        while at is not None:
            record = log[at]
            out.append(record)
            change = next((c for c in record.changes if c.key == key), None)
            collected = change is not None and (change.op == "append" or isinstance(
                log.value_at(key, at, ns=ns, default=None), Mapping))
            if record.kind != "subflow-exit" or not collected:
                break
            at = log.last_writer(key, at, ns=ns)
        return out

    def sub_runs(self) -> dict[str, SubRun]:
        """Every agent run as a tool in this log, by the outer tool call id."""
        out: dict[str, SubRun] = {}
        last = len(self.log.records) - 1
        namespaces = {r.ns for r in self.log.records
                      for c in r.changes if c.key == trace.SUB_RUNS}
        for ns in namespaces:
            links = self.log.value_at(trace.SUB_RUNS, last, ns=ns, default=None)
            kept = self.log.value_at(trace.SUB_RECORDINGS, last, ns=ns, default=None)
            if not isinstance(links, Mapping):
                continue
            for call_id, link in links.items():
                if not isinstance(link, Mapping) or not isinstance(link.get("run_id"), str):
                    continue
                run_id = link["run_id"]
                data = kept.get(run_id) if isinstance(kept, Mapping) else None
                out[str(call_id)] = SubRun(str(link.get("tool", "?")), str(call_id), run_id,
                                           ns, _recording(data))
        return out


def _recording(data: Any) -> Recording | None:
    if not isinstance(data, Mapping):
        return None
    try:
        return Recording.model_validate(dict(data))
    except ValueError:
        return None  # redacted or not a recording: the link stays, the content is not there


def _is_call(record: CommitRecord) -> bool:
    return record.stage_id == trace.CALL_LLM or record.stage_id.endswith("/" + trace.CALL_LLM)
