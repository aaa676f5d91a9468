"""The per-turn script ledger: one row per call of a code-running tool, one writer, bounded.

A call of a declared code-running tool leaves a ``script`` row on the run's findings ledger
(state key ``findings_ledger``): which dispatch of which turn it was, the program's size and,
while its turn lasts, the program itself — so an answer can be matched to the code behind it.

* :func:`script_row_for` builds a row from one call, :func:`record_script_row` is the ONLY
  writer (and the one place a call gets its 1-based dispatch identity),
  :func:`script_rows_of_turn` is the one reader (the last row per dispatch wins).
* The unit is UTF-8 bytes of the program, measured when the row is filed, never characters.
  A program over :data:`MAX_SCRIPT_BYTES` keeps a row with ``bytes``, ``lines`` and the
  outcome but no ``text``. :data:`MAX_SCRIPT_ROWS` dispatches per turn keep a row; a further
  call files none and is counted in ``scripts_dropped`` (absent until a call is dropped).
* Text lives for its own turn: the restore at the start of a turn drops it from every earlier
  turn's row (:func:`without_earlier_script_text`), so the ledger never holds more than
  16 × 32,768 bytes = 512 KiB of program text, however long the conversation.
* A call that pauses before it settles (a check-in, an ``ask`` rule, a tool asking a person)
  files a ``submitted`` row without text (:func:`file_unsettled_script`); the settled row filed
  when it resumes joins that dispatch (:func:`paused_dispatch`) and carries the text, so a
  program is never held twice. A call declined by a person or denied by a rule never runs and
  files a ``denied`` row with the program as proposed.
* The program is captured as the model PROPOSED it, before any ``before_tool`` rule: a rule that
  rewrites it files the row ``rewritten=True``.
* :func:`answer_script_match` reads the turn back: which fenced code blocks of the answer are
  the programs that really ran (and which are not).

Rows are stored as JSON dicts (they cross checkpoints); a row read back from a checkpoint is
checked by :func:`check_script_ledger`, which names the problem and never repairs it. The
row never leaves this module's state key: it emits nothing — the runner's own facts ride the
``tools.code_run`` event and never carry the code.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import CheckpointError, ConfigurationError
from ._script_keys import DROPPED_KEY, LEDGER_KEY

__all__ = [
    "ABSENT",
    "DROPPED_KEY",
    "LEDGER_KEY",
    "MAX_SCRIPT_BYTES",
    "MAX_SCRIPT_ROWS",
    "CallSettlement",
    "RowOutcome",
    "RunnerOutcome",
    "ScriptCall",
    "ScriptRow",
    "ScriptRowDraft",
    "ScriptScope",
    "ToolScript",
    "TurnScripts",
    "answer_script_match",
    "check_script_ledger",
    "file_unsettled_script",
    "lines_of",
    "paused_dispatch",
    "proposed_program",
    "program_in",
    "record_script_row",
    "script_of",
    "script_row_for",
    "script_row_is_well_formed",
    "script_row_problem",
    "script_rows_of_turn",
    "utf8_length",
    "without_earlier_script_text",
]

MAX_SCRIPT_BYTES: Final = 32768
"""A program longer than this (UTF-8 bytes) keeps a row with no text."""
MAX_SCRIPT_ROWS: Final = 16
"""Calls (dispatches) per turn that keep a row; the rest are counted in ``scripts_dropped``."""

CallSettlement = Literal["ran", "failed", "refused", "invalid", "denied", "error"]
"""How a call ended: the program ran and exited 0 (``ran``) or not (``failed``); the tool
refused it unrun (``refused``); its arguments were rejected (``invalid``); a rule or a person
said no (``denied``); the tool itself raised (``error``)."""
RowOutcome = Literal["submitted", "ran", "failed", "refused", "invalid", "denied", "error"]
"""A row's outcome: ``submitted`` for a call paused before it settled, else its settlement."""

_SHA256 = r"^[0-9a-f]{64}$"
_Count = Annotated[int, Field(ge=0)]
_Positive = Annotated[int, Field(ge=1)]


def utf8_length(program: str) -> int:
    """Bytes of ``program`` in UTF-8; a lone surrogate counts as the 3 bytes it would take."""
    return len(program.encode("utf-8", "surrogatepass"))


