"""Redaction by kind of content: say what must not be recorded, not where it is kept.

``RedactionPolicy(kinds={"tool_args", "memory_content"})`` redacts every run-state key the trace
contract declares as able to hold either kind — ``history``, ``llm_tool_calls``, a paused batch,
each memory's recall (``memory_recall_<id>`` and any key of that family added later) — without
the user naming one internal key. It *is* the engine's key policy (``flow.redact.RedactionPolicy``),
with the kinds compiled into its key names and key prefixes once, at construction, so ``flow/``
keeps applying one key predicate as it writes and imports nothing above it. ``keys=`` and
``patterns=`` still add keys of the user's own charts.

Some keys repeat what others hold: a paused tool batch repeats the tool calls, a memory's
recall (next turn, too) repeats the conversation it was written from. Such a key is redacted
whenever what it repeats is (``_REPEATS``), with its declared shape, so redacting the
conversation is never undone by the paused batch or by the next turn's recall. The memory
store itself keeps what the user wrote — it is the user's data, not a record — and the
recording of every turn that recalls it shows it masked.

A redacted key whose declared shape is known keeps its structure: a conversation stays a list of
messages with their roles, tool names and injection ids, and only the content of a redacted kind
reads ``[REDACTED]`` — so a redacted run can still be explained. A key named in ``keys=`` or
matched by ``patterns=`` is masked whole, as asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ConfigurationError
from ..flow._redact import REDACTED
from ..flow._redact import RedactionPolicy as KeyRedactionPolicy
from . import trace

__all__ = ["RedactionPolicy", "as_run_policy"]

_TOOL_CALLS: Final = (trace.LLM_TOOL_CALLS,)
_WRITTEN_FROM: Final = (trace.NEW_MESSAGES,)
"""What a memory stores: the turn's messages (a later turn recalls them)."""
_REPEATS: Final[Mapping[str, tuple[str, ...]]] = {
    trace.PAUSED_TOOL_BATCH: _TOOL_CALLS,
    trace.PERMISSION_HALT: _TOOL_CALLS,
    trace.ACT_LEDGER: _TOOL_CALLS,
    trace.FINDINGS_LEDGER: _TOOL_CALLS,
    trace.RUN_EVIDENCE: (trace.LLM_TOOL_CALLS, trace.HISTORY),
    trace.WINDOW_EVICTED: (trace.HISTORY,),
    **{key: _WRITTEN_FROM for key in (
        trace.LOADED, trace.SELECTED, trace.PICK, trace.RECALL, trace.RETRIEVED, trace.WRITTEN,
        trace.SUMMARIZE, trace.NEW_MESSAGE_EMBEDDINGS, trace.MEMORY_RECALL.prefix,
        trace.MEMORY_RETRIEVED.prefix, trace.SYSTEM_SLOT, trace.DELIVERED_KEYS,
        trace.MESSAGES_DELIVERY)},
}
"""Key (or family prefix) -> the keys whose content it repeats or is derived from."""


def as_run_policy(policy: KeyRedactionPolicy | None) -> KeyRedactionPolicy | None:
    """``policy`` as a run's policy: a plain key policy gains the contract's rules (a key that
    repeats a redacted one is redacted too); a policy of another class is kept as it is."""
    if policy is None or type(policy) is not KeyRedactionPolicy:
        return policy
    return RedactionPolicy(keys=policy.keys, patterns=policy.patterns,
                           emit_patterns=policy.emit_patterns, text_patterns=policy.text_patterns,
                           seal_key=policy.seal_key)


def _repeated(key: str) -> tuple[str, ...]:
    found = _REPEATS.get(key)
    if found is not None:
        return found
    declared = trace.declared_key(key)
    if isinstance(declared, trace.KeyFamily):
        return _REPEATS.get(declared.prefix, ())
    return ()


