"""The per-turn script ledger exactly per seed 003: one test per rule, plus property tests."""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfootprint.errors import CheckpointError, ConfigurationError
from agentfootprint.flow import Scope, flow_chart, pause
from agentfootprint.flow._checkpoint import load_checkpoint
from agentfootprint.tools._scripts import (
    ABSENT,
    DROPPED_KEY,
    LEDGER_KEY,
    MAX_SCRIPT_BYTES,
    MAX_SCRIPT_ROWS,
    RunnerOutcome,
    ScriptCall,
    ScriptRow,
    ToolScript,
    check_script_ledger,
    lines_of,
    program_in,
    record_script_row,
    script_of,
    script_row_for,
    script_row_is_well_formed,
    script_row_problem,
    script_rows_of_turn,
    utf8_length,
    without_earlier_script_text,
)

SCRIPT = ToolScript()
FACTS = RunnerOutcome(language="python", bytes=8, sha256="0" * 64, ok=True, exit_code=0,
                      duration_ms=12.5)


def a_call(program: object = "print(1)", *, turn: int = 1, iteration: int = 1,
           call_id: str = "call-1", settlement: Any = "ran", paused: bool = False,
           submitted: object = ABSENT, facts: RunnerOutcome | None = None) -> ScriptCall:
    return ScriptCall(script=SCRIPT, tool="run_code", tool_call_id=call_id, iteration=iteration,
                      turn=turn, proposed=program, submitted=submitted,
                      settlement=None if paused else settlement, facts=facts, paused=paused)


def file(scope: Any, program: object = "print(1)", *, dispatch: int | None = None,
         **kw: Any) -> int | None:
    draft = script_row_for(a_call(program, **kw))
    assert draft is not None
    return record_script_row(scope, draft, paused=kw.get("paused", False), dispatch=dispatch)


def rows(scope: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in scope.get(LEDGER_KEY, []) if r.get("kind") == "script"]


def sized(total: int) -> str:
    """A program of exactly ``total`` UTF-8 bytes made mostly of 3-byte characters."""
    threes, rest = divmod(total, 3)
    text = "€" * threes + {0: "", 1: "a", 2: "é"}[rest]
    assert utf8_length(text) == total
    return text


# -- one unit, and the bounds ----------------------------------------------------------------


def test_the_unit_is_utf8_bytes_never_characters() -> None:
    """32,768 characters of a 3-byte character are 98,304 bytes, and the row says so."""
    program = "€" * 32768
    assert len(program) == 32768
    assert utf8_length(program) == 98304
    draft = script_row_for(a_call(program))
    assert draft is not None and draft.bytes == 98304 and draft.text is None


def test_the_unit_counts_four_byte_and_lone_surrogate_characters() -> None:
    """An emoji is 4 bytes; a lone surrogate counts as the 3 bytes its replacement takes."""
    assert utf8_length("😀") == 4
    assert utf8_length("\ud800") == 3


def test_bytes_are_measured_at_record_time() -> None:
    """The size is taken from the program when the row is built, not from anything declared."""
    draft = script_row_for(a_call("é\n€"))
    assert draft is not None and (draft.bytes, draft.lines) == (6, 2)


def test_per_script_exactly_max_bytes_keeps_its_text() -> None:
    """A program of exactly 32,768 bytes (multi-byte characters) keeps a row with its text."""
    program = sized(MAX_SCRIPT_BYTES)
    scope: dict[str, Any] = {}
    assert file(scope, program) == 1
    (row,) = rows(scope)
    assert row["bytes"] == 32768 and row["text"] == program


def test_per_script_one_byte_over_keeps_bytes_lines_outcome_and_no_text() -> None:
    """32,769 bytes: the row keeps bytes, lines and the outcome, and no text."""
    program = sized(MAX_SCRIPT_BYTES - 2) + "\n" + "é"  # 32,766 + 1 + 2 bytes
    assert utf8_length(program) == MAX_SCRIPT_BYTES + 1
    scope: dict[str, Any] = {}
    assert file(scope, program, settlement="refused") == 1
    (row,) = rows(scope)
    assert row["bytes"] == 32769 and row["lines"] == 2 and row["outcome"] == "refused"
    assert "text" not in row


def test_per_script_oversize_row_can_be_neither_matched_nor_attached() -> None:
    """The one reader hands back an oversize row with no text to compare or attach."""
    scope: dict[str, Any] = {}
    file(scope, sized(MAX_SCRIPT_BYTES + 1))
    (row,) = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert row.text is None and row.bytes == MAX_SCRIPT_BYTES + 1


