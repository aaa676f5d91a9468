"""Window strategies: which part of the conversation the model is sent.

``history`` in run state always stays complete; a window only shapes the request. Each LLM call
the loop asks the agent's strategy for a ``WindowPlan`` (the history indices that are sent, an
optional summary placed before them, and what left and why) and records it in state, so the
request the model saw can be rebuilt from the log with ``windowed_messages`` and the explain
layer can see what was missing.

Every strategy removes whole units, never single messages of one: an assistant message that
asked for tools travels with the tool results that answer it. The current request (the newest
user message that was not injected) always stays, and ``system`` messages are never removed.
A *turn* starts at every user message that was not injected by the framework; injected
messages, assistant messages and tool results belong to the turn they sit in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypedDict

from ..errors import ConfigurationError
from ..providers._base import LLMRequest, Message, Provider
from ..providers._tokens import ESTIMATE, TokenCounter, token_counter
from ..runs._window import windowed_messages

__all__ = [
    "SUMMARIZER_SYSTEM_PROMPT",
    "Eviction",
    "RestoringWindow",
    "WindowPlan",
    "WindowStrategy",
    "bind_window",
    "plan_for",
    "restoring",
    "sliding_window",
    "summarize_window",
    "token_budget",
    "windowed_messages",
]

SUMMARIZER_SYSTEM_PROMPT = (
    "You condense the earlier part of a conversation between a person and an assistant. "
    "Keep every fact, decision, number, name and open question the assistant may need later; "
    "drop pleasantries. Write plain prose, no preamble."
)

SUMMARY_MARK = "window-summary"
"""``injected_by`` of the summary message, so it is never mistaken for a user turn."""

Reason = Literal["outside-window", "over-budget", "summarized"]


class Eviction(TypedDict):
    """One history message that was not sent, and why."""

    index: int
    """Its position in ``history``."""
    role: str
    turn: int
    """The conversation turn it belongs to (0 for messages before the first user turn)."""
    reason: str
    chars: int
    """Length of its content: what the model did not read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowPlan:
    """What one LLM call is sent: ``summary`` (if any) then ``history[i] for i in kept``."""

    kept: list[int]
    """Indices into ``history``, ascending."""
    evicted: list[Eviction] = field(default_factory=list)
    summary: Message | None = None
    error: str | None = None
    """Why the strategy could not shape this call (then everything is sent)."""
    counted_by: str | None = None
    """How a token budget counted: a vocabulary (``o200k_base``) or ``estimate: len/4``."""

    def to_state(self, strategy: str, iteration: int) -> dict[str, Any]:
        """The JSON record the loop keeps under ``window`` (see ``windowed_messages``)."""
        record: dict[str, Any] = {
            "strategy": strategy, "iteration": iteration, "kept": list(self.kept),
            "summary": dict(self.summary) if self.summary is not None else None}
        if self.summary is not None:
            record["summarized"] = [e["index"] for e in self.evicted]
        if self.error is not None:
            record["error"] = self.error
        if self.counted_by is not None:
            record["counted_by"] = self.counted_by
        return record


# -- the structure every strategy shares ---------------------------------------------------


def _is_turn_start(message: Message) -> bool:
    return message["role"] == "user" and "injected_by" not in message


def turn_ordinals(history: Sequence[Message]) -> list[int]:
    """For each message, the ordinal of its turn (1 = first user turn; 0 before any)."""
    ordinals: list[int] = []
    current = 0
    for message in history:
        if _is_turn_start(message):
            current += 1
        ordinals.append(current)
    return ordinals


def units(history: Sequence[Message]) -> list[list[int]]:
    """History cut into indivisible, contiguous units, oldest first.

    An assistant message with tool calls, every message up to its last answering tool result,
    and those results form one unit; every other message is a unit of its own.
    """
    answered_at: dict[str, int] = {}
    for i, message in enumerate(history):
        if message["role"] == "tool" and "tool_call_id" in message:
            answered_at[message["tool_call_id"]] = i
    out: list[list[int]] = []
    i = 0
    while i < len(history):
        end = j = i
        while j <= end:  # a result inside the span may itself extend it (nested calls)
            for call in history[j].get("tool_calls") or ():
                end = max(end, answered_at.get(call["id"], j))
            j += 1
        out.append(list(range(i, end + 1)))
        i = end + 1
    return out


