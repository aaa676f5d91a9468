"""Value rules shared by the scope, the commit log and the narrative.

State values are JSON-shaped (None, bool, int, float, str, list, dict with str keys).
Committed values are *frozen*: lists and dicts become ``FrozenList``/``FrozenDict`` (real
``list``/``dict`` subclasses that refuse mutation), so state, the log and every reader can
share one object safely, and a step that copies a long history and appends one message costs
one pointer per element, not a deep copy. Reads hand back a shallow, mutable copy of the top
level (``thaw``): append to it and write it back; nested values stay read-only, and mutating
one raises an error that says how to copy it.

* ``freeze``     -- the committed, shareable form of a value;
* ``thaw``       -- what a read returns: a plain top-level copy over frozen parts;
* ``copy_value`` -- a fully independent, plain (mutable) deep copy, for replay and callers;
* ``same_value`` -- the strict equality that decides whether a write changed anything
                    (type-exact, NaN equals NaN, lists ordered, dict key order included);
* ``settle``     -- what a commit makes of a write over the committed value: nothing (same
                    value), or the frozen new value and whether it only appended a tail;
* ``summarize``  -- a short, one-line rendering for narratives and evidence.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from copy import deepcopy
from operator import is_not
from typing import Any, Final, NoReturn

__all__ = [
    "MISSING",
    "SCALAR_TYPES",
    "Appended",
    "DraftList",
    "FrozenDict",
    "FrozenList",
    "commit_append",
    "committed_of",
    "copy_value",
    "draft",
    "extends",
    "freeze",
    "same_value",
    "settle",
    "shared_prefix",
    "thaw",
]


class _Missing:
    """Sentinel for "no value": absent keys, deleted keys. Distinct from ``None``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final[Any] = _Missing()

_SCALARS: Final = frozenset((str, int, float, bool, type(None)))
SCALAR_TYPES: Final = _SCALARS
"""The exact types of scalar state values (a subclass is not one): committed as they are."""


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    kind = "list" if isinstance(self, list) else "dict"
    raise TypeError(
        f"this {kind} is part of committed state and is read-only; copy it "
        f"({kind}(value) or a comprehension), change the copy and write it back")


class _Tracked(list[Any]):
    """The one slot layout of ``FrozenList`` and ``DraftList``.

    Sharing it lets a commit turn a stage's own ``DraftList`` into the committed
    ``FrozenList`` in place (``__class__`` assignment needs identical layouts), so an append
    to a long list is committed without copying the list (see ``settle``).
    """

    __slots__ = ("_base", "_clean", "_spine", "_upto")

    _spine: list[Any]
    _upto: int
    _base: FrozenList
    _clean: int


class FrozenList(_Tracked):
    """A committed list: reads like a list, refuses every mutation.

    A list committed as an earlier committed list plus a tail remembers that lineage (see
    ``extends``): ``_spine`` is an append-only list shared by the lineage and ``_upto`` how
    much of it this list is, so "is ``old`` a prefix of ``new``" is answered in constant time
    (a cache over a history, e.g. the provider messages, then only does the tail's work).
    """

    __slots__ = ()

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self


class FrozenDict(dict[str, Any]):
    """A committed dict: reads like a dict, refuses every mutation."""

    __slots__ = ()
    clear = pop = popitem = setdefault = update = _refuse
    __setitem__ = __delitem__ = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