def lines_of(program: str) -> int:
    """Lines of a program: LF-separated, ``0`` for an empty one."""
    return 0 if program == "" else program.count("\n") + 1


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class RunnerOutcome(_Strict):
    """The runner's facts about one call — sizes, a hash, exit status, durations; never code."""

    language: str
    bytes: _Count
    """UTF-8 bytes of the program."""
    sha256: Annotated[str, Field(pattern=_SHA256)]
    """SHA-256 of the program's UTF-8 bytes: a program can be recognised, not read."""
    ok: bool
    """It ran and exited 0 within its limits."""
    exit_code: int | None = None
    """The process's exit status (negative: killed by that signal); ``None`` when it never ran."""
    timed_out: bool = False
    out_of_memory: bool = False
    refused: Literal["too-large"] | None = None
    """Why nothing ran, when nothing did."""
    duration_ms: Annotated[float, Field(ge=0)] = 0.0
    stdout_bytes: _Count = 0
    stderr_bytes: _Count = 0
    truncated: bool = False
    """Some output was cut to fit the tool's output cap."""


class _ScriptFields(_Strict):
    kind: Literal["script"] = "script"
    turn: _Positive
    iteration: _Positive
    tool: Annotated[str, Field(min_length=1)]
    """The name the model called."""
    tool_call_id: str
    """The provider's id for the call: a label, not an identity (see ``dispatch``)."""
    language: str
    bytes: _Count
    """UTF-8 bytes of the program, measured when the row was filed."""
    lines: _Count
    outcome: RowOutcome
    rewritten: bool = False
    """The program handed to the tool differs from the one the model proposed."""
    withheld: bool = False
    """The tool's own ceiling replaced the delivered result."""
    facts: RunnerOutcome | None = None
    text: str | None = None
    """The program, while its turn lasts and when it fits :data:`MAX_SCRIPT_BYTES`."""

    @model_validator(mode="after")
    def _consistent(self) -> _ScriptFields:
        if self.text is None:
            return self
        if self.outcome == "submitted":
            raise ValueError("a submitted (paused) row carries text; only the settled row may")
        size = utf8_length(self.text)
        if size > MAX_SCRIPT_BYTES:
            raise ValueError(f"its text is {size} bytes, over MAX_SCRIPT_BYTES={MAX_SCRIPT_BYTES}")
        if size != self.bytes:
            raise ValueError(f"bytes={self.bytes} but its text is {size} UTF-8 bytes")
        if lines_of(self.text) != self.lines:
            raise ValueError(f"lines={self.lines} but its text has {lines_of(self.text)} lines")
        return self


class ScriptRowDraft(_ScriptFields):
    """A row before the writer gives it its dispatch identity."""


class ScriptRow(_ScriptFields):
    """One filed row: a draft plus the 1-based dispatch it belongs to within its turn."""

    dispatch: _Positive

    def to_json(self) -> dict[str, Any]:
        """The stored form: a plain JSON dict, absent fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolScript:
    """Declares a tool code-running: which argument carries the program, in which language."""

    argument: str = "code"
    language: str = "python"


def script_of(tool: object) -> ToolScript | None:
    """The script declaration of a tool, or ``None`` for a tool that does not run code."""
    script = getattr(tool, "script", None)
    return script if isinstance(script, ToolScript) else None


class Absent(enum.Enum):
    """The type of :data:`ABSENT`."""

    ABSENT = "absent"


ABSENT: Final = Absent.ABSENT
"""``ScriptCall.submitted`` when the call never reached the tool (``None`` is a value)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptCall:
    """One call of a declared code-running tool, as the dispatch loop knows it."""

    script: ToolScript
    tool: str
    """The name the model called."""
    tool_call_id: str
    iteration: int
    turn: int
    proposed: object
    """The declared argument's value as the model proposed it, read once as the call arrived
    (:func:`program_in`); a string is immutable, so nothing later can change what was captured."""
    submitted: object = ABSENT
    """The value handed to the tool, read just before it ran; ``ABSENT``: the proposal stands."""
    settlement: CallSettlement | None = None
    """How the call ended; required unless ``paused``."""
    facts: RunnerOutcome | None = None
    withheld: bool = False
    paused: bool = False
    """A pause: the row is filed without its text (the settled row carries it)."""


def program_in(script: ToolScript, args: Mapping[str, object] | None) -> object:
    """The declared argument's value in ``args`` — keep the value, never the arguments object."""
    return args.get(script.argument) if isinstance(args, Mapping) else None


