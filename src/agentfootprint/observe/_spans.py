"""One run as OpenTelemetry spans, following the GenAI semantic conventions.

The conventions followed are those of ``opentelemetry-semantic-conventions`` 0.66b2 (semantic
conventions 1.44.0, ``SCHEMA_URL``), the ``gen_ai.*`` attributes and span names:

* ``invoke_agent {name}`` — an agent's turn (the root of an agent's run; a member of a
  composition), with ``agentfootprint.run_id`` linking it to its recording and, for an agent
  with memory, ``gen_ai.conversation.id`` (its identity's conversation);
  ``invoke_workflow {name}`` — a composition (the root of its run, a nested composition);
* ``chat {model}`` — one LLM call: provider, request and response model, input, output and
  cached tokens, finish reasons, the call's cost when the model has a price;
* ``execute_tool {tool}`` — one tool call: its name, call id and type (an MCP tool names its
  server in ``agentfootprint.mcp.server``);
* ``retrieval {memory}`` and ``memory_write {memory}`` — a memory's (or a RAG index's) read
  and write subflows;
* span events — injections that landed (``agentfootprint.context.injected``), route
  decisions, evictions, permission verdicts, budget crossings, retries and fallbacks.

Each span also carries ``openinference.span.kind`` (AGENT, LLM, TOOL, RETRIEVER, CHAIN), the
attribute Arize Phoenix and other OpenInference backends classify spans by.

``SpanWriter`` is fed the run's commit records in order, each with the times of its step; the
live recorder feeds them as the run commits them, an export feeds a stored recording's. Both
read only what the run recorded, so the spans hold values exactly as masked by the run's
redaction policy, and both give one span tree. Message and tool content (``gen_ai.input.messages``,
``gen_ai.output.messages``, tool call arguments and results) is written only with
``capture_content=True``; without it a span says what happened and never what was said.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..flow._commitlog import CommitRecord
from ..runs import trace

__all__ = ["SCHEMA_URL", "SEMCONV_VERSION", "SpanWriter", "StepTimes", "laid_out"]

SEMCONV_VERSION: Final = "1.44.0"
"""The OpenTelemetry semantic conventions these spans follow (GenAI, development status)."""
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

_PREFIX: Final = "agentfootprint."
_OI_KIND: Final = "openinference.span.kind"
_FINISH: Final[Mapping[str, str]] = {"stop": "stop", "tool_use": "tool_call",
                                     "max_tokens": "length", "content_filter": "content_filter"}
"""Our normalised stop reasons as the conventions' finish reasons (others pass through)."""

_EVENTS: Final = frozenset((
    "context.injected", "context.evicted", "agent.route_decided", "agent.budget_exhausted",
    "permission.check", "permission.halt", "act.decision", "cost.limit_hit", "skill.activated",
    "skill.step_advanced", "skill.step_skipped", "memory.written", "error.retried",
    "error.recovered", "error.circuit_changed", "fallback.triggered",
    "validation.args_invalid", "pause.requested", "pause.check_in_settled"))
"""The emitted events a span records as span events (the rest are spans or their attributes)."""

_EVENT_FIELDS: Final = frozenset((
    "injection_id", "slot", "trigger", "iteration", "chosen", "strategy", "kept_count",
    "summarized", "target", "result", "capability", "actor", "policy_rule_id", "rule_id",
    "checker", "tool_call_id", "tool_name", "moment", "rule", "decision", "skill_id", "step",
    "completed", "store", "ids", "turn", "budget", "limit", "spent", "call", "action",
    "provider", "attempt", "max_attempts", "status", "backoff", "state", "primary", "fallback",
    "kind", "approved", "by", "pending_tool_calls", "remaining", "total"))
"""Payload fields an event keeps: ids, verdicts and counts, never anyone's words."""
_CONTENT_FIELDS: Final = frozenset(("rationale", "reason", "error", "message", "note",
                                    "question", "tell_model"))
"""Payload fields that can hold text: kept only with ``capture_content``."""


