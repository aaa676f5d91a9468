"""Labelled values: what "the answer states a value" means for the contradiction check.

The check compares what the answer says with what it was given, without a model, so it only
reads values a person would call stated outright. A **claim** is a label followed by a value:

* in text: one to four words, then ``:``, ``=``, ``is``, ``was``, ``are``, ``were`` or
  ``equals``, then the value (``Your balance is 250.00 EUR``, ``order id: ORD-7781``);
* in a JSON object (a tool that returned JSON): every scalar under a key, labelled by its key
  (``{"balance": 120.0}``; nested objects by their innermost key).

A **value** is one of three kinds, compared only with its own kind:

* a date: ``YYYY-MM-DD`` (compared as written);
* a number: digits with optional sign, currency sign, thousands commas, decimals and a trailing
  ``%`` (compared as decimals, so ``120`` = ``120.00``; a percent only with a percent);
* an identifier: letters and digits mixed (``ORD-7781``, ``A1B2``; compared case-insensitively).

Labels are lower-cased words with ``the``/``your``/``a``… dropped; two labels are the same when
the shorter is the tail of the longer (``account balance`` names ``balance``). A value any
source gives under the label agrees; sources that give one label several different values are
ambiguous and never used for a finding. Anything else — prose,
paraphrase, units, arithmetic — is out of scope: no finding is ever made from it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

__all__ = ["Claim", "claims_in", "same_label", "same_value"]

ValueKind = Literal["date", "number", "id"]

_DATE: Final = r"\d{4}-\d{2}-\d{2}"
_NUMBER: Final = r"[-+]?[$€£]?\d[\d,]*(?:\.\d+)?%?"
_ID: Final = r"(?=[A-Za-z0-9_-]*[A-Za-z])(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{2,}"
_VALUE: Final = rf"(?P<value>{_DATE}|{_ID}|{_NUMBER})(?![\w.-]*\w)"
_CLAIM: Final = re.compile(
    r"(?P<label>(?:[A-Za-z][\w'-]*\s+){0,3}[A-Za-z][\w'-]*)\s*"
    r"(?::|=|\s(?:is|was|are|were|equals)\b)\s*" + _VALUE)
_STOP: Final = frozenset({"the", "a", "an", "your", "my", "our", "their", "its", "his", "her",
                          "this", "that", "these", "those", "of", "for", "and", "to", "in",
                          "on", "at", "with", "current", "new", "so", "now", "then", "which"})


@dataclass(frozen=True, slots=True)
class Claim:
    """One labelled value found in a text."""

    label: tuple[str, ...]
    """The label's words, lower-cased, without filler words."""
    value: str
    """The value as written."""
    kind: ValueKind

    @property
    def label_text(self) -> str:
        return " ".join(self.label)


def claims_in(text: str) -> list[Claim]:
    """Every claim in ``text``: its JSON scalars when it is a JSON object, else its phrases."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            out: list[Claim] = []
            _json_claims(parsed, None, out)
            return out
    found = []
    for match in _CLAIM.finditer(text):
        label = _label(match.group("label"))
        value = match.group("value")
        kind = _kind(value)
        if label and kind is not None:
            found.append(Claim(label, value, kind))
    return found


def same_label(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """True when the shorter label is the tail of the longer."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return bool(short) and long[len(long) - len(short):] == short


def same_value(a: Claim, b: Claim) -> bool | None:
    """Whether two values agree; None when they are not comparable (different kinds)."""
    if a.kind != b.kind:
        return None
    if a.kind == "number":
        if a.value.endswith("%") != b.value.endswith("%"):
            return None
        left, right = _decimal(a.value), _decimal(b.value)
        if left is None or right is None:
            return None
        return left == right
    if a.kind == "id":
        return a.value.lower() == b.value.lower()
    return a.value == b.value


def _json_claims(value: Any, key: str | None, out: list[Claim]) -> None:
    if isinstance(value, dict):
        for name, inner in value.items():
            _json_claims(inner, str(name), out)
    elif isinstance(value, list):
        for inner in value:
            if isinstance(inner, dict | list):
                _json_claims(inner, key, out)
    elif key is not None and not isinstance(value, bool):
        text = str(value) if isinstance(value, int | float | str) else ""
        kind = _kind(text) if text and re.fullmatch(_VALUE, text) else None
        label = _label(key.replace("_", " ").replace("-", " "))
        if label and kind is not None:
            out.append(Claim(label, text, kind))


def _label(text: str) -> tuple[str, ...]:
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]
    return tuple(w for w in words if w not in _STOP and not w.isdigit())


def _kind(value: str) -> ValueKind | None:
    if re.fullmatch(_DATE, value):
        return "date"
    if re.fullmatch(_NUMBER, value):
        return "number"
    if re.fullmatch(_ID, value):
        return "id"
    return None


def _decimal(value: str) -> Decimal | None:
    try:
        return Decimal(re.sub(r"[$€£,%+]", "", value))
    except InvalidOperation:
        return None