class DraftList(_Tracked):
    """What a read of a committed list returns: a plain, mutable list that remembers its origin.

    It is a real ``list`` (every list operation works and is a stage's own copy), plus two
    facts the commit uses: the committed ``FrozenList`` it was copied from (``_base``), and
    how many leading elements are still that list's own objects (``_clean``). ``append``,
    ``extend`` and ``+=`` keep the prefix (they run at C speed, not overridden); every other
    mutation lowers ``_clean`` to the first position it may have touched. So a stage that
    reads a long history, appends one message and writes it back is frozen, compared and
    recorded as an append in time proportional to the message, not to the history.
    """

    __slots__ = ()

    def _touch(self, index: Any) -> None:
        n = len(self)
        if type(index) is int:
            low = index + n if index < 0 else index
        elif isinstance(index, slice):
            start, _, step = index.indices(n)
            low = start if step > 0 else 0
        else:
            low = 0
        if low < self._clean:
            self._clean = max(low, 0)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._touch(index)
        list.__setitem__(self, index, value)

    def __delitem__(self, index: Any) -> None:
        self._touch(index)
        list.__delitem__(self, index)

    def insert(self, index: Any, value: Any) -> None:
        self._touch(min(index, len(self)) if type(index) is int else 0)
        list.insert(self, index, value)

    def pop(self, index: Any = -1) -> Any:
        self._touch(index)
        return list.pop(self, index)

    def remove(self, value: Any) -> None:
        self._clean = 0
        list.remove(self, value)

    def clear(self) -> None:
        self._clean = 0
        list.clear(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._clean = 0
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        self._clean = 0
        list.reverse(self)

    def __imul__(self, times: Any) -> DraftList:  # type: ignore[misc]
        self._clean = 0
        list.__imul__(self, times)
        return self

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, list):
            return NotImplemented
        out = draft(self, self._base, self._clean)
        list.extend(out, other)
        return out

    def copy(self) -> DraftList:
        return draft(self, self._base, self._clean)

    def __copy__(self) -> DraftList:
        return draft(self, self._base, self._clean)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [deepcopy(x, memo) for x in self]

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (list, (list(self),))


def draft(items: Iterable[Any], base: FrozenList, clean: int) -> DraftList:
    """A ``DraftList`` of ``items`` whose first ``clean`` elements are ``base``'s own."""
    out = DraftList(items)
    out._base = base
    out._clean = clean
    return out


_LISTS: Final = (list, FrozenList, tuple)
_DICTS: Final = (dict, FrozenDict)
_DONE: Final = _SCALARS | {FrozenList, FrozenDict}
"""Types ``freeze`` returns unchanged: an element of one of these needs no walk."""
_LINEAGE: Final = threading.Lock()
"""Guards the check-then-extend of a lineage's spine (see ``FrozenList``)."""
_SHORT: Final = 16
"""Below this many elements a plain loop beats setting up the identity scan."""


# The functions below dispatch on ``type(value)`` itself, not ``isinstance``: a list or dict
# subclass other than the frozen ones is a foreign value and is passed through untouched. Once
# the type has decided a branch, the isinstance after it always holds: it narrows for mypy.


# Any, not object: narrowing each branch for mypy would cost an isinstance call per frozen
# container, on every commit.
def freeze(value: Any) -> Any:
    """The committed form: lists and dicts frozen all the way down (frozen parts reused).

    A ``DraftList`` freezes only what follows the prefix it still shares with the committed
    list it was read from (and is that very list again when nothing changed). A list or dict
    is copied once at C speed, then only its elements that are not frozen yet are replaced
    (a long list of frozen parts is recognised without a Python step per element).
    """
    kind = type(value)
    if kind in _DONE:
        return value
    if kind is dict:
        frozen = FrozenDict(value)
        for key, item in value.items():
            if type(item) not in _DONE:
                _put_key(frozen, key, freeze(item))
        return frozen
    if kind is DraftList:
        return _freeze_after(value, value._clean, value._base)
    if kind is list or kind is tuple:
        out = FrozenList(value)
        if len(value) >= _SHORT and _DONE.issuperset(map(type, value)):
            return out
        for index, item in enumerate(value):
            if type(item) not in _DONE:
                _put_index(out, index, freeze(item))
        return out
    return value


_put_key: Final = dict.__setitem__
"""Fills a ``FrozenDict`` freeze just made (its own ``__setitem__`` refuses)."""
_put_index: Final = list.__setitem__
"""Fills a ``FrozenList`` freeze just made."""


