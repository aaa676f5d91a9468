"""A step's staged writes applied to its namespace's state: the net changes its record holds.

The engine's commit calls ``apply_staged`` once per step that wrote something. A key written
back unchanged records nothing; a list that grew by a tail records an ``append`` of the tail
(the long front is neither compared nor copied); a redacted key records its masked form, and
the run's secrets learn what was masked so no other record repeats it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._commitlog import Change, _ChangeSlots, new_change
from ._values import MISSING, SCALAR_TYPES, Appended, FrozenList, commit_append, freeze, settle

if TYPE_CHECKING:
    from ._frame import Frame

__all__ = ["apply_staged"]

_new = object.__new__


def apply_staged(staged: dict[str, Any], frame: Frame) -> list[Change]:
    """Apply ``staged`` to ``frame.state``; the net changes, in first-write order."""
    changes: list[Change] = []
    state = frame.state
    policy = frame.redaction
    for key, new in staged.items():
        base = state.get(key, MISSING)
        if new is base:  # written back as read (a scalar, or a list read with ``peek``)
            continue
        kind = type(new)
        if kind in SCALAR_TYPES:  # ``settle`` of a scalar, inlined: most writes are one
            if (type(base) is kind and (
                    base == new or (kind is float and base != base and new != new))):
                continue
            grown = 0
        elif new is MISSING:
            if base is not MISSING:
                del state[key]
                changes.append(new_change(key, "delete"))
            continue
        elif kind is Appended and new.base is base and (
                policy is None or not policy.is_redacted(key)):
            # ``Scope.append`` to the committed list: the same append, without a copy
            new.base = None  # (so the list may be extended in place: see commit_append)
            grown = len(base)
            state[key] = new = commit_append(base, new.items)
            change: Any = _new(_ChangeSlots)  # ``new_change``, inlined (see _ChangeSlots)
            change.key = key
            change.op = "append"
            change.value = FrozenList(new[grown:])
            change.__class__ = Change
            changes.append(change)
            continue
        else:
            if kind is Appended:  # the state moved on, or a masked key: as a plain write
                new = new.draft()
            settled = settle(base, new)
            if settled is None:  # the same value: nothing changed
                continue
            new, grown = settled  # state and log share one read-only value from here on
        state[key] = new
        if policy is not None and policy.is_redacted(key):
            secrets = frame.secrets
            if grown and policy.keeps_shape(key):
                fresh = list(new[grown:])
                tail = policy.redact_value(key, fresh)
                secrets.learn(fresh, tail)
                changes.append(new_change(key, "append", freeze(tail)))
            else:
                shown = policy.redact_value(key, new)
                secrets.learn(new, shown)
                changes.append(new_change(key, "set", freeze(shown)))
        else:  # ``new_change``, inlined: most changes are recorded here
            change = _new(_ChangeSlots)  # (see _ChangeSlots)
            change.key = key
            if grown:
                change.op = "append"
                change.value = FrozenList(new[grown:])
            else:
                change.op = "set"
                change.value = new
            change.__class__ = Change
            changes.append(change)
    return changes