def test_per_turn_max_rows_calls_keep_a_row() -> None:
    """Sixteen calls of one turn keep sixteen rows, dispatches 1..16."""
    scope: dict[str, Any] = {}
    numbers = [file(scope, f"print({i})", call_id=f"c{i}") for i in range(MAX_SCRIPT_ROWS)]
    assert numbers == list(range(1, 17))
    assert len(rows(scope)) == 16


def test_per_turn_seventeenth_call_files_none_and_is_counted_in_scripts_dropped() -> None:
    """The 17th dispatch of a turn files nothing and is counted; so is the 18th."""
    scope: dict[str, Any] = {}
    for i in range(MAX_SCRIPT_ROWS):
        file(scope, f"print({i})")
    before = copy.deepcopy(scope[LEDGER_KEY])
    assert file(scope, "print(17)") is None
    assert scope[DROPPED_KEY] == 1
    assert scope[LEDGER_KEY] == before
    assert file(scope, "print(18)") is None
    assert scope[DROPPED_KEY] == 2


def test_per_turn_bound_is_per_turn() -> None:
    """A full turn does not take room from the next one: turn 2 starts again at dispatch 1."""
    scope: dict[str, Any] = {}
    for _ in range(MAX_SCRIPT_ROWS + 1):
        file(scope, turn=1)
    assert file(scope, turn=2) == 1
    assert scope[DROPPED_KEY] == 1


def test_eligible_text_lives_for_its_own_turn() -> None:
    """The restore at turn 2 drops the text of every turn-1 row."""
    scope: dict[str, Any] = {}
    file(scope, "print('one')", turn=1)
    restored = without_earlier_script_text(scope[LEDGER_KEY], 2)
    assert all("text" not in r for r in restored)
    assert script_rows_of_turn(restored, 1).current[0].text is None


def test_eligible_text_is_at_most_512_kib_whatever_the_conversation_length() -> None:
    """Eight full turns of maximal programs: the ledger never holds more than 16 × 32,768 bytes."""
    ledger: list[Any] = []
    for turn in range(1, 9):
        scope: dict[str, Any] = {LEDGER_KEY: list(without_earlier_script_text(ledger, turn))}
        for i in range(MAX_SCRIPT_ROWS):
            file(scope, sized(MAX_SCRIPT_BYTES - 3) + str(i % 10) * 3, turn=turn)
        ledger = scope[LEDGER_KEY]
        held = sum(utf8_length(r["text"]) for r in ledger if "text" in r)
        assert held == 16 * 32768 == 512 * 1024
    assert len(ledger) == 8 * 16


def test_the_bound_is_on_eligible_text_only_earlier_metadata_stays() -> None:
    """Earlier turns' rows keep ids, counts, outcome and facts; only their text goes."""
    scope: dict[str, Any] = {}
    file(scope, "x = 1\nprint(x)", turn=1, call_id="abc", iteration=3, facts=FACTS)
    (restored,) = without_earlier_script_text(scope[LEDGER_KEY], 2)
    (original,) = scope[LEDGER_KEY]
    assert {k: v for k, v in original.items() if k != "text"} == restored
    assert restored["tool_call_id"] == "abc" and restored["dispatch"] == 1
    assert (restored["bytes"], restored["lines"], restored["outcome"]) == (14, 2, "ran")
    assert restored["facts"]["duration_ms"] == 12.5


# -- append only, last wins ------------------------------------------------------------------


def test_a_paused_call_files_a_submitted_row_without_its_text() -> None:
    """A call paused before it settles files a ``submitted`` row at the pause, no text."""
    scope: dict[str, Any] = {}
    assert file(scope, "print('pending')", paused=True) == 1
    (row,) = rows(scope)
    assert row["outcome"] == "submitted" and "text" not in row
    assert row["bytes"] == utf8_length("print('pending')")


def test_the_settled_row_carries_the_text_so_a_program_is_never_held_twice() -> None:
    """Pause then settle: two rows, only the settled one holds the program."""
    scope: dict[str, Any] = {}
    number = file(scope, "print('pending')", paused=True)
    assert file(scope, "print('pending')", dispatch=number) == number
    paused_row, settled_row = rows(scope)
    assert "text" not in paused_row and settled_row["text"] == "print('pending')"
    assert sum("text" in r for r in rows(scope)) == 1