def _freeze_after(value: Sequence[Any], shared: int, base: FrozenList) -> FrozenList:
    """``value`` frozen, its first ``shared`` elements being ``base``'s own (frozen) objects."""
    if shared == len(value) == len(base):
        return base
    if shared == 0:
        return FrozenList([x if type(x) in _DONE else freeze(x) for x in value])
    out = FrozenList(value)  # one copy; the part after the shared head is frozen in place
    put = list.__setitem__
    for index in range(shared, len(value)):
        item = value[index]
        if type(item) not in _DONE:
            put(out, index, freeze(item))
    if shared == len(base):  # base plus a tail: the new tip of base's lineage
        _grow_lineage(base, out)
    return out


def _grow_lineage(base: FrozenList, out: FrozenList) -> None:
    """Record that ``out`` is ``base`` plus a tail (see ``extends``)."""
    with _LINEAGE:  # runs on other threads may extend one shared committed list
        spine: list[Any] | None = getattr(base, "_spine", None)
        if spine is None:  # base starts a lineage (its content is spine[:len(base)])
            spine = list(base)
            base._spine, base._upto = spine, len(base)
        elif len(spine) != len(base):  # base is not its lineage's tip: a new spine
            spine = list(base)
        spine.extend(out[len(base):])
        out._spine, out._upto = spine, len(out)


def _promote(value: DraftList, base: FrozenList) -> FrozenList:
    """The stage's own ``value`` (``base`` plus an appended tail) committed in place.

    Its tail is frozen element by element and the list itself becomes the ``FrozenList``
    (no copy of the shared front): a commit of an append to a long list costs the append.
    The stage gave the list up by writing it; should it mutate it after its stage ended,
    it is told the list is committed now, as for any committed value.
    """
    put = list.__setitem__
    for index in range(len(base), len(value)):
        item = value[index]
        if type(item) not in _DONE:
            put(value, index, freeze(item))
    del value._base, value._clean  # a committed list keeps no earlier list alive
    value.__class__ = FrozenList  # type: ignore[assignment]
    out: FrozenList = value  # type: ignore[assignment]
    _grow_lineage(base, out)
    return out


class Appended:
    """A stage's staged append to a committed list (``Scope.append``), not copied yet.

    ``base`` is the committed, non-empty ``FrozenList`` the stage appended to and ``items``
    what it appended, in order. It stands for ``base + items`` exactly as a ``DraftList`` read
    from ``base`` with ``items`` appended would (``draft``, for any read of it); the commit
    turns it into ``commit_append(base, items)`` when ``base`` is still the committed value,
    so appending to a long list costs the items, never the list.
    """

    __slots__ = ("base", "items")

    def __init__(self, base: FrozenList, items: list[Any]) -> None:
        self.base: FrozenList | None = base
        self.items = items

    def draft(self) -> DraftList:
        """The same value as a stage's own list (what a read of it returns)."""
        base = self.base
        assert base is not None  # (dropped only by the commit that consumes it)
        out = DraftList(base)
        out.extend(self.items)
        out._base, out._clean = base, len(base)
        return out


_refcount: Final = getattr(sys, "getrefcount", None)


def _count_in_call(base: object) -> int:
    assert _refcount is not None
    return int(_refcount(base))


def _alone_count() -> int:
    """``getrefcount`` of a committed list only the state holds, seen from ``commit_append``:
    the state's entry, the commit's local, this call's argument and ``getrefcount``'s own (4 on
    CPython 3.11). Measured in the same call shape rather than assumed, because interpreters
    differ in which stack references they count; 0 (never in place) without ``getrefcount``."""
    if _refcount is None:
        return 0
    state = {"k": FrozenList()}
    base = state["k"]
    return _count_in_call(base)


_ALONE: Final = _alone_count()