def script_row_for(call: ScriptCall) -> ScriptRowDraft | None:
    """The row for one call, or ``None`` when the call carried no program (not a string)."""
    program = call.proposed if call.submitted is ABSENT else call.submitted
    if not isinstance(program, str):
        return None
    if not call.paused and call.settlement is None:
        raise ConfigurationError(
            f"the call {call.tool_call_id!r} of {call.tool!r} is neither paused nor settled; "
            "pass settlement=... (or paused=True) to ScriptCall")
    size = utf8_length(program)
    keep = not call.paused and size <= MAX_SCRIPT_BYTES
    outcome: RowOutcome = "submitted" if call.paused or call.settlement is None \
        else call.settlement
    return ScriptRowDraft(
        turn=call.turn, iteration=call.iteration, tool=call.tool, tool_call_id=call.tool_call_id,
        language=call.script.language, bytes=size, lines=lines_of(program), outcome=outcome,
        rewritten=call.submitted is not ABSENT and call.submitted != call.proposed,
        withheld=call.withheld, facts=call.facts, text=program if keep else None)


class ScriptScope(Protocol):
    """The state surface the writer needs; a flow ``Scope`` and a plain dict both fit."""

    def get(self, key: str, default: object = None, /) -> Any: ...

    def __setitem__(self, key: str, value: Any, /) -> None: ...


def record_script_row(scope: ScriptScope, draft: ScriptRowDraft, *, paused: bool = False,
                      dispatch: int | None = None) -> int | None:
    """THE ONE WRITER of a ``script`` row; returns its dispatch, ``None`` when it was dropped.

    A new call gets the next 1-based dispatch of its turn (a call is a dispatch, never a
    provider id). ``dispatch=`` names a paused dispatch that is settling; its row joins it and
    is never dropped. A new call finding :data:`MAX_SCRIPT_ROWS` dispatches in its turn files
    nothing and is counted in ``scripts_dropped`` — unless it is a pause (``paused``, or a
    ``submitted`` draft), counted once when it settles. A paused row is filed without text.
    Synchronous: one read of the ledger, one write, nothing awaited between.
    """
    paused = paused or draft.outcome == "submitted"
    ledger = list(scope.get(LEDGER_KEY) or ())
    last: dict[int, ScriptRow] = {}
    for _, row in _script_rows(ledger, draft.turn):
        last[row.dispatch] = row
    if dispatch is not None:
        joined = last.get(dispatch)
        if joined is None:
            raise ConfigurationError(
                f"dispatch={dispatch!r} has no row in turn {draft.turn}; pass the number "
                "record_script_row returned when the call paused, or None for a new call")
        if joined.outcome != "submitted":
            raise ConfigurationError(
                f"dispatch {dispatch} of turn {draft.turn} already settled "
                f"({joined.outcome!r}); a call settles once — file a new call without dispatch=")
        number = dispatch
    elif len(last) >= MAX_SCRIPT_ROWS:
        if not paused:
            scope[DROPPED_KEY] = int(scope.get(DROPPED_KEY) or 0) + 1
        return None
    else:
        number = max(last, default=0) + 1
    fields = draft.model_dump(exclude={"facts"})
    if paused:
        fields.update(outcome="submitted", text=None)
    ledger.append(ScriptRow(dispatch=number, facts=draft.facts, **fields).to_json())
    scope[LEDGER_KEY] = ledger
    return number


def file_unsettled_script(scope: ScriptScope, tool: object, call: Mapping[str, Any], *,
                          turn: int, iteration: int, paused: bool) -> int | None:
    """File the row of a code-running call that did not run now: a pause (``paused``: a
    ``submitted`` row, no text) or a refusal (a ``denied`` row with the proposed program,
    joining the dispatch its pause opened, if it paused first). ``None``: not a code-running
    tool, no program, or dropped from a full turn."""
    script = script_of(tool)
    if script is None:
        return None
    draft = script_row_for(ScriptCall(
        script=script, tool=str(call["name"]), tool_call_id=str(call["id"]),
        iteration=iteration, turn=turn, proposed=program_in(script, call.get("args")),
        settlement=None if paused else "denied", paused=paused))
    if draft is None:
        return None
    dispatch = None if paused else paused_dispatch(scope, turn, str(call["id"]))
    return record_script_row(scope, draft, paused=paused, dispatch=dispatch)


