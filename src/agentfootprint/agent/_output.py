"""Structured output: ``output_type=`` turned into a JSON schema, asked for the provider's way,
checked on every answer, and re-asked with the failing fields named.

How it is asked for: a provider whose ``structured_output`` names a native mode gets the schema
in ``LLMRequest.output_schema`` (OpenAI ``response_format``, which llama.cpp servers turn into a
grammar; Anthropic a forced final-answer tool; Ollama ``format``; the mock: its scripted text);
any other provider is offered the final-answer tool by the loop itself, with ``tool_choice``
``required``. Either way the answer's text is the JSON that is validated.

What the run records (declared in ``runs/trace.py``): ``output_schema`` (the type's name, the
schema, the mode, the retry budget) at the first call; ``output_attempts``, one row per answer
checked — the call that produced it, its text, valid or not, and every error's field — and
``output``, the validated value in JSON form. An answer that fails validation is sent back with
the fields named (stage ``output_retry``) until ``output_retries`` re-asks are spent; then the
run fails with ``OutputValidationError`` naming the field. A re-ask is an extra iteration: it
never eats the tool budget (``max_iterations`` grows with it).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import PydanticSchemaGenerationError, ValidationError
from typing_extensions import TypeVar

from ..errors import ConfigurationError, OutputValidationError
from ..flow import Scope
from ..providers._base import LLMRequest, LLMResponse, Message, OutputSchema, Provider
from ..runs import trace
from ..tools._tool import Tool
from ._spec import emit

if TYPE_CHECKING:  # TypeAdapter and the final-answer tool load with an output_type (cold start)
    from pydantic import TypeAdapter

__all__ = ["REASK_MARK", "OutputSpec", "OutputT", "output_of", "output_spec", "structured_mode"]

OutputT = TypeVar("OutputT", default=Any)
"""The type of ``RunResult.output``: the agent's ``output_type`` (``Any`` without one). For a
union, name it: ``Agent[A | B](..., output_type=A | B)``."""

REASK_MARK = "output-retry"
"""``injected_by`` of the message that sends a failed answer's errors back to the model."""

_ROOT = "result"
"""The one property a non-object schema (a union, a list) is wrapped in: OpenAI and tool
arguments need an object at the root."""


