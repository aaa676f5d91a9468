"""Redaction: which keys and emitted events must never be recorded in the clear.

The policy is applied where the record is *written* (commit log, read/write events, emit
payloads, decision evidence), so no redacted value reaches the log, the narrative, an event,
a recording or a checkpoint's embedded log. Stage code always sees the real values.
One marker everywhere: ``"[REDACTED]"``.

Free text is covered as well as keys: every value a run masks under a redacted key is
remembered for the rest of the run (:class:`RunSecrets`), and any recorded string that repeats
it — an error message, a tool result quoting its argument, an emitted payload, a pause's data,
the run's output — shows the marker in its place; ``text_patterns`` mask secret-shaped text
(an API key's form) wherever it is recorded, whether or not a key held it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any, Final

from .._record import Shown, record_class

__all__ = ["REDACTED", "RedactionPolicy", "RunSecrets", "redacted_values", "scrub"]

MIN_SCRUBBED_CHARS: Final = 4
"""A redacted string value shorter than this is not searched for in payloads."""
MIN_SCRUBBED_LEAF_CHARS: Final = 12
"""Inside a redacted list or dict only longer strings count: short leaves are roles, names and
labels ("assistant", "balance") that would blank out ordinary words everywhere."""

REDACTED: Final = "[REDACTED]"


@record_class
class RedactionPolicy(Shown):
    """Keys by exact name, keys by regular expression, emitted event names by expression, and
    secret-shaped text by expression (``text_patterns``, masked in every recorded string).

    A dataclass whose ``__init__`` and ``__repr__`` are written once (``_record.py``); it
    compares by identity, as ``eq=False`` does."""

    keys: Iterable[str] = ()
    patterns: Iterable[str] = ()
    emit_patterns: Iterable[str] = ()
    text_patterns: Iterable[str] = ()
    seal_key: bytes | str | None = field(default=None, kw_only=True, repr=False)
    """A Fernet key the host holds (``cryptography.fernet.Fernet.generate_key()``, needs
    ``pip install "agentfootprint[seal]"``). With it, a paused agent run's checkpoint keeps its
    resume state (the real values: run state, input, nested levels) sealed with authenticated
    encryption, and ``agent.resume`` needs an agent with the same key. Without it, that resume
    state is plain JSON holding the paused call's real arguments. Never recorded or reported."""
    _keys: frozenset[str] = field(init=False, repr=False)
    _patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False)
    _emit: tuple[re.Pattern[str], ...] = field(init=False, repr=False)
    _text: tuple[re.Pattern[str], ...] = field(init=False, repr=False)
    _cache: dict[str, bool] = field(init=False, repr=False, default_factory=dict)

    def __init__(self, keys: Iterable[str] = (), patterns: Iterable[str] = (),
                 emit_patterns: Iterable[str] = (), text_patterns: Iterable[str] = (), *,
                 seal_key: bytes | str | None = None) -> None:
        self.keys = keys
        self.patterns = patterns
        self.emit_patterns = emit_patterns
        self.text_patterns = text_patterns
        self.seal_key = seal_key
        self._cache = {}
        self.__post_init__()

    def __post_init__(self) -> None:
        self.keys = tuple(self.keys)
        self.patterns = tuple(self.patterns)
        self.emit_patterns = tuple(self.emit_patterns)
        self.text_patterns = tuple(self.text_patterns)
        self._keys = frozenset(self.keys)
        self._patterns = tuple(_compile(p, "patterns") for p in self.patterns)
        self._emit = tuple(_compile(p, "emit_patterns") for p in self.emit_patterns)
        self._text = tuple(_compile(p, "text_patterns") for p in self.text_patterns)
        if self.seal_key is not None:
            from ._seal import check_seal_key  # loads cryptography only when a key is given

            check_seal_key(self.seal_key)
        for found in self._text:
            if found.search(""):
                from ..errors import ConfigurationError

                raise ConfigurationError(
                    f"RedactionPolicy text_patterns entry {found.pattern!r} matches empty text, "
                    "so it would mask nothing and everything; make it match the secret itself")

    def is_redacted(self, key: str) -> bool:
        """True when the state key ``key`` must be recorded as ``[REDACTED]``."""
        hit = self._cache.get(key)
        if hit is None:
            hit = key in self._keys or any(p.search(key) for p in self._patterns)
            self._cache[key] = hit
        return hit

    @property
    def has_key_rules(self) -> bool:
        """Whether any state key is redacted (then emit payloads are scrubbed of its values)."""
        return bool(self._keys or self._patterns)

    def redact_value(self, key: str, value: object) -> Any:
        """What the record shows of ``value`` under the redacted key ``key``: the marker.

        A policy that knows the shape of a key's value may keep its structure (roles, ids,
        offsets) and mask only the content, so a redacted run stays explainable.
        """
        return REDACTED

    def keeps_shape(self, key: str) -> bool:
        """True when ``redact_value`` maps a list value element by element (so an appended
        tail can be recorded as redacted elements, keeping the log delta-encoded)."""
        return False

    def is_redacted_emit(self, name: str) -> bool:
        """True when an emitted event's payload must be recorded as ``[REDACTED]``."""
        return any(p.search(name) for p in self._emit)

    def report(self) -> dict[str, list[str]]:
        """What is redacted, never the values (``text_patterns`` listed when there are some)."""
        shown = {
            "keys": sorted(self._keys),
            "patterns": [p.pattern for p in self._patterns],
            "emit_patterns": [p.pattern for p in self._emit],
        }
        if self._text:
            shown["text_patterns"] = [p.pattern for p in self._text]
        return shown