def proposed_program(tool: object, call: Mapping[str, Any]) -> object:
    """The program ``call`` proposes to a code-running ``tool``, read as it arrived (before any
    rule); :data:`ABSENT` for a tool that runs no code."""
    script = script_of(tool)
    return ABSENT if script is None else program_in(script, call.get("args"))


def paused_dispatch(scope: ScriptScope, turn: int, tool_call_id: str) -> int | None:
    """The dispatch a paused call of this turn opened and has not settled, for its settling
    row to join; ``None`` when the call never paused."""
    found = None
    for row in script_rows_of_turn(scope.get(LEDGER_KEY), turn).current:
        if row.tool_call_id == tool_call_id:
            found = row.dispatch if row.outcome == "submitted" else None
    return found


_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)


def _normalized(program: str) -> str:
    return "\n".join(line.rstrip() for line in program.strip("\n").splitlines()).strip()


def answer_script_match(ledger: Sequence[object] | None, turn: int, answer: str
                        ) -> dict[str, Any] | None:
    """Match the answer's fenced code blocks against this turn's programs (the last row of
    each dispatch, with text); ``None`` when the turn ran no script.

    A block matches a dispatch whose program is the same text (trailing spaces and blank
    edge lines aside). ``matched`` lists ``{"block", "dispatch", "tool_call_id", "outcome"}``;
    ``unmatched`` the blocks no program of the turn explains — code the answer shows that
    never ran here.
    """
    rows = script_rows_of_turn(ledger, turn).current
    if not rows:
        return None
    programs = [(row, _normalized(row.text)) for row in rows if row.text is not None]
    matched: list[dict[str, Any]] = []
    unmatched: list[int] = []
    for index, block in enumerate(m.group(2) for m in _FENCE.finditer(answer)):
        text = _normalized(block)
        hit = next((row for row, program in reversed(programs) if program == text), None)
        if hit is None:
            unmatched.append(index)
        else:
            matched.append({"block": index, "dispatch": hit.dispatch,
                            "tool_call_id": hit.tool_call_id, "outcome": hit.outcome})
    return {"turn": turn, "scripts": len(rows), "matched": matched, "unmatched": unmatched}


@dataclass(frozen=True, slots=True)
class TurnScripts:
    """This turn's calls — the LAST row of each dispatch, in the order those rows were filed."""

    current: tuple[ScriptRow, ...]
    earlier: int
    """Calls of EARLIER turns on the ledger: counted, never compared."""


def script_rows_of_turn(ledger: Sequence[object] | None, turn: int) -> TurnScripts:
    """The one reader: the last row per dispatch wins and sits where it was filed.

    Execution order, so a call that settles after a later one ran is read after it.
    """
    current: dict[int, ScriptRow] = {}
    earlier: set[tuple[int, int]] = set()
    for _, row in _script_rows(ledger or ()):
        if row.turn == turn:
            current.pop(row.dispatch, None)
            current[row.dispatch] = row
        elif row.turn < turn:
            earlier.add((row.turn, row.dispatch))
    return TurnScripts(tuple(current.values()), len(earlier))


T = TypeVar("T")


def without_earlier_script_text(ledger: Sequence[T], turn: int) -> Sequence[T]:
    """The restore's half of the bound: rows of turns before ``turn`` lose ``text``, nothing else.

    Ids, counts and outcome stay. The SAME object comes back when there is nothing to drop,
    so a ledger without earlier script text is restored byte for byte.
    """
    out: list[T] | None = None
    for index, entry in enumerate(ledger):
        stripped = _stripped(entry, turn)
        if stripped is None:
            continue
        if out is None:
            out = list(ledger)
        out[index] = cast(T, stripped)
    return ledger if out is None else out


def _stripped(entry: object, turn: int) -> object | None:
    if isinstance(entry, ScriptRow):
        return entry.model_copy(update={"text": None}) \
            if entry.turn < turn and entry.text is not None else None
    if not isinstance(entry, Mapping) or entry.get("kind") != "script" \
            or entry.get("text") is None:
        return None
    row_turn = entry.get("turn")
    if not isinstance(row_turn, int) or isinstance(row_turn, bool) or row_turn >= turn:
        return None
    return {key: value for key, value in entry.items() if key != "text"}