class OutputSpec:
    """One agent's output type: its adapter, the schema sent, how it is sent, the retries.

    A plain class, not a dataclass: its module loads on every cold start."""

    __slots__ = ("adapter", "mode", "name", "retries", "schema", "strict", "type", "wrapped")

    type: Any
    adapter: TypeAdapter[Any]
    name: str
    schema: dict[str, Any]
    wrapped: bool
    strict: bool
    retries: int
    mode: str
    """The provider's native mode (``json_schema``, ``forced_tool``...) or ``tool``."""

    def __init__(self, *, type: Any, adapter: TypeAdapter[Any], name: str,
                 schema: dict[str, Any], wrapped: bool, strict: bool, retries: int,
                 mode: str) -> None:
        self.type = type
        self.adapter = adapter
        self.name = name
        self.schema = schema
        self.wrapped = wrapped
        self.strict = strict
        self.retries = retries
        self.mode = mode

    def __repr__(self) -> str:
        return f"OutputSpec(name={self.name!r}, mode={self.mode!r}, retries={self.retries})"

    # ------------------------------------------------------------------ values

    def request_schema(self) -> OutputSchema:
        return {"name": self.name, "schema": self.schema, "strict": self.strict}

    def check(self, text: str) -> tuple[Any, list[dict[str, str]]]:
        """``(the value in JSON form, [])`` when ``text`` validates, else ``(None, errors)``,
        each error ``{field, message}`` (``field`` "" for the answer as a whole)."""
        import json  # loaded on first use: a plain run never writes JSON

        raw = _unfenced(text)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            return None, [{"field": "", "message": f"the answer is not JSON ({exc})"}]
        if self.wrapped and isinstance(data, dict) and list(data) == [_ROOT]:
            data = data[_ROOT]
        try:
            value = self.adapter.validate_json(json.dumps(data))
        except ValidationError as exc:
            return None, [{"field": ".".join(str(part) for part in error["loc"]),
                           "message": error["msg"]}
                          for error in exc.errors(include_url=False)]
        return self.adapter.dump_python(value, mode="json"), []

    def load(self, value: Any) -> Any:
        """The typed value of a recorded ``output`` (its JSON form)."""
        import json  # loaded on first use: a plain run never writes JSON

        return self.adapter.validate_json(json.dumps(value))

    # ------------------------------------------------------------------ the loop's hooks

    def prepare(self, scope: Scope, request: LLMRequest) -> None:
        """Ask for the output in ``request`` (the provider's way, or the final-answer tool);
        the first call records the schema."""
        if trace.OUTPUT_SCHEMA not in scope:
            scope[trace.OUTPUT_SCHEMA] = {"type": self.name, "schema": self.schema,
                                          "mode": self.mode, "retries": self.retries}
        if self.mode != "tool":
            request.output_schema = self.request_schema()
            return
        from ..providers._output_tool import output_tool

        request.tools = [*request.tools, output_tool(self.request_schema())]
        request.tool_choice = "required"

    def answered(self, scope: Scope, response: LLMResponse) -> LLMResponse:
        """Take the final-answer tool's call as the answer; check an answer that asks for no
        tools and record it as an attempt (and the valid value as ``output``)."""
        if self.mode == "tool":
            from ..providers._output_tool import take_output_call

            response = take_output_call(response)
        if not response.tool_calls:
            self._attempt(scope, response.content, scope.runtime_stage_id)
        return response

    def route(self, scope: Scope, chosen: str, rationale: str) -> tuple[str, str]:
        """The route's choice once the answer is checked: ``final`` when it validates, else
        ``invalid-output`` (a re-ask, or the failure when the budget is spent)."""
        if chosen != "final":
            return chosen, rationale
        attempts = scope.get(trace.OUTPUT_ATTEMPTS) or []
        last = attempts[-1] if attempts else None
        if last is None or last["iteration"] != scope[trace.ITERATION]:
            # a turn cut short with tool calls pending: its text is the answer to check
            last = self._attempt(scope, scope.get(trace.LLM_CONTENT) or "", None)
        if last["valid"]:
            return chosen, f"{rationale}; the answer matches {self.name}"
        spent = _reasked(scope)
        errors = _described(last["errors"])
        if spent < self.retries:
            return "invalid-output", (f"the answer does not match {self.name} ({errors}); "
                                      f"re-asking ({spent + 1} of {self.retries})")
        return "invalid-output", (f"the answer does not match {self.name} ({errors}) and "
                                  f"the {self.retries} re-ask(s) are spent")

    def reask(self, scope: Scope) -> None:
        """Send the failed answer back with its errors; fail when the re-asks are spent."""
        attempts = list(scope[trace.OUTPUT_ATTEMPTS])
        last = attempts[-1]
        spent = _reasked(scope)
        if spent >= self.retries:
            fields = sorted({e["field"] for e in last["errors"] if e["field"]})
            named = (f"field {', '.join(map(repr, fields))}" if fields
                     else "the answer as a whole")
            raise OutputValidationError(
                f"the model's answer did not match output_type {self.name} after "
                f"{len(attempts)} answer(s) ({_described(last['errors'])}): fix {named} in the "
                "instructions, simplify the type, or raise output_retries",
                errors=[dict(e) for e in last["errors"]], attempts=len(attempts))
        attempts[-1] = {**last, "reasked": True}
        scope[trace.OUTPUT_ATTEMPTS] = attempts
        iteration = scope[trace.ITERATION]
        history: list[Message] = scope[trace.HISTORY]
        history.append({"role": "assistant", "content": last["text"]})
        history.append({"role": "user", "injected_by": REASK_MARK,
                        "content": self._reask_text(last["errors"])})
        scope[trace.HISTORY] = history
        scope[trace.ITERATION] = iteration + 1
        scope[trace.MAX_ITERATIONS] = scope[trace.MAX_ITERATIONS] + 1
        emit(scope, "agent.iteration_end", {"iteration": iteration, "tool_call_count": 0})

    # ------------------------------------------------------------------ helpers

    def _attempt(self, scope: Scope, text: str, call: str | None) -> dict[str, Any]:
        value, errors = self.check(text)
        attempts = list(scope.get(trace.OUTPUT_ATTEMPTS) or [])
        row: dict[str, Any] = {"attempt": len(attempts) + 1,
                               "iteration": scope[trace.ITERATION], "call": call,
                               "text": text, "valid": not errors, "errors": errors}
        attempts.append(row)
        scope[trace.OUTPUT_ATTEMPTS] = attempts
        if not errors:
            scope[trace.OUTPUT] = value
        elif trace.OUTPUT in scope:
            del scope[trace.OUTPUT]
        return row

    def _reask_text(self, errors: list[dict[str, str]]) -> str:
        lines = [f"Your answer does not match the required output ({self.name}):"]
        lines.extend(f"- {_one(error)}" for error in errors)
        from ..providers._output_tool import OUTPUT_TOOL

        how = (f"Call {OUTPUT_TOOL} again" if self.mode == "tool"
               else "Answer again with only the JSON")
        lines.append(f"{how}, with every field listed above corrected.")
        return "\n".join(lines)