def commit_append(base: FrozenList, items: list[Any]) -> FrozenList:
    """``base`` plus ``items`` (frozen) as a committed list, ``base``'s state entry released.

    When nothing but the state holds ``base`` (CPython reference count; the caller must have
    dropped its other references), nobody can tell it apart from a new list: it is extended in
    place, so the commit costs the items only. Otherwise (a reader, the log, a cache or
    another run holds it) it is copied and stays as it was. Either way the result starts
    with ``base``'s own objects and is the new tip of its lineage (see ``extends``).
    """
    if len(items) == 1:  # one item (a row per model call): no comprehension, whose frame
        item = items[0]  # costs more than the item
        tail = [item if type(item) in _DONE else freeze(item)]
    else:
        tail = [x if type(x) in _DONE else freeze(x) for x in items]
    if _refcount is not None and _refcount(base) <= _ALONE:
        with _LINEAGE:
            spine: list[Any] | None = getattr(base, "_spine", None)
            if spine is None or len(spine) == len(base):  # base is its lineage's tip
                list.extend(base, tail)
                if spine is not None:
                    spine.extend(tail)
                    base._upto = len(base)
                return base
    out = FrozenList(base)
    list.extend(out, tail)
    _grow_lineage(base, out)
    return out


def extends(new: object, old: object) -> bool:
    """True when the committed list ``new`` is known to start with ``old``'s own objects.

    Constant time; ``False`` means "not known" (lists built some other way), never "no".
    A lineage's spine only ever grows at its end, by its tip, so a member's part of it never
    changes.
    """
    if type(new) is not FrozenList or type(old) is not FrozenList:
        return False
    if new is old:
        return True
    spine = getattr(new, "_spine", None)
    return spine is not None and getattr(old, "_spine", None) is spine and old._upto <= new._upto


def committed_of(value: object) -> FrozenList | None:
    """The committed list ``value`` is exactly (itself, or an unchanged read of it), if any.

    With ``extends`` this lets a cache over a growing history (the wire messages, the
    delivery keys already in it) do only the new messages' work.
    """
    if type(value) is FrozenList and isinstance(value, FrozenList):
        return value
    if type(value) is DraftList and isinstance(value, DraftList):
        base = value._base
        if value._clean == len(value) == len(base):
            return base
    return None


def _known_shared(a: Any, b: Any) -> int:
    """Leading elements ``a`` and ``b`` are known to share by identity without a scan."""
    if type(a) is DraftList and a._base is b:
        return int(a._clean)
    if type(b) is DraftList and b._base is a:
        return int(b._clean)
    return -1