_AGENT_STAGES: Final = trace.declared_stage_ids()
"""The agent loop's stages: a run or subflow whose first step is one of them is an agent (a
composition starts with its own Start; a resumed agent with the stage it paused in)."""


@dataclass(frozen=True, slots=True)
class StepTimes:
    """When one step ran (epoch nanoseconds): its start, its commit, and each of its emits."""

    start: int
    end: int
    emits: Sequence[int] = ()

    def emit(self, index: int) -> int:
        return self.emits[index] if index < len(self.emits) else self.end


def laid_out(records: Sequence[CommitRecord], start: int) -> Iterator[tuple[CommitRecord,
                                                                             StepTimes]]:
    """A stored run's steps with times: each LLM call lasts its recorded latency, every other
    step and emit one microsecond, end to end from ``start``."""
    tick = 1_000
    at = start
    for record in records:
        emits = [at + tick * (i + 1) for i in range(len(record.emits))]
        took = tick * (len(record.emits) + 1)
        if _local(record.stage_id) == trace.CALL_LLM:
            latency = _appended(record, trace.LLM_LATENCY)
            if isinstance(latency, int | float) and not isinstance(latency, bool):
                took = max(took, int(latency * 1_000_000))
        yield record, StepTimes(at, at + took, emits)
        at += took


@dataclass(slots=True)
class _Scope:
    """An open span standing for the run or one mounted subflow (agent, composition, memory)."""

    span: Any
    name: str
    role: str
    """``agent``, ``workflow``, ``memory_read`` or ``memory_write``; ``""`` until its first step
    shows whether it is an agent (a stage of the agent loop) or a composition."""
    tools: dict[str, Any] = field(default_factory=dict)
    """Tool spans still open (a paused call), by tool call id."""
    starts: dict[str, int] = field(default_factory=dict)
    """When each tool call started, by tool call id."""


def _local(stage_id: str) -> str:
    return stage_id.rsplit("/", 1)[-1]


def _path(ns: str) -> str:
    return ns.rsplit("#", 1)[0] if ns else ""


