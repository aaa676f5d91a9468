"""Messages-slot delivery: where an injected message may go, and whether it is already there.

The rules (pure functions over the conversation) follow the seed contract exactly:

* Sequencing is judged on the *effective wire role*: ``tool`` counts as ``user``, because the
  strictest provider folds tool results into a user turn. One rule for every provider, so a
  declaration never delivers on one wire and defers on another.
* A message may not be appended while any assistant tool call in the window is unanswered
  (``unanswered-tool-call``), nor right after a turn that already speaks in its effective role
  (``role-collision``). A refused message is *deferred*, never reordered: the rest of that
  injection's messages wait behind it, and it is tried again at the next boundary.
* A delivery's key is the injection id plus a hash of role and content, never its position,
  so the same sentence declared twice is said once, and a message already in a restored
  history (recognised by its ``injected_by`` marker) is never delivered twice.

Hash encoding: 32-bit FNV-1a over the UTF-16 code units of ``role + ":" + content`` (offset
2166136261, prime 16777619), lower-case hex without padding — the reference's encoding, so
keys match across implementations. A lone surrogate (valid in JSON, e.g. ``"caf\ud83d"``) is
hashed as the one code unit it is, never refused.

Every deferral is recorded with the effective role of the turn it would have landed behind
(``tail_role``, :func:`tail_wire_role`) and a ``note``: a sentence saying what blocked it, so a
reader need not rebuild the window to learn why a declaration is not on the wire yet.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..flow._values import FrozenList, committed_of, extends

__all__ = [
    "KeysMemo",
    "deliver",
    "delivery_key",
    "effective_wire_role",
    "fnv1a",
    "keys_in_window",
    "moves_system_messages",
    "deferral_note",
    "refusal_for_placement",
    "tail_wire_role",
]

Refusal = Literal["unanswered-tool-call", "role-collision"]


def fnv1a(text: str) -> str:
    """32-bit FNV-1a over UTF-16 code units, as unsigned lower-case hex.

    A Python step per code unit, and the same pieces (a system prompt, an injection's
    messages) are hashed at every iteration: texts up to ``_MEMO_CHARS`` are remembered.
    """
    if len(text) <= _MEMO_CHARS:
        return _fnv1a_memo(text)
    return _fnv1a(text)


_MEMO_CHARS = 1 << 16


def _fnv1a(text: str) -> str:
    value = 2166136261
    data = text.encode("utf-16-le", "surrogatepass")  # a lone surrogate is one code unit
    for i in range(0, len(data), 2):
        value ^= data[i] | (data[i + 1] << 8)
        value = (value * 16777619) & 0xFFFFFFFF
    return format(value, "x")


_fnv1a_memo = functools.lru_cache(maxsize=1024)(_fnv1a)


def effective_wire_role(role: str) -> str:
    """The role a message occupies on the wire for sequencing: ``tool`` counts as ``user``."""
    return "user" if role == "tool" else role


def delivery_key(injection_id: str, role: str, content: str) -> str:
    """Who declared it and what it says; position is deliberately not part of it."""
    return f"{injection_id}:{fnv1a(f'{role}:{content}')}"


def keys_in_window(history: Iterable[Any]) -> set[str]:
    """The delivery key of every message already carrying an ``injected_by`` marker."""
    return {delivery_key(m["injected_by"], m["role"], m["content"])
            for m in history if m.get("injected_by") is not None}


class KeysMemo:
    """``keys_in_window`` for a history that grows iteration after iteration, at the cost of
    the growth.

    It remembers the committed history it last scanned and the keys found; a history known
    to extend it (``flow.extends``, constant time) has only its new messages scanned, any
    other is scanned whole. The answer is always exactly ``keys_in_window(history)``, a new
    set. What it remembers is one immutable tuple, replaced whole (runs may share it).
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[FrozenList, frozenset[str]] | None = None

    def __call__(self, history: Sequence[Any]) -> set[str]:
        committed = committed_of(history)
        if committed is None:
            return keys_in_window(history)
        last = self._last
        if last is not None and extends(committed, last[0]):
            keys = last[1] | keys_in_window(committed[len(last[0]):])
        else:
            keys = frozenset(keys_in_window(committed))
        self._last = (committed, keys)
        return set(keys)