def shared_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading elements ``a`` and ``b`` share *by identity* (up to the shorter one).

    Constant time when one is a ``DraftList`` read from the other; otherwise a scan that
    skips identical elements without comparing their contents.
    """
    known = _known_shared(a, b)
    if known >= 0:
        return known
    n = len(a) if len(a) < len(b) else len(b)
    if n >= _SHORT and not any(map(is_not, a, b)):
        return n
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x is not y:
            return i
    return n


def settle(base: Any, new: Any) -> tuple[Any, int] | None:
    """What committing ``new`` over the committed ``base`` (``MISSING`` if absent) comes to.

    ``None`` when ``new`` is the same value as ``base`` (``same_value``); else the frozen
    new value and ``grown``: ``len(base)`` when ``new`` is ``base`` plus a tail (the log
    records an ``append`` of ``frozen[grown:]``), ``0`` otherwise. The elements ``new``
    shares with ``base`` by identity are neither compared nor frozen again, so a write that
    appended to a long list read from state costs the tail only.
    """
    if new is base:
        return None
    kind = type(new)
    if kind in _SCALARS:  # the common write: a number or a string (same_value, inlined)
        if type(base) is kind and (base == new or (kind is float and base != base
                                                   and new != new)):
            return None
        return new, 0
    if type(base) is FrozenList and (kind is list or kind is DraftList or kind is tuple
                                     or kind is FrozenList):
        nb, nn = len(base), len(new)
        least = nb if nb < nn else nn
        if kind is DraftList and new._base is base:
            shared = new._clean
        elif least >= _SHORT:
            shared = shared_prefix(new, base)
        else:  # short: the plain walk below is cheaper than setting up a scan
            shared = 0
        prefix = True
        if shared < least:
            for x, y in (zip(new, base, strict=False) if shared == 0  # up to the shorter
                         else zip(new[shared:least], base[shared:least], strict=True)):
                if x is not y and not same_value(x, y):
                    prefix = False
                    break
        if prefix and nn == nb:
            return None
        if kind is FrozenList:
            frozen = new
        elif kind is DraftList and new._base is not base:
            frozen = freeze(new)
        elif kind is DraftList and shared == nb and nb < nn:
            frozen = _promote(new, base)
        elif shared == 0:
            frozen = freeze(new)
        else:
            frozen = _freeze_after(new, shared, base)
        return frozen, (nb if prefix and 0 < nb < nn else 0)
    if base is not MISSING and same_value(base, new):
        return None
    return freeze(new), 0


def thaw(value: object) -> Any:
    """A read's result: a mutable copy of the top level; nested values stay shared and frozen.

    A list comes back as a ``DraftList`` (a ``list`` that remembers which committed list it
    copied), so writing it back after an append costs the append only.
    """
    kind = type(value)
    if kind is FrozenList and isinstance(value, FrozenList):
        out = DraftList(value)
        out._base, out._clean = value, len(value)
        return out
    if kind is FrozenDict and isinstance(value, dict):
        return dict(value)
    return value


# Any, not object: narrowing each branch for mypy would cost an isinstance call per copied
# container.
def copy_value(value: Any) -> Any:
    """A plain, fully independent deep copy (frozen parts become ordinary lists and dicts).

    Each list or dict is copied once at C speed, then only its container elements are
    replaced by their own copies (a run's history is copied this way for its result); a long
    list of scalars only is recognised without a Python step per element.
    """
    kind = type(value)
    if kind is FrozenDict or kind is dict:
        copied = dict(value)
        for key, item in copied.items():
            if type(item) not in _SCALARS:
                copied[key] = copy_value(item)
        return copied
    if kind is FrozenList or kind is list or kind is DraftList:
        out = list(value)
        if len(out) >= _SHORT and _SCALARS.issuperset(map(type, out)):
            return out
        for index, item in enumerate(out):
            if type(item) not in _SCALARS:
                out[index] = copy_value(item)
        return out
    if kind is tuple:
        return [copy_value(x) for x in value]
    return value


_KINDS: Final[dict[type, type]] = {FrozenList: list, tuple: list, DraftList: list,
                                   FrozenDict: dict}
"""What ``same_value`` compares a value as (a type not in the table is itself)."""


# Any, not object: narrowing its branches for mypy costs isinstance calls per compared
# container, on every commit.
def same_value(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same state value (``1``, ``1.0`` and ``True`` differ).

    Shared (identical) parts compare in constant time, so re-writing a long list that only
    gained a tail costs one identity check per element.
    """
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is int or ta is bool):
        return bool(a == b)
    kind = _KINDS.get(ta, ta)
    if kind is not _KINDS.get(tb, tb):
        return False
    if kind is float:
        return bool(a == b or (a != a and b != b))  # NaN equals NaN
    if kind is list:
        n = len(a)
        if n != len(b):
            return False
        if n >= _SHORT or ta is DraftList or tb is DraftList:
            shared = shared_prefix(a, b)
            if shared == n:
                return True
            if shared:
                a, b = a[shared:], b[shared:]
        for x, y in zip(a, b, strict=True):  # a loop, not all(): no generator per call
            if x is not y and not same_value(x, y):
                break
        else:
            return True
        return False
    if kind is dict:
        if len(a) != len(b):
            return False
        for (k, v), other in zip(a.items(), b, strict=True):
            if k != other:  # key order is kept by replay, so it counts
                return False
            w = b[k]
            if v is w:
                continue
            tv = type(v)
            if tv is str or tv is int:  # the common leaf, without a call
                if type(w) is not tv or v != w:
                    return False
            elif not same_value(v, w):
                return False
        return True
    try:
        return bool(a == b)
    except Exception:  # an exotic __eq__ must not break a commit
        return False


def same_prefix(longer: Any, prefix: Any) -> bool:
    """True when the list ``longer`` starts with exactly the elements of ``prefix``
    (elements shared by identity are skipped at C speed)."""
    shared = shared_prefix(longer, prefix)
    return all(x is y or same_value(x, y)
               for x, y in zip(longer[shared:], prefix[shared:], strict=False))