def _parent_path(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _appended(record: CommitRecord, key: str) -> Any:
    """The item ``record`` added to the list under ``key`` (its last), or None."""
    for change in record.changes:
        if change.key == key and change.op in ("append", "set") and change.value:
            value = change.value
            return value[-1] if isinstance(value, list | tuple) else None
    return None


def _changed(record: CommitRecord, key: str) -> Any:
    return next((c.value for c in record.changes if c.key == key and c.op == "set"), None)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def _text_message(role: str, text: object, **extra: object) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": str(text)}], **extra}


class SpanWriter:
    """Writes one run's spans to an OpenTelemetry tracer, step by step.

    ``begin`` opens the root span; ``step(record, times)`` turns each committed step into spans
    and events; ``end`` closes everything still open. The writer keeps no reference to the
    run: what it writes comes from the records it is given.
    """

    def __init__(self, tracer: Any, *, run_id: str, name: str, capture_content: bool) -> None:
        self._tracer = tracer
        self.run_id = run_id
        self.name = name
        self.capture = capture_content
        self._scopes: dict[str, _Scope] = {}
        self.root: Any = None

    # -- the run ------------------------------------------------------------------------------

    def begin(self, start: int, *, parent: Any = None) -> None:
        """Open the root span (under ``parent``, a tool span, for an agent run as a tool)."""
        from opentelemetry.trace import set_span_in_context

        self.root = self._tracer.start_span(
            f"invoke_workflow {self.name}", start_time=start,
            context=set_span_in_context(parent) if parent is not None else None,
            attributes={_PREFIX + "run_id": self.run_id})
        self._scopes[""] = _Scope(self.root, self.name, "")

    def end(self, at: int, *, status: str = "done", error: str | None = None) -> None:
        """Close every open span (innermost first) and the root; ``status`` is the run's."""
        from opentelemetry.trace import Status, StatusCode

        for path in sorted(self._scopes, key=len, reverse=True):
            scope = self._scopes.pop(path)
            for span in scope.tools.values():
                span.set_attribute(_PREFIX + "tool.status", status)
                span.end(end_time=at)
            if path:
                scope.span.end(end_time=at)
        if self.root is None:
            return
        self.root.set_attribute(_PREFIX + "status", status)
        if error is not None:
            self.root.set_status(Status(StatusCode.ERROR, self._said(error)))
        self.root.end(end_time=at)

    # -- one step -----------------------------------------------------------------------------

    def step(self, record: CommitRecord, times: StepTimes) -> None:
        if record.kind == "subflow-enter":
            self._enter(record, times)
            return
        if record.kind == "subflow-exit":
            self._exit(record, times)
            return
        scope = self._scopes.get(_path(record.ns)) or self._scopes[""]
        local = _local(record.stage_id)
        if not scope.role:  # its first step says what it is: one of the agent loop's stages
            self._decide(scope, record, agent=local in _AGENT_STAGES)
        if local == trace.CALL_LLM:
            self._chat(scope, record, times)
        elif record.emits:
            self._emits(scope, record, times)
        if local == trace.FINALIZE and self.capture:
            answer = _changed(record, trace.FINAL_CONTENT)
            if isinstance(answer, str):
                scope.span.set_attribute("gen_ai.output.messages", _json(
                    [_text_message("assistant", answer, finish_reason="stop")]))
        if record.error is not None and local != trace.CALL_LLM:
            self._failed(scope.span, record.error)

    def _decide(self, scope: _Scope, record: CommitRecord, *, agent: bool) -> None:
        span = scope.span
        if not agent:
            scope.role = "workflow"
            span.set_attributes({"gen_ai.operation.name": "invoke_workflow",
                                 "gen_ai.workflow.name": scope.name, _OI_KIND: "CHAIN"})
            return
        scope.role = "agent"
        span.update_name(f"invoke_agent {scope.name}")
        span.set_attributes({"gen_ai.operation.name": "invoke_agent",
                             "gen_ai.agent.name": scope.name, _OI_KIND: "AGENT"})
        turn = _int(_changed(record, trace.TURN))
        if turn is not None:
            span.set_attribute(_PREFIX + "turn", turn)
        identity = _changed(record, trace.IDENTITY)
        conversation = identity.get("conversation_id") if isinstance(identity, Mapping) else None
        if isinstance(conversation, str) and conversation:
            span.set_attribute("gen_ai.conversation.id", conversation)
        message = _changed(record, trace.USER_MESSAGE)
        if self.capture and isinstance(message, str):
            span.set_attribute("gen_ai.input.messages", _json([_text_message("user", message)]))

    def _enter(self, record: CommitRecord, times: StepTimes) -> None:
        path = _path(record.ns)
        parent = self._scopes.get(_parent_path(path)) or self._scopes[""]
        local = _local(record.stage_id)
        memory = ""
        attributes: dict[str, Any]
        if trace.MEMORY_READ.matches(local):
            memory = local[len(trace.MEMORY_READ.prefix):]
            role, name = "memory_read", f"retrieval {memory}"
            attributes = {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": memory,
                          _OI_KIND: "RETRIEVER", _PREFIX + "memory.id": memory}
        elif trace.MEMORY_WRITE.matches(local):
            memory = local[len(trace.MEMORY_WRITE.prefix):]
            role, name = "memory_write", f"memory_write {memory}"
            attributes = {_OI_KIND: "CHAIN", _PREFIX + "memory.id": memory}
        else:  # a composition's member: an agent or a composition (its first step says)
            role, name, attributes = "", f"invoke_workflow {record.stage}", {}
        span = self._start(name, parent.span, times.start, attributes)
        self._scopes[path] = _Scope(span, memory or record.stage, role)

    def _exit(self, record: CommitRecord, times: StepTimes) -> None:
        scope = self._scopes.pop(_path(record.runtime_stage_id), None)
        if scope is None:
            return
        if scope.role == "memory_read":
            recalled = _changed(record, trace.MEMORY_RECALL.of(scope.name))
            ids = recalled.get("ids") if isinstance(recalled, Mapping) else None
            if isinstance(ids, list):
                scope.span.set_attribute(_PREFIX + "memory.recalled", len(ids))
        for span in scope.tools.values():
            span.end(end_time=times.end)
        scope.span.end(end_time=times.end)

    def _chat(self, scope: _Scope, record: CommitRecord, times: StepTimes) -> None:
        started = next((p for n, p in record.emits if n == _PREFIX + "stream.llm_start"
                        and isinstance(p, Mapping)), {})
        ended = next((p for n, p in record.emits if n == _PREFIX + "stream.llm_end"
                      and isinstance(p, Mapping)), {})
        row = _appended(record, trace.LLM_USAGE)
        row = row if isinstance(row, Mapping) else {}
        model = str(started.get("model") or row.get("model") or "unknown")
        provider = str(started.get("provider") or row.get("provider") or "unknown")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
            "gen_ai.system": provider, "gen_ai.request.model": model, _OI_KIND: "LLM"}
        if row.get("model"):
            attributes["gen_ai.response.model"] = str(row["model"])
        reported = ended.get("usage")
        usage: Mapping[str, Any] = reported if isinstance(reported, Mapping) else {}
        for name, value in (("gen_ai.usage.input_tokens", row.get("input_tokens",
                                                                  usage.get("input"))),
                            ("gen_ai.usage.output_tokens", row.get("output_tokens",
                                                                   usage.get("output"))),
                            ("gen_ai.usage.cache_read.input_tokens",
                             row.get("cache_read_tokens", usage.get("cache_read"))),
                            ("gen_ai.usage.cache_creation.input_tokens",
                             row.get("cache_write_tokens", usage.get("cache_write")))):
            if _int(value) is not None:
                attributes[name] = value
        cost = row.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            attributes[_PREFIX + "cost_usd"] = float(cost)
        stop = _changed(record, trace.STOP_REASON) or ended.get("stop_reason")
        if isinstance(stop, str):
            attributes["gen_ai.response.finish_reasons"] = [_FINISH.get(stop, stop)]
        iteration = _int(started.get("iteration"))
        if iteration is not None:
            attributes[_PREFIX + "iteration"] = iteration
        latency = _appended(record, trace.LLM_LATENCY)
        start = times.start
        if isinstance(latency, int | float) and times.end - start < latency * 1e6:
            start = times.end - int(latency * 1e6)  # the call's own time, within the step
        span = self._start(f"chat {model}", scope.span, start, attributes, client=True)
        if self.capture:
            calls = _changed(record, trace.LLM_TOOL_CALLS)
            parts: list[dict[str, Any]] = []
            text = _changed(record, trace.LLM_CONTENT)
            if isinstance(text, str) and text:
                parts.append({"type": "text", "content": text})
            for call in calls if isinstance(calls, list | tuple) else ():
                if isinstance(call, Mapping):
                    parts.append({"type": "tool_call", "id": call.get("id"),
                                  "name": call.get("name"), "arguments": call.get("args")})
            finish = attributes.get("gen_ai.response.finish_reasons", ["stop"])[0]
            span.set_attribute("gen_ai.output.messages", _json(
                [{"role": "assistant", "parts": parts, "finish_reason": finish}]))
        if record.error is not None:
            self._failed(span, record.error)
        self._emits(scope, record, times, skip_spans=True)
        span.end(end_time=times.end)

    def _emits(self, scope: _Scope, record: CommitRecord, times: StepTimes, *,
               skip_spans: bool = False) -> None:
        """Tool spans from ``stream.tool_start``/``tool_end``; events from the rest."""
        ended: list[tuple[str, Any, int]] = []
        for index, (name, payload) in enumerate(record.emits):
            short = name[len(_PREFIX):] if name.startswith(_PREFIX) else name
            at = times.emit(index)
            data = payload if isinstance(payload, Mapping) else {}
            if short == "stream.tool_start" and not skip_spans:
                self._tool_started(scope, data, at)
            elif short == "stream.tool_end" and not skip_spans:
                call_id = str(data.get("tool_call_id"))
                span = scope.tools.pop(call_id, None)
                if span is not None:
                    self._tool_ended(span, data)
                    ended.append((call_id, span, at))
            elif short in _EVENTS:
                target = scope.tools.get(str(data.get("tool_call_id"))) or scope.span
                target.add_event(_PREFIX + short, self._event_attributes(data), timestamp=at)
        rows = _changed(record, trace.TOOL_RESULTS)
        origins = {str(r.get("tool_call_id")): r for r in rows if isinstance(r, Mapping)
                   } if isinstance(rows, list | tuple) else {}
        links = _changed(record, trace.SUB_RUNS)
        kept = _changed(record, trace.SUB_RECORDINGS)
        for call_id, span, at in ended:
            origin = origins.get(call_id, {})
            if origin.get("mcp_server"):
                span.set_attributes({"gen_ai.tool.type": "extension",
                                     _PREFIX + "mcp.server": str(origin["mcp_server"]),
                                     _PREFIX + "mcp.tool": str(origin.get("mcp_tool", ""))})
            link = links.get(call_id) if isinstance(links, Mapping) else None
            if isinstance(link, Mapping) and link.get("run_id"):
                inner = str(link["run_id"])
                span.set_attribute(_PREFIX + "sub_run_id", inner)
                recording = kept.get(inner) if isinstance(kept, Mapping) else None
                if isinstance(recording, Mapping):
                    self._nest(span, recording, scope.starts.pop(call_id, at))
            span.end(end_time=at)

    def _tool_started(self, scope: _Scope, data: Mapping[str, Any], at: int) -> None:
        name = str(data.get("tool_name", "unknown"))
        call_id = str(data.get("tool_call_id", ""))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function", _OI_KIND: "TOOL"}
        iteration = _int(data.get("iteration"))
        if iteration is not None:
            attributes[_PREFIX + "iteration"] = iteration
        if self.capture and "args" in data:
            attributes["gen_ai.tool.call.arguments"] = _json(data["args"])
        scope.tools[call_id] = self._start(f"execute_tool {name}", scope.span, at, attributes)
        scope.starts[call_id] = at

    def _tool_ended(self, span: Any, data: Mapping[str, Any]) -> None:
        from opentelemetry.trace import Status, StatusCode

        status = data.get("status")
        if isinstance(status, str):
            span.set_attribute(_PREFIX + "tool.status", status)
        if self.capture and "result" in data:
            span.set_attribute("gen_ai.tool.call.result", str(data["result"]))
        if data.get("error"):
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))

    def _nest(self, span: Any, recording: Mapping[str, Any], start: int) -> None:
        """An agent run as a tool: its recording's spans under the tool call's span."""
        from ..runs._recording import Recording

        try:
            inner = Recording.model_validate(dict(recording))
            records = inner.commit_log().records
        except Exception:  # a recording this release cannot read: the link attribute stays
            return
        writer = SpanWriter(self._tracer, run_id=inner.run_id, name=inner.name,
                            capture_content=self.capture)
        writer.begin(start, parent=span)
        end = start
        for step, times in laid_out(records, start):
            writer.step(step, times)
            end = times.end
        writer.end(end, status=inner.status)

    # -- helpers ------------------------------------------------------------------------------

    def _start(self, name: str, parent: Any, start: int, attributes: Mapping[str, Any], *,
               client: bool = False) -> Any:
        from opentelemetry.trace import SpanKind, set_span_in_context

        return self._tracer.start_span(
            name, context=set_span_in_context(parent), start_time=start,
            kind=SpanKind.CLIENT if client else SpanKind.INTERNAL, attributes=attributes)

    def _event_attributes(self, data: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key not in _EVENT_FIELDS and not (self.capture and key in _CONTENT_FIELDS):
                continue
            if isinstance(value, str | bool | int | float):
                out[key] = value
            elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                out[key] = list(value)
        return out

    def _said(self, error: str) -> str:
        """An error as a span may show it: its type, and its text only with content capture."""
        return error if self.capture else error.split(":", 1)[0]

    def _failed(self, span: Any, error: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error.split(":", 1)[0])
        span.set_status(Status(StatusCode.ERROR, self._said(error)))
