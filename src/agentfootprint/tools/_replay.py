"""Recorded tool outcomes, answered instead of running the tool: one rule for two readers.

Two things run an agent's tool calls a second time and must never repeat a side effect:

* **resuming a killed run** (``agent/_journal.py``): the run's journal holds, per call id of
  the interrupted batch, whether the call started and what it returned;
* **an explanation's re-run** (``explain/_isolation.py``): the recording holds what each
  call returned; the re-run's model makes its calls again (new ids), matched by tool name and
  canonical arguments, in call order.

Both hand a :class:`ToolReplay` to the runtime, and the runtime applies one rule (see
:meth:`ToolReplay.unrecorded`): a call with a recorded outcome is answered from the record
(the tool does not run); a call without one runs for real only when its tool declares that
repeating it is safe — ``side_effects=False`` always, ``idempotent=True`` only when the same
idempotency key comes back (a resume; a re-run's calls have new ids, so it never may) — and
is otherwise *not* run: "outcome unknown" on a resume, a miss that makes a re-run incomplete.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from ..flow._commitlog import CommitLog
from ..flow._display import clip
from ..flow._redact import REDACTED
from ..providers._base import ToolCall
from ..runs import trace
from ._registry import OUTCOME_UNKNOWN, ToolOutcome
from ._tool import Tool

__all__ = ["OUTCOME_UNKNOWN", "ToolReplay", "canonical_args", "recorded_calls"]

NOT_MADE: Final = ("[this call was not made: the explanation's re-run could not replay it "
                   "without a real side effect]")


def canonical_args(args: object) -> str:
    """Arguments as one comparable string (keys sorted; a JSON string is parsed first)."""
    import json  # loaded on first use: a plain run never writes JSON

    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return str(args)
    try:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=repr)
    except (TypeError, ValueError):
        return repr(args)


def _redacted(value: object) -> bool:
    return isinstance(value, str) and REDACTED in value


class ToolReplay:
    """What is known of a run's tool calls, and the at-most-once rule for the rest.

    ``mode="resume"``: outcomes by call id (:meth:`from_journal`). ``mode="rerun"``: outcomes
    by tool name and canonical arguments, consumed in call order (:meth:`from_recording`);
    a re-run also notes what it could not do (``misses``) and what ran live (``live_calls``).
    """

    def __init__(self, mode: Literal["resume", "rerun"], *, iteration: int = -1) -> None:
        self.mode = mode
        self.iteration = iteration
        """Resume: the iteration of the tool batch the crash interrupted."""
        self.outcomes: dict[str, dict[str, Any]] = {}
        """Resume: call id → recorded outcome (``content``, ``error``, ``status``)."""
        self.started: set[str] = set()
        """Resume: ids of calls that started (an outcome may be missing: killed mid-call)."""
        self.queues: dict[tuple[str, str], deque[Any]] = {}
        """Re-run: (tool name, canonical arguments) → recorded results, oldest first."""
        self.misses: list[str] = []
        self.live_calls: list[str] = []
        self.runs_itself: set[str] = set()
        """Re-run: tools that are never answered from the record because they run isolated
        themselves (an agent used as a tool: its inner run is re-run, so what was removed
        from it shows)."""

    # -- building --------------------------------------------------------------------------

    @classmethod
    def from_journal(cls, entries: Iterable[Mapping[str, Any]], iteration: int) -> ToolReplay:
        """The calls of batch ``iteration`` as a run's journal entries left them."""
        known = cls("resume", iteration=iteration)
        for entry in entries:
            if entry.get("iteration") != iteration:
                continue
            if entry.get("phase") == "started":
                known.started.add(str(entry.get("call")))
            elif entry.get("phase") == "done" and isinstance(entry.get("outcome"), dict):
                known.outcomes[str(entry.get("call"))] = entry["outcome"]
        return known

    @classmethod
    def from_recording(cls, calls: Mapping[tuple[str, str], list[Any]]) -> ToolReplay:
        """A re-run's replay of ``calls`` (:func:`recorded_calls` of the explained run)."""
        known = cls("rerun")
        known.queues = {key: deque(results) for key, results in calls.items()}
        return known

    # -- answering -------------------------------------------------------------------------

    def recorded(self, call: ToolCall) -> ToolOutcome | None:
        """Resume: the outcome the journal holds for ``call``, or None."""
        found = self.outcomes.get(call["id"])
        if found is None:
            return None
        return ToolOutcome(str(found.get("content") or ""), error=bool(found.get("error")),
                           status=str(found.get("status") or "success"))

    def answer(self, tool: Tool, args: Mapping[str, Any]) -> ToolOutcome | None:
        """Re-run: the recorded result of this call (or the rule's refusal); None = run it."""
        if tool.name in self.runs_itself:
            return None
        import json  # loaded on first use: a plain run never writes JSON

        queue = self.queues.get((tool.name, canonical_args(dict(args))))
        while queue:
            result = queue.popleft()
            if not _redacted(result):
                return ToolOutcome(result if isinstance(result, str) else json.dumps(result))
            if tool.side_effects:  # a result held only masked is never fed to the model
                self.misses.append(f"tool {tool.name!r}: the recording holds its result only "
                                   "redacted")
                return ToolOutcome(NOT_MADE, error=True, status=OUTCOME_UNKNOWN)
        return self.unrecorded(tool, args)

    def unrecorded(self, tool: Tool | None, args: Mapping[str, Any]) -> ToolOutcome | None:
        """The at-most-once rule for a call with no recorded outcome: None runs it for real;
        an outcome says why it was not run."""
        if tool is None or not tool.side_effects or (self.mode == "resume" and tool.idempotent):
            if self.mode == "rerun" and tool is not None:
                self.live_calls.append(tool.name)
            return None
        if self.mode == "resume":
            return ToolOutcome(
                f"Outcome unknown: the run stopped (its process ended) while {tool.name} was "
                "running, so whether this call took effect is not known. It was not run again, "
                f"because {tool.name} does not declare that repeating it is safe. Check its "
                "effect before calling it again.", error=True, status=OUTCOME_UNKNOWN)
        if any(_redacted(name) or _redacted(key) for name, key in self.queues):
            self.misses.append(f"tool {tool.name!r}: the recording holds the run's tool calls "
                               "only redacted, so this call cannot be matched, and the tool does "
                               "not declare side_effects=False, so it was not run")
        else:
            shown = clip(canonical_args(dict(args)), 80)
            self.misses.append(f"tool {tool.name!r} was called with arguments the recording "
                               f"lacks ({shown}) and does not declare side_effects=False, so "
                               "it was not run")
        return ToolOutcome(NOT_MADE, error=True, status=OUTCOME_UNKNOWN)


