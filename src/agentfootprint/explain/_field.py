"""Why one field of a structured output holds its value: ``backtrack(result, field="approved")``.

A structured output is the JSON an answer carried, validated against the agent's ``output_type``
(``agent/_output.py``); the run recorded every answer checked (``output_attempts``: its call,
its text, its validation errors) and the value that validated (``output``). The chain of a
field starts there:

    FIELD    approved = false — of the output RefundDecision, from answer 2 (call_llm#12)
    ATTEMPT  answer 1 (call_llm#5) had approved = "perhaps": rejected (Input should be a valid
             boolean) and sent back to the model
    READ ... then the usual chain from the call whose answer validated, its suspects ranked
             against the field's name and value instead of the whole answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..runs import trace
from ..runs._view import CallView, RunView

__all__ = ["FieldOrigin", "field_origin"]

_MISSING = object()


@dataclass(frozen=True, slots=True)
class FieldOrigin:
    """A field's value and the answer it came from, read from a recording."""

    text: str
    """``field = value``: what the call's suspects are ranked against."""
    call: CallView
    """The call whose answer validated (the field's value is in its text)."""
    hops: list[tuple[str, str, str | None]]
    """``(kind, text, runtime stage id)``: FIELD, then ATTEMPT for each answer re-asked."""


def field_origin(view: RunView, field: str) -> FieldOrigin:
    """The origin of ``field`` (a name, or a dotted path such as ``items.0.name``) of the run's
    structured output. Raises ``ValueError`` for a run without one, ``KeyError`` naming the
    fields there are for a field that is not in it."""
    last = len(view.log.records) - 1
    output = view.log.value_at(trace.OUTPUT, last, default=None)
    attempts = view.log.value_at(trace.OUTPUT_ATTEMPTS, last, default=None) or []
    schema = view.log.value_at(trace.OUTPUT_SCHEMA, last, default=None) or {}
    if output is None or not attempts:
        raise ValueError("this run has no structured output to explain a field of; build the "
                         "agent with output_type=... (or backtrack the answer without field=)")
    if not isinstance(attempts, list) or not isinstance(output, dict | list):
        raise ValueError("this run's structured output was recorded redacted (a redaction "
                         "policy covers model_text), so its fields cannot be explained; "
                         "backtrack the answer without field=")
    value = _at(output, field)
    if value is _MISSING:
        known = ", ".join(sorted(output)) if isinstance(output, dict) else "(none)"
        raise KeyError(f"the output has no field {field!r}; its fields are: {known}")
    valid = next(a for a in reversed(attempts) if a.get("valid"))
    call = _call(view, valid.get("call"))
    type_name = schema.get("type", "the output type")
    shown = _json(value)
    hops: list[tuple[str, str, str | None]] = [(
        "FIELD", f"{field} = {shown} — of the output {type_name}, from answer "
                 f"{valid['attempt']} ({call.runtime_stage_id}), which validated",
        call.runtime_stage_id)]
    for attempt in attempts:
        if attempt is valid or not attempt.get("reasked"):
            continue
        hops.append(("ATTEMPT", _rejected(attempt, field), attempt.get("call")))
    return FieldOrigin(f"{field} {shown}", call, hops)


def _call(view: RunView, runtime_stage_id: Any) -> CallView:
    """The call that produced an answer (the final call when it was not recorded)."""
    if isinstance(runtime_stage_id, str):
        records = view.log.records_for(runtime_stage_id)
        if records:
            return view.call(records[-1])
    return view.call()


def _rejected(attempt: dict[str, Any], field: str) -> str:
    """An answer that failed validation: what it said for ``field`` and why it was sent back."""
    where = attempt.get("call") or "a call"
    errors = attempt.get("errors") or []
    own = [e for e in errors if e.get("field") == field or e.get("field", "").endswith(
        f".{field}")]
    said = _at(_parsed(attempt.get("text", "")), field)
    value = "no value" if said is _MISSING else _json(said)
    why = "; ".join(e.get("message", "") for e in own) if own else "; ".join(
        f"{e.get('field') or 'the answer'}: {e.get('message', '')}" for e in errors[:3])
    verdict = "rejected" if own else "valid here, but the answer was rejected"
    return (f"answer {attempt.get('attempt')} ({where}) had {field} = {value}: {verdict} "
            f"({why}) and sent back to the model")


def _parsed(text: str) -> Any:
    try:
        data = json.loads(text.strip().removeprefix("```json").removesuffix("```"))
    except ValueError:
        return None
    if isinstance(data, dict) and list(data) == ["result"]:
        return data["result"]
    return data


def _at(value: Any, path: str) -> Any:
    """``value`` at a dotted ``path`` (names and list indexes), or ``_MISSING``."""
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _json(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