@dataclass(slots=True, eq=False)
class RedactionPolicy(KeyRedactionPolicy):
    """Kinds of content (see ``trace.CONTENT_KINDS``), plus keys and patterns, never recorded."""

    kinds: Iterable[str] = ()
    _kind_keys: frozenset[str] = field(init=False, repr=False, default=frozenset())
    _kind_prefixes: tuple[str, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        if isinstance(self.kinds, str):
            raise ConfigurationError(
                f"RedactionPolicy(kinds={self.kinds!r}) takes a set of kinds, not one string: "
                f"kinds={{{self.kinds!r}}}")
        self.kinds = tuple(sorted(set(self.kinds)))
        try:
            names, prefixes = trace.keys_of_kinds(self.kinds)
        except ValueError as exc:
            raise ConfigurationError(f"RedactionPolicy(kinds={list(self.kinds)!r}): {exc}") from exc
        self._kind_keys = names
        self._kind_prefixes = prefixes
        KeyRedactionPolicy.__post_init__(self)
        self._keys = self._keys | names
        self._patterns = self._patterns + tuple(
            re.compile("^" + re.escape(prefix)) for prefix in prefixes)

    def is_redacted(self, key: str) -> bool:
        """Named by ``keys=``/``patterns=``, of a redacted kind, or repeating a redacted key."""
        hit = self._cache.get(key)
        if hit is None:
            self._cache[key] = False  # a key never repeats itself, even through a cycle
            hit = (key in self._keys or any(p.search(key) for p in self._patterns)
                   or self._follows(key))
            self._cache[key] = hit
        return hit

    def _follows(self, key: str) -> bool:
        return any(self.is_redacted(source) for source in _repeated(key))

    def redact_value(self, key: str, value: object) -> Any:
        """``value`` with the content of the redacted kinds masked, its structure kept."""
        shape = self._shape(key)
        if shape == "messages" and isinstance(value, list | tuple):
            return [self._message(m) for m in value]
        if shape == "tool_calls" and isinstance(value, list | tuple):
            return [self._tool_call(c) for c in value]
        if shape == "recall" and isinstance(value, Mapping):
            return _masked_texts(value)
        if shape == "slot_rows" and isinstance(value, list | tuple):
            return [_masked_fields(row, ("hash",)) for row in value]
        if shape == "delivery" and isinstance(value, Mapping):
            shown = dict(value)
            for part in ("delivered", "deferred"):
                if isinstance(shown.get(part), list | tuple):
                    shown[part] = [_masked_fields(row, ("key",)) for row in shown[part]]
            return shown
        if shape == "state" and isinstance(value, Mapping):
            return {k: (self.redact_value(k, v) if self.is_redacted(k) else v)
                    for k, v in value.items()}
        return REDACTED

    def keeps_shape(self, key: str) -> bool:
        return self._shape(key) in ("messages", "tool_calls", "slot_rows")

    def _shape(self, key: str) -> str:
        if key not in self._kind_keys and not any(
                key.startswith(prefix) for prefix in self._kind_prefixes) \
                and not self._follows(key):
            return "value"  # named by keys= or patterns=: masked whole
        found = trace.declared_key(key)
        return "value" if found is None else found.shape

    def _message(self, message: Any) -> Any:
        if not isinstance(message, Mapping):
            return REDACTED
        kinds = set(self.kinds)
        shown = dict(message)
        if "content" in shown and _content_kinds(message) & kinds:
            shown["content"] = REDACTED
        if shown.get("tool_calls"):
            shown["tool_calls"] = [self._tool_call(c) for c in shown["tool_calls"]]
        return shown

    def _tool_call(self, call: Any) -> Any:
        if not isinstance(call, Mapping):
            return REDACTED
        shown = dict(call)
        if "tool_args" in self.kinds and "args" in shown:
            shown["args"] = REDACTED
        return shown

    def report(self) -> dict[str, list[str]]:
        """What is redacted, never the values: the kinds, and the keys they resolved to."""
        shown = KeyRedactionPolicy.report(self)
        shown["kinds"] = list(self.kinds)
        shown["keys"] = sorted(set(self.keys))
        shown["keys_of_kinds"] = sorted(self._kind_keys)
        return shown


def _content_kinds(message: Mapping[str, Any]) -> set[str]:
    """The kinds a chat message's ``content`` can hold, from its role and who injected it."""
    role = message.get("role")
    injected_by = message.get("injected_by")
    if isinstance(injected_by, str):
        if trace.MEMORY_INJECTION.matches(injected_by):
            return {"memory_content", "documents"}
        return {"context"}
    return {"user": {"user_text"}, "assistant": {"model_text"}, "tool": {"tool_results"},
            "system": {"context"}}.get(str(role),
                                       set(trace.CONTENT_KINDS) - {"configuration", "timing"})


def _masked_texts(value: Mapping[str, Any]) -> dict[str, Any]:
    """A recall with every ``text`` masked; ids, turns, scores and flavor kept."""
    shown: dict[str, Any] = {}
    for key, item in value.items():
        if key == "text":
            shown[key] = REDACTED
        elif key == "pieces" and isinstance(item, list | tuple):
            shown[key] = [_masked_texts(piece) if isinstance(piece, Mapping) else REDACTED
                          for piece in item]
        elif isinstance(item, str):
            shown[key] = item if key in ("flavor",) else REDACTED
        else:
            shown[key] = item
    return shown


def _masked_fields(row: object, fields: tuple[str, ...]) -> object:
    """``row`` with ``fields`` (values derived from content) masked, the rest kept."""
    if not isinstance(row, Mapping):
        return REDACTED
    return {key: REDACTED if key in fields else item for key, item in row.items()}