def test_the_writer_strips_text_from_a_paused_draft() -> None:
    """Even a draft built with text is filed without it when the writer is told it paused."""
    scope: dict[str, Any] = {}
    draft = script_row_for(a_call("print(1)"))
    assert draft is not None and draft.text == "print(1)"
    record_script_row(scope, draft, paused=True)
    (row,) = rows(scope)
    assert "text" not in row and row["outcome"] == "submitted"


def test_a_reader_takes_the_last_row_per_call_of_the_turn() -> None:
    """Pause then settle reads back as one call: the settled row."""
    scope: dict[str, Any] = {}
    number = file(scope, "print(2)", paused=True)
    file(scope, "print(2)", dispatch=number, settlement="failed")
    (row,) = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert row.outcome == "failed" and row.text == "print(2)" and row.dispatch == 1


def test_a_row_that_never_settles_stays_submitted() -> None:
    """A pause with no settle reads back as ``submitted``, text-less."""
    scope: dict[str, Any] = {}
    file(scope, "print(3)", paused=True)
    file(scope, "print(4)")
    first, second = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert first.outcome == "submitted" and first.text is None
    assert second.outcome == "ran"


def test_a_call_may_pause_more_than_once_before_it_settles() -> None:
    """A check-in, then a question to a person: both pauses join the one dispatch."""
    scope: dict[str, Any] = {}
    number = file(scope, "print(5)", paused=True)
    assert file(scope, "print(5)", paused=True, dispatch=number) == number
    assert file(scope, "print(5)", dispatch=number) == number
    assert [r["dispatch"] for r in rows(scope)] == [1, 1, 1]


def test_the_ledger_is_append_only() -> None:
    """Every write keeps the earlier entries exactly and adds one at the end."""
    scope: dict[str, Any] = {LEDGER_KEY: [{"kind": "finding", "note": "kept"}]}
    seen: list[Any] = copy.deepcopy(scope[LEDGER_KEY])
    for kw in ({"paused": True}, {"dispatch": 1}, {}, {"turn": 2}):
        file(scope, **kw)
        ledger = scope[LEDGER_KEY]
        assert ledger[: len(seen)] == seen
        assert len(ledger) == len(seen) + 1
        seen = copy.deepcopy(ledger)
    assert scope[LEDGER_KEY][0] == {"kind": "finding", "note": "kept"}


# -- constants and small readers -------------------------------------------------------------


def test_max_script_bytes_is_32768_and_max_script_rows_is_16() -> None:
    """The bounds of design § 4.4."""
    assert (MAX_SCRIPT_BYTES, MAX_SCRIPT_ROWS) == (32768, 16)


@pytest.mark.parametrize(("program", "lines"), [
    ("", 0), ("x", 1), ("a\nb", 2), ("a\n", 2), ("\n", 2), ("a\r\nb", 2), ("a\rb", 1),
])
def test_lines_are_lf_separated_and_zero_for_an_empty_program(program: str, lines: int) -> None:
    """Lines count LF separators (+1); only LF separates; the empty program has 0 lines."""
    assert lines_of(program) == lines


def test_program_in_reads_the_declared_argument() -> None:
    """The declaration names which argument holds the program."""
    assert program_in(ToolScript(argument="source"), {"source": "1", "code": "2"}) == "1"
    assert program_in(SCRIPT, None) is None
    assert program_in(SCRIPT, {}) is None


def test_proposed_is_read_once_and_never_the_arguments_object() -> None:
    """App code editing the arguments after the capture cannot change what was captured."""
    args: dict[str, Any] = {"code": "print('model')"}
    captured = program_in(SCRIPT, args)
    args["code"] = "print('edited')"
    draft = script_row_for(a_call(captured))
    assert draft is not None and draft.text == "print('model')"


def test_submitted_absent_means_the_call_never_got_there_and_the_proposal_stands() -> None:
    """Without ``submitted`` the row records the proposal, not rewritten."""
    draft = script_row_for(a_call("print('proposal')", settlement="invalid"))
    assert draft is not None
    assert (draft.text, draft.rewritten, draft.outcome) == ("print('proposal')", False, "invalid")


def test_submitted_is_the_program_the_tool_ran() -> None:
    """A rule that rewrote the program: the row records what ran, and says it was rewritten."""
    draft = script_row_for(a_call("print('proposal')", submitted="print('safe')"))
    assert draft is not None and draft.text == "print('safe')" and draft.rewritten