def current_request(history: Sequence[Message]) -> int | None:
    """Index of the newest user message that was not injected: the request being answered."""
    for i in range(len(history) - 1, -1, -1):
        if _is_turn_start(history[i]):
            return i
    return None


def _pinned(history: Sequence[Message]) -> set[int]:
    """Messages no strategy may remove: the current request and any system message."""
    pinned = {i for i, m in enumerate(history) if m["role"] == "system"}
    request = current_request(history)
    if request is not None:
        pinned.add(request)
    return pinned


def _plan(history: Sequence[Message], kept: set[int], reason: str, turn: int
          ) -> WindowPlan:
    """A plan from the set of kept indices, every other message recorded as evicted."""
    ordinals = turn_ordinals(history)
    last = ordinals[-1] if ordinals else 0
    evicted: list[Eviction] = [
        {"index": i, "role": m["role"],
         "turn": max(turn - (last - ordinals[i]), 0) if ordinals[i] else 0,
         "reason": reason, "chars": len(m["content"])}
        for i, m in enumerate(history) if i not in kept]
    return WindowPlan(kept=sorted(kept), evicted=evicted)


def _keep_recent_turns(history: Sequence[Message], turns: int) -> set[int]:
    """Indices of the last ``turns`` turns (and what follows them), plus what is pinned."""
    ordinals = turn_ordinals(history)
    last = ordinals[-1] if ordinals else 0
    first_kept = max(last - turns + 1, 1)
    kept = {i for i, n in enumerate(ordinals) if n >= first_kept} | _pinned(history)
    # Whole units only: keep a unit if any of its messages is kept.
    for unit in units(history):
        if kept.intersection(unit):
            kept.update(unit)
    return kept


# -- strategies ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowStrategy:
    """Base of every strategy: a name for the record and one async ``plan`` per LLM call.

    ``previous`` is the ``window`` record of the previous call in this run (``None`` at the
    first), so a strategy can reuse work, such as a summary, for the rest of the turn.
    """

    name: str

    async def plan(self, history: Sequence[Message], *, turn: int,
                   previous: dict[str, Any] | None) -> WindowPlan:
        raise NotImplementedError(f"{type(self).__name__} must implement plan()")