def script_row_problem(r: object) -> str | None:
    """What keeps ``r`` from being a script row this library could have written; ``None``: none."""
    if not isinstance(r, Mapping):
        return f"it is a {type(r).__name__}, not an object"
    try:
        ScriptRow.model_validate(r)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ()))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if error.get("type") == "extra_forbidden":
            message = "a field this version never writes (a newer runtime's row?)"
        return f"{where}: {message}" if where else message
    return None


def script_row_is_well_formed(r: object) -> bool:
    """Whether a value read from a stored checkpoint is a script row this library could write."""
    return script_row_problem(r) is None


def check_script_ledger(ledger: object, *, scripts_dropped: object = None,
                        source: str = "checkpoint") -> None:
    """The checkpoint door: raise ``CheckpointError`` naming the first thing that is wrong.

    Checks every ``script`` row (:func:`script_row_is_well_formed`), that each turn's
    dispatches are numbered 1, 2, 3… in filing order and number at most
    :data:`MAX_SCRIPT_ROWS`, that nothing follows a dispatch's settled row, and that
    ``scripts_dropped`` is a count. Never repairs: an unreadable ledger is not replaced.
    """
    fix = (f"restore the {source} exactly as this version wrote it; an edited or foreign "
           "ledger is refused rather than repaired")
    if scripts_dropped is not None and (
            not isinstance(scripts_dropped, int) or isinstance(scripts_dropped, bool)
            or scripts_dropped < 0):
        raise CheckpointError(
            f"{source}: {DROPPED_KEY}={scripts_dropped!r} is not a count of dropped calls; {fix}")
    if ledger is None:
        return
    if not isinstance(ledger, Sequence) or isinstance(ledger, str | bytes):
        raise CheckpointError(
            f"{source}: {LEDGER_KEY} is a {type(ledger).__name__}, not a list of rows; {fix}")
    settled: set[tuple[int, int]] = set()
    seen: dict[int, set[int]] = {}
    for index, entry in enumerate(ledger):
        if not (isinstance(entry, ScriptRow) or (
                isinstance(entry, Mapping) and entry.get("kind") == "script")):
            continue
        where = f"{source}: {LEDGER_KEY}[{index}]"
        problem = None if isinstance(entry, ScriptRow) else script_row_problem(entry)
        if problem is not None:
            raise CheckpointError(f"{where} is not a script row this version writes ({problem}); "
                                  f"{fix}")
        row = entry if isinstance(entry, ScriptRow) else ScriptRow.model_validate(entry)
        dispatches = seen.setdefault(row.turn, set())
        if row.dispatch not in dispatches and row.dispatch != len(dispatches) + 1:
            raise CheckpointError(
                f"{where} opens dispatch {row.dispatch} of turn {row.turn} after "
                f"{len(dispatches)} dispatches (they are numbered 1, 2, 3… as filed); {fix}")
        if row.dispatch > MAX_SCRIPT_ROWS:
            raise CheckpointError(
                f"{where}: turn {row.turn} holds more than MAX_SCRIPT_ROWS={MAX_SCRIPT_ROWS} "
                f"dispatches; {fix}")
        key = (row.turn, row.dispatch)
        if key in settled:
            raise CheckpointError(
                f"{where} follows the settled row of dispatch {row.dispatch} of turn "
                f"{row.turn} (a call settles once); {fix}")
        dispatches.add(row.dispatch)
        if row.outcome != "submitted":
            settled.add(key)


def _script_rows(ledger: Sequence[object], turn: int | None = None
                 ) -> Iterator[tuple[int, ScriptRow]]:
    """The script rows of a ledger (of one ``turn``, when given), parsed.

    A malformed one raises, never skipped. Filtering on the stored turn first keeps a long
    conversation's earlier rows from being re-validated on every write.
    """
    for index, entry in enumerate(ledger):
        if isinstance(entry, ScriptRow):
            if turn is None or entry.turn == turn:
                yield index, entry
        elif isinstance(entry, Mapping) and entry.get("kind") == "script":
            if turn is not None and entry.get("turn") != turn:
                continue
            try:
                yield index, ScriptRow.model_validate(entry)
            except ValidationError:
                problem = script_row_problem(entry)
                raise CheckpointError(
                    f"{LEDGER_KEY}[{index}] is not a script row this version writes ({problem});"
                    " check the ledger with check_script_ledger where it is restored") from None