@pytest.mark.parametrize("program", [None, 42, ["print(1)"], {"code": "x"}])
def test_a_call_that_carried_no_program_has_no_row(program: object) -> None:
    """The declared argument is not a string: nothing to record as the program submitted."""
    assert script_row_for(a_call(program)) is None


def test_a_rewrite_to_a_non_string_leaves_no_program() -> None:
    """What reached the tool decides: a string proposal rewritten to ``None`` has no row."""
    assert script_row_for(a_call("print(1)", submitted=None)) is None


def test_a_settled_call_needs_its_settlement() -> None:
    """Neither paused nor settled is a caller's mistake, named with its fix."""
    with pytest.raises(ConfigurationError, match="settlement="):
        script_row_for(a_call(settlement=None))


def test_script_of_reads_a_tools_declaration() -> None:
    """Only a tool that declares a ``ToolScript`` is a code-running tool."""

    class Declared:
        script = ToolScript(argument="src")

    assert script_of(Declared()) == ToolScript(argument="src")
    assert script_of(object()) is None


# -- the one writer --------------------------------------------------------------------------


def test_the_writer_assigns_the_one_based_dispatch_in_dispatch_order() -> None:
    """Dispatch identity is the 1-based order of the actual dispatch within its turn."""
    scope: dict[str, Any] = {}
    assert [file(scope, call_id=f"c{i}") for i in range(3)] == [1, 2, 3]
    assert [r["dispatch"] for r in rows(scope)] == [1, 2, 3]


def test_dispatch_identity_restarts_at_one_each_turn() -> None:
    """Each turn numbers its own dispatches."""
    scope: dict[str, Any] = {}
    file(scope, turn=1)
    file(scope, turn=1)
    assert file(scope, turn=2) == 1


def test_a_call_is_a_dispatch_never_a_provider_id() -> None:
    """A later call that reuses a provider id is a new dispatch."""
    scope: dict[str, Any] = {}
    assert file(scope, call_id="same") == 1
    assert file(scope, call_id="same") == 2
    assert len(script_rows_of_turn(scope[LEDGER_KEY], 1).current) == 2


def test_the_dispatch_option_joins_the_paused_calls_row() -> None:
    """``dispatch=`` names a dispatch that already has a row; the settled row joins it."""
    scope: dict[str, Any] = {}
    first = file(scope, "print('a')", paused=True)
    file(scope, "print('b')")
    assert file(scope, "print('a')", dispatch=first) == 1
    assert [r["dispatch"] for r in rows(scope)] == [1, 2, 1]


def test_the_dispatch_option_naming_no_row_is_refused() -> None:
    """A dispatch number the writer never handed out is a mistake, not a new call."""
    scope: dict[str, Any] = {}
    file(scope, turn=1, paused=True)
    with pytest.raises(ConfigurationError, match="has no row in turn 2"):
        file(scope, turn=2, dispatch=1)
    with pytest.raises(ConfigurationError, match="dispatch=7"):
        file(scope, dispatch=7)


def test_a_call_settles_once() -> None:
    """A settled dispatch takes no further row (its program would be held twice)."""
    scope: dict[str, Any] = {}
    file(scope)
    with pytest.raises(ConfigurationError, match="already settled"):
        file(scope, dispatch=1)


def test_appended_unless_the_turn_already_holds_max_rows_other_dispatches() -> None:
    """Fifteen dispatches leave room for one more; sixteen leave none."""
    scope: dict[str, Any] = {}
    for _ in range(MAX_SCRIPT_ROWS - 1):
        file(scope)
    assert file(scope) == 16
    assert file(scope) is None


def test_scripts_dropped_is_absent_until_a_call_is_dropped() -> None:
    """The counter is value-conditional: no key at all until the first drop."""
    scope: dict[str, Any] = {}
    for _ in range(MAX_SCRIPT_ROWS):
        file(scope)
        assert DROPPED_KEY not in scope
    file(scope)
    assert scope[DROPPED_KEY] == 1


def test_a_dispatch_that_already_has_a_row_is_never_dropped() -> None:
    """Sixteen paused calls fill the turn; each still settles into its own dispatch."""
    scope: dict[str, Any] = {}
    for _ in range(MAX_SCRIPT_ROWS):
        file(scope, paused=True)
    for number in range(1, MAX_SCRIPT_ROWS + 1):
        assert file(scope, f"print({number})", dispatch=number) == number
    assert DROPPED_KEY not in scope
    assert all(r.outcome == "ran" for r in script_rows_of_turn(scope[LEDGER_KEY], 1).current)