def output_spec(output_type: Any, *, retries: int, provider: Provider,
                tools: Iterable[Tool] = ()) -> OutputSpec | None:
    """The spec for ``output_type`` (``None`` for none), refusing what cannot work."""
    if output_type is None:
        return None
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(
            f"output_retries={retries!r} must be a whole number of re-asks, 0 or more")
    if isinstance(output_type, str):
        raise ConfigurationError(
            f"output_type={output_type!r} is a string; pass the type itself (a Pydantic "
            "model, dataclass or TypedDict class, or a union of them)")
    from pydantic import TypeAdapter

    from ..providers._output_tool import OUTPUT_TOOL

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (PydanticSchemaGenerationError, TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"output_type={output_type!r} cannot be described as a JSON schema ({exc}); use "
            "a Pydantic model, a dataclass or a TypedDict (or a union of them)") from exc
    mode = structured_mode(provider) or "tool"
    if mode == "tool" and any(t.name == OUTPUT_TOOL for t in tools):
        raise ConfigurationError(
            f"tool {OUTPUT_TOOL!r} clashes with the final-answer tool an output_type needs "
            f"with provider {provider.name!r}; rename that tool")
    wire, wrapped = _object_root(_closed(_inlined(schema)))
    return OutputSpec(type=output_type, adapter=adapter, name=_name(output_type),
                      schema=wire, wrapped=wrapped, strict=_strict(wire), retries=retries,
                      mode=mode)


def output_of(output: OutputSpec | None, state: Any, *, paused: bool = False) -> Any:
    """``RunResult.output``: the recorded ``output`` as the typed value; ``None`` without an
    output type, for a paused run, or when an output rule withheld or rewrote the answer into
    something that does not validate (a rewrite that validates is the output)."""
    if output is None or paused or trace.OUTPUT not in state:
        return None
    attempts = state.get(trace.OUTPUT_ATTEMPTS) or []
    final = state.get(trace.FINAL_CONTENT)
    if attempts and final is not None and final != attempts[-1]["text"]:
        value, errors = output.check(str(final))
        return None if errors else output.load(value)
    return output.load(state[trace.OUTPUT])