def recorded_calls(log: CommitLog) -> dict[tuple[str, str], list[Any]]:
    """``{(tool name, canonical arguments): [results in call order]}`` over every agent of the
    run, agents used as tools included (their inner runs' ``sub_recordings``).

    Read from the conversation each agent left (``history``): an assistant message's
    ``tool_calls`` paired with the ``tool`` messages answering them by call id.
    """
    out: dict[tuple[str, str], list[Any]] = {}
    last = len(log.records)
    for inner in _inner_logs(log):
        for key, results in recorded_calls(inner).items():
            out.setdefault(key, []).extend(results)
    for ns in dict.fromkeys(record.ns for record in log.records):
        history = log.value_at(trace.HISTORY, last, ns=ns, default=None)
        if not isinstance(history, list):
            continue
        asked: dict[str, tuple[str, str]] = {}
        for message in history:
            if not isinstance(message, Mapping):
                continue
            for call in message.get("tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                function = call.get("function") or {}
                name = call.get("name") or function.get("name")
                args = call.get("args", call.get("arguments", function.get("arguments")))
                if isinstance(name, str) and isinstance(call.get("id"), str):
                    asked[call["id"]] = (name, canonical_args(args))
            if message.get("role") == "tool":
                answered = asked.get(str(message.get("tool_call_id")))
                if answered is not None:
                    out.setdefault(answered, []).append(message.get("content"))
    return out


def _inner_logs(log: CommitLog) -> list[CommitLog]:
    from ..runs._recording import Recording

    last = len(log.records)
    out = []
    for ns in dict.fromkeys(record.ns for record in log.records):
        kept = log.value_at(trace.SUB_RECORDINGS, last, ns=ns, default=None)
        if isinstance(kept, Mapping):
            for body in kept.values():
                if isinstance(body, Mapping):
                    out.append(Recording.model_validate(body).commit_log())
    return out