def _compile(pattern: str, field_name: str) -> re.Pattern[str]:
    from ..errors import ConfigurationError

    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigurationError(
            f"RedactionPolicy {field_name} entry {pattern!r} is not a valid regular expression "
            f"({exc}); escape it with re.escape() or fix the pattern"
        ) from exc


def redacted_values(policy: RedactionPolicy, *sources: Mapping[str, Any]) -> set[Any]:
    """What the record masks under redacted keys in ``sources``: a payload must not repeat it.

    Only what ``policy.redact_value`` actually masks counts, so a policy that keeps a value's
    structure (roles, tool names, ids) does not blank those words out of every event. A masked
    string or number counts when it is a string of at least :data:`MIN_SCRUBBED_CHARS` or a
    number; inside a masked list or dict, string leaves of at least
    :data:`MIN_SCRUBBED_LEAF_CHARS` count (numbers and short labels there do not).
    """
    found: set[Any] = set()
    for source in sources:
        for key, value in source.items():
            if policy.is_redacted(key):
                _masked_into(found, value, policy.redact_value(key, value))
    return found


def _masked_into(found: set[Any], value: object, shown: object) -> None:
    """Add to ``found`` what ``shown`` (the record's form of ``value``) masks of it."""
    if isinstance(shown, str) and shown == REDACTED and value != REDACTED:
        if isinstance(value, str):
            if len(value) >= MIN_SCRUBBED_CHARS:
                found.add(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found.add(value)
        else:
            _leaves_into(found, value)
    elif isinstance(value, Mapping) and isinstance(shown, Mapping):
        for key, item in value.items():
            _masked_into(found, item, shown.get(key, REDACTED))
    elif isinstance(value, list | tuple) and isinstance(shown, list | tuple) \
            and len(value) == len(shown):
        for item, seen in zip(value, shown, strict=True):
            _masked_into(found, item, seen)


def _leaves_into(found: set[Any], value: object) -> None:
    if isinstance(value, str):
        if len(value) >= MIN_SCRUBBED_LEAF_CHARS:
            found.add(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _leaves_into(found, item)
    elif isinstance(value, list | tuple):
        for item in value:
            _leaves_into(found, item)


def scrub(payload: object, secrets: set[Any]) -> Any:
    """``payload`` with every occurrence of a secret replaced by :data:`REDACTED`.

    An emitted payload often repeats a state value (an answer, a message); key redaction
    would be hollow if the same text then reached the record through the event.
    """
    texts = sorted((s for s in secrets if isinstance(s, str)), key=len, reverse=True)

    def clean(value: object) -> Any:
        if isinstance(value, str):
            for secret in texts:
                if secret in value:
                    value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return REDACTED if value in secrets else value
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return clean(payload)


class RunSecrets:
    """What one run's record must never show in the clear, learned as the run goes.

    The engine tells it every value a redacted key masks (:meth:`learn`) and a stage may name
    one more (:meth:`add`: a recalled memory written from redacted content); every string the
    record then takes — a commit's values, an error message, a decision's evidence, a pause's
    data, the output — is passed through :meth:`scrub`, which puts :data:`REDACTED` where a
    learned value or a ``text_patterns`` match stood. Only strings are rewritten in the log (a
    masked number would blank out counters and ids everywhere); an emitted payload also loses
    a number equal to a masked one (``numbers=True``). Unchanged values come back as the same
    object, so the log keeps sharing them with the state.
    """

    __slots__ = ("_numbers", "_order", "_patterns", "_shortest", "_texts", "active",
                 "masks_numbers")

    def __init__(self, policy: RedactionPolicy | None) -> None:
        self._texts: set[str] = set()
        self._numbers: set[int | float] = set()
        self._order: tuple[str, ...] = ()
        self._shortest = 0
        self._patterns = policy._text if policy is not None else ()
        self.active = bool(self._patterns)
        """Whether anything is masked in free text yet (when not, :meth:`scrub` is identity);
        a plain attribute, kept as it changes, since every commit and emit asks."""
        self.masks_numbers = False
        """Whether a masked number is known (then an emitted payload loses its equals)."""

    def learn(self, value: object, shown: object) -> None:
        """Remember what ``shown`` (the record's form of ``value``) masked of it."""
        found: set[Any] = set()
        _masked_into(found, value, shown)
        self._grow(found)

    def learn_state(self, policy: RedactionPolicy, state: Mapping[str, Any]) -> None:
        """Remember what ``policy`` masks of every redacted key of ``state``."""
        self._grow(redacted_values(policy, state))

    def add(self, text: str) -> None:
        """Never show ``text`` in this run's record (shorter than 4 characters: ignored)."""
        if isinstance(text, str) and len(text) >= MIN_SCRUBBED_CHARS:
            self._grow((text,))

    def _grow(self, found: Iterable[Any]) -> None:
        texts = []
        for item in found:
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                self._numbers.add(item)
                self.masks_numbers = True
        fresh = [t for t in texts if t not in self._texts and t != REDACTED]
        if fresh:
            self._texts.update(fresh)
            self._order = tuple(sorted(self._texts, key=len, reverse=True))
            self._shortest = len(self._order[-1])
            self.active = True

    def text(self, value: str) -> str:
        """``value`` with every learned secret and pattern match masked."""
        if len(value) >= self._shortest:
            for secret in self._order:
                if secret in value:
                    value = value.replace(secret, REDACTED)
        for pattern in self._patterns:
            value = pattern.sub(REDACTED, value)
        return value

    def scrub(self, value: Any, *, numbers: bool = False) -> Any:
        """``value`` with its strings (and, with ``numbers``, masked numbers) masked; the same
        object when nothing changed."""
        if not self.active and not (numbers and self._numbers):
            return value
        masked = self._numbers if numbers else None
        return self._clean(value, masked)

    def _clean(self, value: Any, numbers: set[int | float] | None) -> Any:
        if isinstance(value, str):
            shown = self.text(value)
            return value if shown == value else shown
        if numbers and isinstance(value, int | float) and not isinstance(value, bool):
            return REDACTED if value in numbers else value
        if isinstance(value, Mapping):
            out = {k: self._clean(v, numbers) for k, v in value.items()}
            return value if all(out[k] is v for k, v in value.items()) else out
        if isinstance(value, list | tuple):
            items = [self._clean(v, numbers) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        return value