def test_a_pause_is_never_counted_its_call_is_counted_once_when_it_settles() -> None:
    """A full turn: the 17th call's pause files nothing and counts nothing; its settle counts."""
    scope: dict[str, Any] = {}
    for _ in range(MAX_SCRIPT_ROWS):
        file(scope)
    assert file(scope, paused=True) is None
    assert file(scope, paused=True) is None
    assert DROPPED_KEY not in scope
    assert file(scope) is None
    assert scope[DROPPED_KEY] == 1


def test_the_writer_returns_the_dispatch_or_none_when_dropped() -> None:
    """The return value is the dispatch filed under, ``None`` for a drop."""
    scope: dict[str, Any] = {}
    results = [file(scope) for _ in range(MAX_SCRIPT_ROWS + 1)]
    assert results[-1] is None and results[:-1] == list(range(1, 17))


class RecordingScope(dict[str, Any]):
    """A dict scope that logs every read and write the writer makes."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    def get(self, key: str, default: Any = None, /) -> Any:
        self.log.append(("read", key))
        return super().get(key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        self.log.append(("write", key))
        super().__setitem__(key, value)


def test_the_writer_is_synchronous_one_read_one_write() -> None:
    """No coroutine; filing a row is one read and one write of the ledger, nothing else."""
    assert not inspect.iscoroutinefunction(record_script_row)
    scope = RecordingScope()
    file(scope)
    assert scope.log == [("read", LEDGER_KEY), ("write", LEDGER_KEY)]
    for _ in range(MAX_SCRIPT_ROWS - 1):
        file(scope)
    scope.log.clear()
    file(scope)
    assert scope.log == [("read", LEDGER_KEY), ("read", DROPPED_KEY), ("write", DROPPED_KEY)]


def test_the_row_is_state_and_the_writer_emits_nothing() -> None:
    """Filed through a real flow scope, the row is committed state and the step emits nothing."""

    def dispatch_stage(scope: Scope) -> None:
        file(scope)

    run = flow_chart("Dispatch", dispatch_stage, id="dispatch").build().run_sync({})
    assert run.status == "done"
    (record,) = run.records
    assert record.emits == ()
    assert [c.key for c in record.changes] == [LEDGER_KEY]
    assert run.state[LEDGER_KEY][0]["text"] == "print(1)"


def _pausing(scope: Scope) -> Any:
    scope["dispatch"] = file(scope, "print('after the pause')", paused=True)
    return pause({"question": "run it?"})


def _settling(scope: Scope, answer: Any) -> None:
    file(scope, "print('after the pause')", dispatch=scope["dispatch"])


def test_pause_then_settle_across_a_json_checkpoint() -> None:
    """The paused row crosses a checkpoint as JSON, passes the door, and the settle joins it."""
    chart = flow_chart("Dispatch", _pausing, id="dispatch", resume=_settling).build()
    paused = chart.run_sync({})
    assert paused.paused and paused.checkpoint is not None
    wire = paused.checkpoint.to_json()
    assert "after the pause" not in wire  # the pause row never holds the program
    restored = load_checkpoint(json.loads(wire))
    check_script_ledger(restored.state[LEDGER_KEY])
    fresh = flow_chart("Dispatch", _pausing, id="dispatch", resume=_settling).build()
    done = fresh.resume_sync(restored, "yes")
    assert done.status == "done"
    (row,) = script_rows_of_turn(done.state[LEDGER_KEY], 1).current
    assert (row.dispatch, row.outcome, row.text) == (1, "ran", "print('after the pause')")


# -- the one reader --------------------------------------------------------------------------


def test_the_reader_reads_in_execution_order_where_each_dispatch_last_filed() -> None:
    """A call that settles after a later one ran is read after it."""
    scope: dict[str, Any] = {}
    first = file(scope, "print('slow')", paused=True)
    file(scope, "print('quick')")
    file(scope, "print('slow')", dispatch=first)
    current = script_rows_of_turn(scope[LEDGER_KEY], 1).current
    assert [(r.dispatch, r.text) for r in current] == [(2, "print('quick')"),
                                                        (1, "print('slow')")]


def test_the_reader_counts_earlier_turns_calls_and_never_compares_them() -> None:
    """Earlier turns are counted per call (a pause and its settle are one call)."""
    scope: dict[str, Any] = {}
    number = file(scope, turn=1, paused=True)
    file(scope, turn=1, dispatch=number)
    file(scope, turn=1)
    file(scope, turn=2)
    file(scope, turn=3)
    found = script_rows_of_turn(scope[LEDGER_KEY], 3)
    assert found.earlier == 3
    assert [r.turn for r in found.current] == [3]


def test_the_reader_skips_other_kinds_and_takes_an_absent_ledger() -> None:
    """Other findings share the ledger; an absent ledger has no calls."""
    ledger = [{"kind": "finding", "text": "not a script"}, "odd", 7]
    assert script_rows_of_turn(ledger, 1).current == ()
    assert script_rows_of_turn(None, 1).current == ()
    assert script_rows_of_turn([], 1).earlier == 0


def test_the_reader_never_silently_skips_a_malformed_script_row() -> None:
    """A script row that is not well formed raises, naming the row."""
    scope: dict[str, Any] = {}
    file(scope)
    ledger = [*scope[LEDGER_KEY], {"kind": "script", "turn": 1}]
    with pytest.raises(CheckpointError, match=r"findings_ledger\[1\]"):
        script_rows_of_turn(ledger, 1)


def test_the_reader_accepts_row_objects() -> None:
    """Rows kept as ``ScriptRow`` objects read the same as their JSON form."""
    scope: dict[str, Any] = {}
    file(scope)
    as_objects = [ScriptRow.model_validate(r) for r in scope[LEDGER_KEY]]
    assert script_rows_of_turn(as_objects, 1) == script_rows_of_turn(scope[LEDGER_KEY], 1)


# -- the restore door ------------------------------------------------------------------------


def _conversation() -> list[Any]:
    scope: dict[str, Any] = {LEDGER_KEY: [{"kind": "finding", "text": "someone else's"}]}
    file(scope, "print('turn one')", turn=1, facts=FACTS)
    file(scope, "print('turn two')", turn=2)
    file(scope, "print('turn two, paused')", turn=2, paused=True)
    return list(scope[LEDGER_KEY])


def test_restore_drops_the_text_of_every_earlier_turn_only() -> None:
    """Turn 2's restore strips turn 1's text; turn 2's own rows keep theirs."""
    ledger = _conversation()
    restored = without_earlier_script_text(ledger, 2)
    texts = [r.get("text") for r in restored]
    assert texts == ["someone else's", None, "print('turn two')", None]
    assert ledger[1]["text"] == "print('turn one')"  # the input is not mutated


