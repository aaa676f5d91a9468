"""The lint's rules that need no model: each reads the catalog's text and schemas only.

* ``duplicate-name`` (error): two tools share a name (a provider rejects it, or one hides).
* ``missing-description`` (error): no description, so the model sees only the name.
* ``thin-description`` (warning): fewer than ``THIN_WORDS`` words, or only the name's words.
* ``no-when-to-use`` (info): the description says what the tool does, never when to use it.
* ``enum-in-prose`` (warning): a plain string parameter whose description lists its values.
* ``undocumented-param`` (warning): an optional parameter without a description.

The heuristics are deliberately narrow (a finding should be worth reading): a value list
counts only as single words after "one of", "either", "must be", "allowed values" and the
like, quoted words (``'asc' or 'desc'``) or a ``a|b|c`` list.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._catalog import ToolDefinition
from ._report import LintFinding

__all__ = ["STATIC_RULES", "THIN_WORDS", "static_findings"]

STATIC_RULES = ("duplicate-name", "missing-description", "thin-description", "no-when-to-use",
                "enum-in-prose", "undocumented-param")
THIN_WORDS = 5
"""A description of fewer words than this is too thin to choose a tool by."""

_WORD = re.compile(r"[A-Za-z0-9]+")
_WHEN = re.compile(
    r"\b(?:use|used|using|call|invoke|when|whenever|if|before|after|unless|instead|only|"
    r"prefer|useful|ideal|suited|avoid|never|for (?:questions|requests|queries|cases))\b",
    re.I)
_WORD_OR_QUOTED = r"(?:'[^'\s]{1,30}'|\"[^\"\s]{1,30}\"|`[^`\s]{1,30}`|[A-Za-z0-9_.-]{1,30})"
_QUOTED = r"(?:'[^'\s]{1,30}'|\"[^\"\s]{1,30}\"|`[^`\s]{1,30}`)"
_SEP = r"(?:\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s*\|\s*|\s*/\s*|\s+and\s+)"
_TRIGGERED = re.compile(
    r"\b(?:one of|either|must be|can be|should be|(?:possible|allowed|valid|accepted|supported)"
    r" values(?: are)?|options(?: are)?|values?:|choose from)\s*:?\s*\(?"
    rf"(?P<list>{_WORD_OR_QUOTED}(?:{_SEP}{_WORD_OR_QUOTED})+)(?=$|[\s.;:)!?])", re.I)
_QUOTED_LIST = re.compile(rf"(?P<list>{_QUOTED}(?:{_SEP}{_QUOTED})+)")
_PIPES = re.compile(r"(?<![\w|])(?P<list>[A-Za-z0-9_-]+(?:\|[A-Za-z0-9_-]+)+)(?![\w|])")
_SPLIT = re.compile(_SEP, re.I)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def listed_values(description: str) -> list[str]:
    """The values a parameter description enumerates in prose (``[]`` when it lists none)."""
    for pattern in (_TRIGGERED, _QUOTED_LIST, _PIPES):
        match = pattern.search(description)
        if match:
            values = [v.strip("'\"`").rstrip(".") for v in _SPLIT.split(match["list"])]
            values = list(dict.fromkeys(v for v in values if v))
            if len(values) >= 2:
                return values
    return []


def _parameters(schema: Mapping[str, Any], prefix: str = ""
                ) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    """``(dotted name, schema, required)`` of every named parameter, nested objects included."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    for name, sub in properties.items():
        if not isinstance(sub, Mapping):
            continue
        path = f"{prefix}{name}"
        yield path, sub, name in needed
        yield from _parameters(sub, f"{path}.")
        items = sub.get("items")
        if isinstance(items, Mapping):
            yield from _parameters(items, f"{path}[].")


def _is_plain_string(schema: Mapping[str, Any]) -> bool:
    if any(key in schema for key in ("enum", "const", "oneOf", "anyOf", "allOf", "$ref")):
        return False
    kind = schema.get("type", "string")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def _duplicates(tools: Sequence[ToolDefinition]) -> list[LintFinding]:
    counts = Counter(tool.name for tool in tools)
    return [LintFinding(
        rule="duplicate-name", severity="error", tools=(name,),
        message=f"{count} tools are named {name!r}; a provider rejects the list or the model "
                "can only ever reach one of them.",
        fix=f"Give each tool named {name!r} a distinct name, or drop the copies.")
        for name, count in counts.items() if count > 1]


def _description(tool: ToolDefinition) -> list[LintFinding]:
    text = tool.description.strip()
    if not text:
        return [LintFinding(
            rule="missing-description", severity="error", tools=(tool.name,),
            message="the tool has no description, so the model chooses it by its name alone.",
            fix="Describe in a sentence or two what the tool does and when to use it.")]
    words = _words(text)
    if len(words) < THIN_WORDS or set(words) <= set(_words(tool.name.replace("_", " "))):
        return [LintFinding(
            rule="thin-description", severity="warning", tools=(tool.name,),
            message=f"the description {text[:60]!r} ({len(words)} word"
                    f"{'' if len(words) == 1 else 's'}) says too little to choose this tool "
                    "over another.",
            fix="Say what the tool does, what it returns and when to use it, in a sentence "
                "or two.")]
    if not _WHEN.search(text):
        return [LintFinding(
            rule="no-when-to-use", severity="info", tools=(tool.name,),
            message="the description says what the tool does but not when to use it.",
            fix="Add a sentence such as 'Use it when ...' naming the requests it is for "
                "(and, if another tool is close, when to prefer that one).")]
    return []


def _parameter_findings(tool: ToolDefinition) -> list[LintFinding]:
    out: list[LintFinding] = []
    for name, schema, required in _parameters(tool.input_schema):
        described = schema.get("description")
        text = described.strip() if isinstance(described, str) else ""
        if not required and not text:
            out.append(LintFinding(
                rule="undocumented-param", severity="warning", tools=(tool.name,),
                parameter=name,
                message=f"the optional parameter {name!r} has no description, so the model "
                        "cannot tell when to set it or what leaving it out means.",
                fix=f"Describe {name!r}: what it changes and what happens when it is "
                    "left out."))
        values = listed_values(text) if text and _is_plain_string(schema) else []
        if values:
            shown = ", ".join(values)
            out.append(LintFinding(
                rule="enum-in-prose", severity="warning", tools=(tool.name,), parameter=name,
                message=f"the description of {name!r} lists its values ({shown}) but the "
                        "schema accepts any string, so nothing checks the model's choice.",
                fix=f"Add \"enum\": {values!r} to the schema of {name!r}.".replace("'", '"')))
    return out


def static_findings(tools: Sequence[ToolDefinition]) -> list[LintFinding]:
    """The findings of every rule in ``STATIC_RULES`` (unsorted)."""
    out = _duplicates(tools)
    for tool in tools:
        out.extend(_description(tool))
        out.extend(_parameter_findings(tool))
    return out
