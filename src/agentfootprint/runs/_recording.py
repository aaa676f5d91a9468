"""The recording: a run as portable JSON — chart, delta commit log, events, ids, requests.

A ``Recording`` is what leaves the process: it is built from a finished run (agent or plain
flowchart), stored by a run store, and loaded anywhere else to be narrated, backtracked or
re-examined. Everything an explanation needs is rebuilt from it (the exact request each LLM
call sent included); values redacted at the source stay redacted.

Its ``format`` names its version. ``from_json`` reads every version this release knows,
upgrading older ones, and refuses a newer or unknown one with a clear error instead of guessing;
the commit log inside is checked record by record (fields present, of the right types, in
order), so a damaged recording is one ``RunError`` naming the field, never a ``KeyError`` deep
inside an explanation.

``to_json`` always writes strict JSON, whatever the run held: ``NaN`` and the infinities are
written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (they are not JSON, and
every other reader would refuse the file), and a lone surrogate in text (a Python string that
is not valid Unicode) is written as its ``\\uXXXX`` escape, so a run is never lost at saving
time after the model already answered.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any, Final, Literal, Protocol, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic_core import PydanticSerializationError

from ..errors import RunError
from ..flow._commitlog import CommitLog
from ..flow._redact import redacted_values, scrub
from ..flow._run import FlowRun
from ..flow._values import copy_value
from ..providers._base import wire_messages
from . import trace
from ._window import windowed_messages

__all__ = ["RECORDING_FORMAT", "RECORDING_FORMATS", "AgentRun", "Recording"]

RECORDING_FORMAT: Final = "agentfootprint.recording.v1"
"""The format this release writes."""
RECORDING_FORMATS: Final = (RECORDING_FORMAT,)
"""Every format this release reads (oldest first); each older one is upgraded on load."""


@runtime_checkable
class AgentRun(Protocol):
    """What an agent hands back (``RunResult``): its answer and the flow run behind it."""

    @property
    def content(self) -> str: ...

    @property
    def recording(self) -> FlowRun: ...


class Recording(BaseModel):
    """One run, complete and self-contained."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", defer_build=True)

    format: Literal["agentfootprint.recording.v1"] = RECORDING_FORMAT
    run_id: str
    kind: Literal["agent", "flow"]
    name: str
    status: str
    created_at: float
    chart: dict[str, Any]
    log: dict[str, Any]
    output: Any = None
    meta: dict[str, Any] = {}
    _log: CommitLog | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, result: AgentRun | FlowRun, *, meta: dict[str, Any] | None = None) -> Recording:
        """The recording of an agent's ``RunResult`` or a flowchart's ``FlowRun``."""
        if isinstance(result, FlowRun):
            run, is_agent, output = result, False, _jsonable(result.output)
        elif isinstance(result, AgentRun) and isinstance(result.recording, FlowRun):
            run, is_agent, output = result.recording, True, result.content
        else:
            raise TypeError(f"{result!r} is not a run; pass a RunResult or a FlowRun")
        if run.redaction is not None and run.redaction.has_key_rules:
            secrets = redacted_values(run.redaction, run.state)
            if secrets:  # the output repeats state (an answer); keep the record redacted
                output = scrub(output, secrets)
        if run.secrets is not None:  # and no string repeats what the run masked elsewhere
            output = run.secrets.scrub(output)
        return cls(run_id=run.run_id, kind="agent" if is_agent else "flow",
                   name=run.chart.description or run.chart.name, status=run.status,
                   created_at=time.time(), chart=run.chart.spec(),
                   log=json.loads(json.dumps(run.log.to_json())), output=output,
                   meta=dict(meta or {}))

    def commit_log(self) -> CommitLog:
        """The commit log, rebuilt once from the JSON."""
        if self._log is None:
            self._log = CommitLog.from_json(self.log)
        return self._log

    def requests(self) -> list[dict[str, Any]]:
        """What each LLM call sent: system prompt, wire messages and tools, rebuilt from the log."""
        log = self.commit_log()
        out = []
        for record in log.records:
            if record.stage_id != trace.CALL_LLM:
                continue
            before = record.idx - 1
            wrapped = bool(log.value_at(trace.WRAP_UP_ASKED, before, default=False))
            out.append({
                "runtime_stage_id": record.runtime_stage_id,
                "iteration": log.value_at(trace.ITERATION, before),
                "system": log.value_at(trace.SYSTEM_PROMPT, before, default="") or None,
                "messages": wire_messages(windowed_messages(
                    log.value_at(trace.HISTORY, before, default=[]),
                    log.value_at(trace.WINDOW, before, default=None))),
                "tools": [] if wrapped else log.value_at(trace.TOOL_SCHEMAS, before, default=[]),
            })
        return out

    def to_json(self) -> str:
        """Strict JSON (see the module docstring): non-finite numbers and lone surrogates
        are written in forms every JSON reader accepts."""
        try:
            return self.model_dump_json()
        except PydanticSerializationError:  # a lone surrogate: the codec refuses it
            text = json.dumps(_finite(self.model_dump()), ensure_ascii=False, allow_nan=False,
                              separators=(",", ":"))
            return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

    @classmethod
    def from_json(cls, text: str | bytes) -> Recording:
        """Read a recording of any known format; a newer or unknown one is refused by name."""
        try:
            data = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
        except json.JSONDecodeError as exc:
            raise RunError(f"this is not a recording: it is not JSON ({exc})") from exc
        except UnicodeDecodeError as exc:  # a recording is always written as UTF-8
            raise RunError(f"this is not a recording: it is not UTF-8 text (byte "
                           f"{exc.object[exc.start]:#04x} at position {exc.start}); pass the "
                           "file's bytes exactly as they were written") from exc
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: object) -> Recording:
        """A recording from its JSON already parsed (what ``json.loads`` gives); the checks
        of :meth:`from_json`."""
        if not isinstance(data, dict):
            raise RunError("this is not a recording: its JSON is not an object")
        found = data.get("format")
        if found not in RECORDING_FORMATS:
            raise RunError(
                f"recording format {found!r} is not one this version reads "
                f"({', '.join(RECORDING_FORMATS)}); it was written by another agentfootprint "
                "release — read it with that release, or upgrade this one")
        try:
            recording = cls.model_validate(data)
            _LogJSON.model_validate(recording.log)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            if exc.title == _LogJSON.__name__:
                where = f"log.{where}"
            raise RunError(f"recording {data.get('run_id')!r} is malformed ({exc.error_count()} "
                           f"problem(s); first: {first['msg']} at {where}); it was damaged or "
                           "edited — restore the original") from exc
        for position, record in enumerate(recording.log["records"]):
            if record["idx"] != position:
                raise RunError(
                    f"recording {recording.run_id!r} is malformed: log record {position} says "
                    f"idx {record['idx']}, so records are missing or out of order; restore "
                    "the original")
        return recording


class _ChangeJSON(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    key: StrictStr
    op: Literal["set", "append", "delete"]
    value: Any = None


class _RecordJSON(BaseModel):
    """One commit record as ``CommitRecord.to_json`` writes it (required fields first)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    idx: StrictInt
    runtime_stage_id: StrictStr
    stage_id: StrictStr
    stage: StrictStr
    kind: StrictStr = "stage"
    ns: StrictStr = ""
    read_ns: StrictStr | None = None
    reads: list[StrictStr] = []
    changes: list[_ChangeJSON] = []
    parent: StrictStr | None = None
    control: StrictStr | None = None
    loop_pass: StrictInt = 0
    decision: dict[str, Any] | None = None
    emits: list[tuple[StrictStr, Any]] = []
    error: StrictStr | None = None
    break_reason: StrictStr | None = None
    paused: StrictBool = False


class _LogJSON(BaseModel):
    """The commit log's JSON: checked on load so a damaged one is refused by field."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    initial: dict[str, Any] = {}
    records: list[_RecordJSON]


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float spelt as pydantic's ``strings`` mode spells it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return copy_value(value)