def test_restore_keeps_ids_counts_outcome_and_facts() -> None:
    """Everything but the text survives the restore, key for key."""
    ledger = _conversation()
    restored = without_earlier_script_text(ledger, 3)
    for before, after in zip(ledger, restored, strict=True):
        if before.get("kind") == "script":
            assert after == {k: v for k, v in before.items() if k != "text"}


def test_restore_leaves_other_kinds_untouched() -> None:
    """Rows of other kinds are the same objects after the restore."""
    ledger = _conversation()
    restored = without_earlier_script_text(ledger, 3)
    assert restored[0] is ledger[0]


@pytest.mark.parametrize("turn", [1, 2])
def test_restore_returns_the_same_object_when_there_is_nothing_to_drop(turn: int) -> None:
    """No earlier script text: the very same ledger comes back (restored byte for byte)."""
    scope: dict[str, Any] = {LEDGER_KEY: [{"kind": "finding", "text": "kept"}]}
    file(scope, turn=turn)
    file(scope, turn=1, paused=True)
    file(scope, sized(MAX_SCRIPT_BYTES + 1), turn=1)
    ledger = scope[LEDGER_KEY] if turn == 1 else without_earlier_script_text(
        scope[LEDGER_KEY], 2)
    assert without_earlier_script_text(ledger, turn) is ledger
    empty: list[Any] = []
    assert without_earlier_script_text(empty, 5) is empty
    stripped = without_earlier_script_text(_conversation(), 3)
    assert without_earlier_script_text(stripped, 3) is stripped


def test_restore_works_on_row_objects() -> None:
    """``ScriptRow`` objects lose their text the same way."""
    rows_ = [ScriptRow.model_validate(r) for r in _conversation()[1:]]
    restored = without_earlier_script_text(rows_, 2)
    assert [r.text for r in restored] == [None, "print('turn two')", None]
    assert restored[1] is rows_[1]


# -- the checkpoint door ---------------------------------------------------------------------