def structured_mode(provider: Provider) -> str | None:
    """The native structured-output mode of ``provider``, looking through wrappers
    (``with_retry``, circuit breakers; a fallback only when both sides share one)."""
    inner = getattr(provider, "inner", None)
    if isinstance(inner, Provider):
        return structured_mode(inner)
    primary, fallback = getattr(provider, "primary", None), getattr(provider, "fallback", None)
    if isinstance(primary, Provider) and isinstance(fallback, Provider):
        mode = structured_mode(primary)
        return mode if mode == structured_mode(fallback) else None
    mode = getattr(provider, "structured_output", None)
    return mode if isinstance(mode, str) else None


def _reasked(scope: Scope) -> int:
    return sum(1 for a in scope.get(trace.OUTPUT_ATTEMPTS) or () if a.get("reasked"))


def _one(error: dict[str, str]) -> str:
    if not error["field"]:
        return error["message"]
    return f"field {error['field']!r}: {error['message']}"


def _described(errors: list[dict[str, str]], limit: int = 3) -> str:
    shown = "; ".join(_one(e) for e in errors[:limit])
    return shown + (f"; and {len(errors) - limit} more" if len(errors) > limit else "")


def _unfenced(text: str) -> str:
    """The JSON of an answer, without a Markdown code fence around the whole of it."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```", stripped, flags=re.DOTALL)
    return fenced.group(1) if fenced else stripped


def _name(output_type: Any) -> str:
    """A short name for the schema (``^[A-Za-z0-9_-]{1,64}$``, as OpenAI wants)."""
    if isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        raw = "_or_".join(_name(arg) for arg in typing.get_args(output_type))
    else:
        raw = str(getattr(output_type, "__name__", None) or output_type)
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:64] or "output"


def _object_root(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema with an object at its root: a union or a list is wrapped as ``result``."""
    if schema.get("type") == "object":
        return schema, False
    defs = schema.get("$defs")
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    wrapped: dict[str, Any] = {"type": "object", "properties": {_ROOT: inner},
                               "required": [_ROOT], "additionalProperties": False}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with ``$ref``s replaced by their definitions (grammar builders and some
    servers handle no references); a recursive type keeps its references."""
    defs = schema.get("$defs") or {}
    if not defs:
        return schema

    def expand(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                if name in seen:
                    raise RecursionError(name)
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**expand(defs[name], (*seen, name)), **expand(rest, seen)}
            return {k: expand(v, seen) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [expand(item, seen) for item in node]
        return node

    try:
        out: dict[str, Any] = expand(schema, ())
    except RecursionError:
        return schema
    return out


_NOT_STRICT = frozenset(("oneOf", "allOf", "not", "if", "discriminator", "patternProperties",
                         "prefixItems", "dependentRequired", "dependentSchemas"))
"""Keywords OpenAI's strict mode does not take (a discriminated union's ``oneOf``, a tuple's
``prefixItems``...): a schema with one is sent non-strict."""


def _closed(node: Any) -> Any:
    """Every object with declared properties closed (``additionalProperties: false``): the
    model is told to send no other fields (validation itself ignores extras unless the type
    forbids them), and OpenAI's strict mode requires it."""
    if isinstance(node, dict):
        out = {k: _closed(v) for k, v in node.items()}
        if "properties" in node and isinstance(node["properties"], dict):
            out["properties"] = {k: _closed(v) for k, v in node["properties"].items()}
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(node, list):
        return [_closed(item) for item in node]
    return node


def _strict(schema: Any) -> bool:
    """Whether OpenAI's strict mode takes the schema as it is: every object closed and every
    property required, no defaults. (A schema that does not fit is sent non-strict.)"""
    if isinstance(schema, dict):
        if "default" in schema or not _NOT_STRICT.isdisjoint(schema):
            return False
        if schema.get("type") == "object" or "properties" in schema:
            properties = schema.get("properties") or {}
            if set(schema.get("required") or ()) != set(properties):
                return False
            if schema.get("additionalProperties") is not False:
                return False
        return all(_strict(v) for k, v in schema.items() if k not in ("default", "const"))
    if isinstance(schema, list):
        return all(_strict(item) for item in schema)
    return True