@dataclass(frozen=True, slots=True, kw_only=True)
class SlidingWindow(WindowStrategy):
    """Keep the last ``turns`` user turns and everything after them."""

    turns: int

    async def plan(self, history: Sequence[Message], *, turn: int,
                   previous: dict[str, Any] | None) -> WindowPlan:
        return _plan(history, _keep_recent_turns(history, self.turns), "outside-window", turn)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenBudget(WindowStrategy):
    """Keep the newest messages whose tokens fit ``max_tokens``.

    The kept part is contiguous from the end (what is pinned is kept regardless), and starts
    at a user message so no provider sees a conversation that opens mid-exchange. Tokens are
    counted by ``count``; ``counted_by`` (recorded with each plan) says with what.
    """

    max_tokens: int
    count: Callable[[Message], int]
    counted_by: str = "estimate: len/4"
    auto: bool = False
    """Neither ``count`` nor ``tokenizer`` was given: the agent picks its model's vocabulary."""

    async def plan(self, history: Sequence[Message], *, turn: int,
                   previous: dict[str, Any] | None) -> WindowPlan:
        pinned = _pinned(history)
        groups = units(history)
        kept: set[int] = set()
        for unit in groups:
            if pinned.intersection(unit):
                kept.update(unit)
        left = self.max_tokens - sum(self.count(history[i]) for i in kept)
        tail: set[int] = set()
        for unit in reversed(groups):
            if kept.intersection(unit):
                continue
            cost = sum(self.count(history[i]) for i in unit)
            if cost > left:
                break
            left -= cost
            tail.update(unit)
        # Trim the tail's head until it opens on a user message (or reaches pinned messages).
        for unit in groups:
            if not tail.intersection(unit):
                continue
            if history[unit[0]]["role"] == "user":
                break
            tail.difference_update(unit)
        plan = _plan(history, kept | tail, "over-budget", turn)
        return replace(plan, counted_by=self.counted_by)


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarizeWindow(WindowStrategy):
    """Keep the last ``keep_turns`` turns; send the older part as one summary message.

    The summary is made by one call to ``provider`` and reused while the summarized part stays
    the same, which within one turn it does. If the summarizer fails nothing is folded: the
    call is sent the whole history and the failure is recorded on the window record.
    """

    provider: Provider
    model: str
    keep_turns: int

    async def plan(self, history: Sequence[Message], *, turn: int,
                   previous: dict[str, Any] | None) -> WindowPlan:
        kept = _keep_recent_turns(history, self.keep_turns)
        dropped = _plan(history, kept, "summarized", turn)
        if not dropped.evicted:
            return dropped
        indices = [e["index"] for e in dropped.evicted]
        cached = (previous or {}).get("summary")
        if cached is not None and (previous or {}).get("summarized") == indices:
            return WindowPlan(kept=dropped.kept, evicted=dropped.evicted, summary=cached)
        transcript = "\n\n".join(_line(history[i]) for i in indices)
        request = LLMRequest.model_construct(
            model=self.model, messages=[{"role": "user", "content": transcript}],
            system=SUMMARIZER_SYSTEM_PROMPT, tools=[], temperature=None, max_tokens=None,
            stop=None, tool_choice=None)
        try:
            response = await self.provider.complete(request)
        except Exception as exc:  # a failed summary must not fail the agent's turn
            return WindowPlan(kept=list(range(len(history))),
                              error=f"summarizer {self.provider.name!r} failed: {exc!r}")
        summary: Message = {
            "role": "user", "injected_by": SUMMARY_MARK,
            "content": f"[summary of {len(indices)} earlier message(s), written by "
                       f"{self.model}]\n\n{response.content}"}
        return WindowPlan(kept=dropped.kept, evicted=dropped.evicted, summary=summary)


def _line(message: Message) -> str:
    calls = message.get("tool_calls") or ()
    asked = "".join(f"\n(called {c['name']} with {c.get('args') or {}})" for c in calls)
    who = message.get("tool_name", "tool") if message["role"] == "tool" else message["role"]
    return f"{who}: {message['content']}{asked}"


def _check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name}={value!r} must be an int >= 1")
    return value


def _estimate(message: Message) -> int:
    """About four characters a token: ``ceil(len(content) / 4)``, tool calls included."""
    calls = message.get("tool_calls") or ()
    extra = sum(len(c["name"]) + len(str(c.get("args") or {})) for c in calls)
    return math.ceil((len(message["content"]) + extra) / 4)


def _message_counter(counter: TokenCounter) -> Callable[[Message], int]:
    """Tokens of a message's content and tool calls, by ``counter``."""
    def count(message: Message) -> int:
        calls = message.get("tool_calls") or ()
        extra = "".join(c["name"] + str(c.get("args") or {}) for c in calls)
        return counter(message["content"]) + (counter(extra) if extra else 0)
    return count