def _good_row(**changes: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    file(scope, "a = 1\nprint(a)", facts=FACTS)
    row: dict[str, Any] = dict(scope[LEDGER_KEY][0])
    for key, value in changes.items():
        if value is _DELETE:
            row.pop(key)
        else:
            row[key] = value
    return row


_DELETE = object()


def test_rows_the_writer_files_are_well_formed() -> None:
    """Every row the writer files passes the door, also after a JSON round trip."""
    row = _good_row()
    assert script_row_is_well_formed(row)
    assert script_row_is_well_formed(json.loads(json.dumps(row)))
    assert script_row_problem(row) is None


@pytest.mark.parametrize(("changes", "named"), [
    ({"dispatch": _DELETE}, "dispatch"),
    ({"dispatch": 0}, "dispatch"),
    ({"dispatch": "1"}, "dispatch"),
    ({"turn": True}, "turn"),
    ({"bytes": -1}, "bytes"),
    ({"outcome": "exploded"}, "outcome"),
    ({"outcome": "submitted"}, "submitted"),
    ({"bytes": 99}, "bytes=99"),
    ({"lines": 7}, "lines=7"),
    ({"text": sized(MAX_SCRIPT_BYTES + 1), "bytes": MAX_SCRIPT_BYTES + 1}, "MAX_SCRIPT_BYTES"),
    ({"verdict": "new"}, "newer runtime"),
    ({"facts": {"ok": True}}, "facts"),
    ({"facts": {**FACTS.model_dump(), "sha256": "not-a-hash"}}, "sha256"),
    ({"text": 12}, "text"),
])
def test_a_malformed_row_is_not_well_formed_and_the_problem_is_named(
        changes: dict[str, Any], named: str) -> None:
    """Each way a stored row can be wrong is refused, and the refusal names it."""
    row = _good_row(**changes)
    assert not script_row_is_well_formed(row)
    assert named in (script_row_problem(row) or "")


def test_a_value_that_is_not_an_object_is_not_a_row() -> None:
    """Lists and strings are refused, not guessed at."""
    assert script_row_problem(["kind", "script"]) == "it is a list, not an object"


def test_the_door_raises_a_checkpoint_error_naming_the_row_the_problem_and_the_fix() -> None:
    """One clear error: where, what, and what to do."""
    ledger = [{"kind": "finding"}, _good_row(lines=7)]
    with pytest.raises(CheckpointError) as caught:
        check_script_ledger(ledger)
    message = str(caught.value)
    assert "findings_ledger[1]" in message and "lines=7" in message
    assert "restore the checkpoint exactly as this version wrote it" in message


def test_the_door_never_replaces_what_it_refuses() -> None:
    """A refused ledger is left exactly as it was read."""
    ledger = [_good_row(bytes=99)]
    snapshot = copy.deepcopy(ledger)
    with pytest.raises(CheckpointError):
        check_script_ledger(ledger)
    assert ledger == snapshot


@pytest.mark.parametrize(("ledger", "named"), [
    ("rows", "not a list"),
    ({"kind": "script"}, "not a list"),
    ([_good_row(dispatch=2)], "opens dispatch 2 of turn 1 after 0"),
    ([_good_row(), _good_row()], "follows the settled row"),
    ([_good_row(dispatch=d, tool_call_id=f"c{d}") for d in range(1, 18)],
     "more than MAX_SCRIPT_ROWS=16"),
])
def test_the_door_checks_the_ledger_as_a_whole(ledger: Any, named: str) -> None:
    """Numbering 1, 2, 3…, at most 16 dispatches a turn, nothing after a settled row."""
    with pytest.raises(CheckpointError, match=named):
        check_script_ledger(ledger)


@pytest.mark.parametrize("dropped", [-1, True, "3", 1.5])
def test_the_door_checks_scripts_dropped(dropped: object) -> None:
    """``scripts_dropped`` must be a count."""
    with pytest.raises(CheckpointError, match="scripts_dropped"):
        check_script_ledger([], scripts_dropped=dropped)


def test_the_door_accepts_what_the_writer_wrote_and_an_absent_ledger() -> None:
    """A real ledger (pauses, settles, several turns, a drop) and ``None`` pass."""
    scope: dict[str, Any] = {}
    number = file(scope, paused=True)
    file(scope, dispatch=number)
    for _ in range(MAX_SCRIPT_ROWS):
        file(scope)
    file(scope, turn=2)
    check_script_ledger(scope[LEDGER_KEY], scripts_dropped=scope[DROPPED_KEY])
    check_script_ledger(None)


def test_a_row_from_a_newer_runtime_is_refused() -> None:
    """An older runtime refuses a checkpoint carrying a row it could not have written."""
    with pytest.raises(CheckpointError, match="newer runtime"):
        check_script_ledger([_good_row(attached_to="answer-3")])


# -- properties ------------------------------------------------------------------------------

_programs = st.one_of(
    st.text(max_size=40),
    st.builds(lambda ch, n: ch * n, st.sampled_from(["a", "é", "€", "😀"]),
              st.integers(min_value=8100, max_value=33000)),
)
_ops = st.lists(st.tuples(st.sampled_from(["run", "pause", "settle"]), _programs,
                          st.integers(min_value=0, max_value=40)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(ops=_ops)
def test_property_one_turn_ledger_invariants(ops: list[tuple[str, str, int]]) -> None:
    """Any mix of runs, pauses and settles keeps every law of the seed, checked against a model."""
    scope: dict[str, Any] = {}
    open_: list[int] = []
    last_filed: dict[int, tuple[str, str | None]] = {}
    order: list[int] = []
    dropped = 0
    previous: list[Any] = []
    for kind, program, pick in ops:
        if kind == "settle" and open_:
            number = open_.pop(pick % len(open_))
            assert file(scope, program, dispatch=number) == number
            text = program if utf8_length(program) <= MAX_SCRIPT_BYTES else None
            last_filed[number] = ("ran", text)
            order.remove(number)
            order.append(number)
        else:
            paused = kind == "pause"
            got = file(scope, program, paused=paused)
            if len(last_filed) >= MAX_SCRIPT_ROWS:
                assert got is None
                dropped += not paused
            else:
                assert got == len(last_filed) + 1
                text = None if paused or utf8_length(program) > MAX_SCRIPT_BYTES else program
                last_filed[got] = ("submitted" if paused else "ran", text)
                order.append(got)
                if paused:
                    open_.append(got)
        ledger = scope.get(LEDGER_KEY, [])
        assert ledger[: len(previous)] == previous  # append only
        previous = copy.deepcopy(ledger)
    assert scope.get(DROPPED_KEY) == (dropped or None)
    current = script_rows_of_turn(scope.get(LEDGER_KEY), 1).current
    assert [r.dispatch for r in current] == order
    assert [(r.outcome, r.text) for r in current] == [last_filed[n] for n in order]
    ledger = scope.get(LEDGER_KEY, [])
    assert len({r["dispatch"] for r in ledger}) <= MAX_SCRIPT_ROWS
    for number in last_filed:
        assert sum(1 for r in ledger if r["dispatch"] == number and "text" in r) <= 1
    assert all("text" not in r for r in ledger if r["outcome"] == "submitted")
    check_script_ledger(json.loads(json.dumps(ledger)), scripts_dropped=scope.get(DROPPED_KEY))


@settings(max_examples=40, deadline=None)
@given(turns=st.lists(st.lists(_programs, max_size=20), min_size=1, max_size=6))
def test_property_restore_bounds_text_and_changes_nothing_else(turns: list[list[str]]) -> None:
    """Across any conversation: text only in the current turn, within 512 KiB; restore is
    idempotent, returns the same object when idle, and never changes the current turn's reading.
    """
    ledger: list[Any] = []
    for turn, programs in enumerate(turns, start=1):
        restored = without_earlier_script_text(ledger, turn)
        assert without_earlier_script_text(restored, turn) is restored
        for before, after in zip(ledger, restored, strict=True):
            assert {k: v for k, v in before.items() if k != "text"} == after
        assert script_rows_of_turn(restored, turn - 1).earlier == \
            script_rows_of_turn(ledger, turn - 1).earlier
        scope: dict[str, Any] = {LEDGER_KEY: list(restored)}
        for program in programs:
            file(scope, program, turn=turn)
        ledger = scope[LEDGER_KEY]
        assert all(r["turn"] == turn for r in ledger if "text" in r)
        held = sum(utf8_length(r["text"]) for r in ledger if "text" in r)
        assert held <= MAX_SCRIPT_ROWS * MAX_SCRIPT_BYTES
        check_script_ledger(ledger, scripts_dropped=scope.get(DROPPED_KEY))
        current = script_rows_of_turn(ledger, turn).current
        assert script_rows_of_turn(without_earlier_script_text(ledger, turn), turn).current \
            == current