def tail_wire_role(history: Sequence[Any]) -> str | None:
    """The effective role of the turn a delivery would land behind; ``None`` for no turns."""
    return effective_wire_role(history[-1]["role"]) if history else None


def deferral_note(injection_id: str, role: str, reason: Refusal, tail_role: str | None) -> str:
    """One sentence on why ``injection_id``'s message waits, recorded with the deferral."""
    if reason == "unanswered-tool-call":
        why = ("a tool call in the window has no result yet, and a message placed now would "
               "come between that call and its result")
    else:
        why = (f"it would follow a {tail_role or 'unknown'!s} turn as another {role} turn "
               "(tool results count as user), and providers refuse two turns of one role in "
               "a row")
    return (f"{injection_id!r} was deferred: {why}. It is tried again, unchanged and in its "
            "declared order, at the next boundary.")


def refusal_for_placement(history: Sequence[Any], role: str) -> Refusal | None:
    """Why a message of ``role`` may not be appended now, or ``None`` when it may."""
    if not history:
        return None
    answered = {m.get("tool_call_id") for m in history if m["role"] == "tool"}
    for message in history:
        for call in message.get("tool_calls") or ():
            if call["id"] not in answered:
                return "unanswered-tool-call"
    if effective_wire_role(history[-1]["role"]) == effective_wire_role(role):
        return "role-collision"
    return None


def moves_system_messages(provider: object) -> bool:
    """Whether ``provider`` (or the one a retry or circuit wrapper holds) sends system-role
    messages in its system prompt rather than where they sit (``system_role_messages``)."""
    seen: set[int] = set()
    while provider is not None and id(provider) not in seen:
        seen.add(id(provider))
        placement = getattr(type(provider), "system_role_messages", None)
        if placement is not None:
            return bool(placement == "system_prompt")
        provider = getattr(provider, "inner", None)
    return False


def deliver(pending: Sequence[tuple[str, str, Sequence[Any]]], history: list[Any],
            ledger: set[str], iteration: int, *, system_to_prompt: bool = False
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Append what may be delivered now to ``history`` (in place); return (delivered, deferred).

    ``pending`` is ``(injection_id, flavor, messages)`` for each active injection, in order.
    ``ledger`` (keys delivered this run, united with ``keys_in_window(history)``) grows.
    With ``system_to_prompt`` (the provider sends system-role messages in its system prompt,
    see :func:`moves_system_messages`) a system-role delivery is recorded where it was sent:
    ``sent_to`` is ``"system_prompt"`` and it has no ``wire_index`` among the messages;
    ``history_index`` is where it sits in the conversation either way.
    """
    delivered: list[dict[str, Any]] = []
    deferred: list[dict[str, Any]] = []
    for injection_id, flavor, messages in pending:
        for message in messages:
            role, content = message["role"], message["content"]
            key = delivery_key(injection_id, role, content)
            if key in ledger:
                continue
            refusal = refusal_for_placement(history, role)
            if refusal is not None:
                tail = tail_wire_role(history)
                deferred.append({"injection_id": injection_id, "flavor": flavor, "role": role,
                                 "reason": refusal, "tail_role": tail,
                                 "note": deferral_note(injection_id, role, refusal, tail),
                                 "iteration": iteration})
                break  # later messages of this injection must not jump ahead
            history.append({"role": role, "content": content, "injected_by": injection_id})
            ledger.add(key)
            row = {"injection_id": injection_id, "flavor": flavor, "role": role,
                   "wire_index": len(history) - 1, "key": key, "iteration": iteration}
            if system_to_prompt and role == "system":
                row.update(wire_index=None, sent_to="system_prompt",
                           history_index=len(history) - 1)
            delivered.append(row)
    return delivered, deferred