def bind_window(window: WindowStrategy | None, model: str) -> WindowStrategy | None:
    """``window`` for an agent of ``model``: a token budget given no counter counts with the
    model's vocabulary when one is available offline (see ``providers/_tokens.py``)."""
    if not isinstance(window, TokenBudget) or not window.auto:
        return window
    counter = token_counter(model=model)
    if not counter.exact:
        return window
    return replace(window, count=_message_counter(counter), counted_by=counter.label,
                   auto=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoringWindow(WindowStrategy):
    """Another strategy's window with some history messages put back (whole units).

    The seam a restoration re-run uses to prove that a message the window dropped would have
    changed the answer (``window:<index>`` candidates of ``find_dropped_context``). The restored
    messages are sent with the rest, in history order; a summary, if any, stays.
    """

    inner: WindowStrategy
    restore: frozenset[int]

    async def plan(self, history: Sequence[Message], *, turn: int,
                   previous: dict[str, Any] | None) -> WindowPlan:
        planned = await self.inner.plan(history, turn=turn, previous=previous)
        kept = set(planned.kept)
        for unit in units(history):
            if self.restore.intersection(unit):
                kept.update(unit)
        return WindowPlan(kept=sorted(kept), summary=planned.summary, error=planned.error,
                          evicted=[e for e in planned.evicted if e["index"] not in kept])


def plan_for(history: Sequence[Message], indices: Iterable[int], planned: WindowPlan, *,
             turn: int) -> WindowPlan:
    """A plan sending ``indices`` (grown to whole units, pinned messages kept) instead.

    Used when an ``act("window", ...)`` rule replaces or refuses a strategy's choice; the
    summary of ``planned`` stays only when it still stands for messages left out.
    """
    kept = set(indices) | _pinned(history)
    for unit in units(history):
        if kept.intersection(unit):
            kept.update(unit)
    replanned = _plan(history, kept, "outside-window", turn)
    if planned.summary is not None and replanned.evicted:
        return WindowPlan(kept=replanned.kept, evicted=replanned.evicted,
                          summary=planned.summary, error=planned.error)
    return replanned


def restoring(strategy: WindowStrategy, indices: Iterable[int]) -> WindowStrategy:
    """``strategy`` with the history messages at ``indices`` always sent (see RestoringWindow)."""
    if not isinstance(strategy, WindowStrategy):
        raise ConfigurationError(f"restoring({strategy!r}, ...) needs a window strategy")
    restore = frozenset(indices)
    if not all(isinstance(i, int) and i >= 0 for i in restore):
        raise ConfigurationError(f"restoring(..., {sorted(restore)!r}) takes history indices")
    return RestoringWindow(name=f"{strategy.name}+restored", inner=strategy, restore=restore)


def sliding_window(*, turns: int) -> WindowStrategy:
    """Send only the last ``turns`` user turns and everything after them."""
    return SlidingWindow(name="sliding_window", turns=_check_count(turns, "turns"))


def token_budget(*, max_tokens: int, count: Callable[[Message], int] | None = None,
                 tokenizer: object = None) -> WindowStrategy:
    """Send the newest messages that fit ``max_tokens``.

    Tokens are counted by ``count`` (a function of a message), or ``tokenizer`` (an encoding
    name such as ``"o200k_base"``, a ``tokenizer.json`` path, or a tokenizer object), or else
    with the agent's model's vocabulary when it is available offline (OpenAI models, with the
    ``tokens`` extra), or else estimated as ``len/4``. Each plan records which.
    """
    limit = _check_count(max_tokens, "max_tokens")
    if count is not None and tokenizer is not None:
        raise ConfigurationError("token_budget() takes count= or tokenizer=, not both")
    if count is not None:
        return TokenBudget(name="token_budget", max_tokens=limit, count=count,
                           counted_by=f"count={getattr(count, '__name__', 'custom')}")
    if tokenizer is not None:
        counter = token_counter(tokenizer)
        return TokenBudget(name="token_budget", max_tokens=limit,
                           count=_message_counter(counter), counted_by=counter.label)
    return TokenBudget(name="token_budget", max_tokens=limit, count=_estimate,
                       counted_by=ESTIMATE.label, auto=True)


def summarize_window(*, provider: Provider, model: str, keep_turns: int = 3) -> WindowStrategy:
    """Send the last ``keep_turns`` turns; the older part as one summary by ``provider``."""
    if not isinstance(provider, Provider):
        raise ConfigurationError(
            f"provider={provider!r} is not a Provider; the summarizer is called like any model")
    if not isinstance(model, str) or not model:
        raise ConfigurationError(f"model={model!r} must name the summarizer's model")
    return SummarizeWindow(name="summarize_window", provider=provider, model=model,
                           keep_turns=_check_count(keep_turns, "keep_turns"))
