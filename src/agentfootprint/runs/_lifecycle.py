"""A run's row from start to end: its id, what may replace its body, and its progress entries.

A run is in its store from its start (status ``running``, see ``RunStorePort.begin``). While it
runs, the agent appends progress entries (what its commit log gained since the last entry, and
each tool call's start and outcome), so a run killed mid-way is listed, can be explained up to
its last entry, and can be resumed. A row only grows: a save must extend the commit log the
store already holds, so another run that reuses the id is refused instead of replacing it.
The rules are pure functions here, shared by every store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConfigurationError, RunError

if TYPE_CHECKING:
    from ._recording import Recording

__all__ = ["OPEN_STATUSES", "RUN_ID_PATTERN", "check_run_id", "entry_json", "extends",
           "parse_entry", "refuse_reopen", "refuse_taken", "with_progress"]

RUN_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""A run id: 1-128 characters of letters, digits, ``_ . : -``, starting with a letter or digit
(safe as a file name, in a URL, in a terminal and in SQL text)."""

OPEN_STATUSES: Final = frozenset(("running", "paused"))
"""Statuses of a run that may still go on (resume) and so may still change its row."""


def check_run_id(run_id: object) -> str:
    """``run_id`` when it is a valid run id; else a ``ConfigurationError`` naming the fix."""
    if isinstance(run_id, str) and RUN_ID_PATTERN.fullmatch(run_id):
        return run_id
    shown = repr(run_id) if len(repr(run_id)) <= 80 else repr(run_id)[:77] + "..."
    raise ConfigurationError(
        f"run_id={shown} is not a valid run id: use 1-128 letters, digits, '_', '.', ':' or "
        "'-', starting with a letter or digit (no '/', spaces or control characters), or leave "
        "run_id unset for a generated one")


def refuse_taken(run_id: str, status: str, where: str) -> ConfigurationError:
    """The error for a second run that reuses the id of a run already in the store."""
    return ConfigurationError(
        f"run id {run_id!r} is already taken in {where} by another run (status {status!r}); "
        "a run id names one run for good — give this run its own run_id, or leave it unset")


def refuse_reopen(run_id: str, status: str, reopen: str, where: str) -> ConfigurationError:
    """The error for resuming a run whose row is not in the state that resume expects."""
    if status == "running":
        hint = ("it was resumed already and is under way, or was killed: continue it with "
                f"agent.resume({run_id!r})")
    elif status == "paused":
        hint = "it is waiting for a person: resume it with its checkpoint and the answer"
    else:
        hint = "it ended already, and a checkpoint is resumed once"
    return ConfigurationError(
        f"run {run_id!r} in {where} is {status!r}, so it cannot be resumed as a {reopen} run; "
        f"{hint}")


def _records(log: Mapping[str, Any]) -> list[Any]:
    records = log.get("records") if isinstance(log, Mapping) else None
    return records if isinstance(records, list) else []


def _text(records: Iterable[Any]) -> str:
    return json.dumps(list(records), sort_keys=True)


def extends(stored_body: str, recording: Recording) -> bool:
    """True when ``recording``'s commit log begins with every record of the stored body:
    the same run, further on (or the same). Anything else is another run under that id."""
    try:
        stored = json.loads(stored_body)
    except ValueError:
        return False
    if not isinstance(stored, dict):
        return False
    old = _records(stored.get("log", {}))
    new = _records(recording.log)
    return len(new) >= len(old) and _text(old) == _text(new[:len(old)])


def entry_json(run_id: str, entry: Mapping[str, Any]) -> str:
    """A progress entry as JSON text (``NaN`` kept as the recordings keep it)."""
    if not isinstance(entry, Mapping):
        raise TypeError(f"a progress entry of run {run_id!r} must be a dict, got "
                        f"{type(entry).__name__}")
    return json.dumps(dict(entry))


def parse_entry(run_id: str, body: str, where: str) -> dict[str, Any]:
    """A stored progress entry; unreadable, an error naming the run and the store."""
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise RunError(f"a progress entry of run {run_id!r} in {where} is unreadable ({exc}); "
                       "it was altered — the row is left as it is") from exc
    if not isinstance(value, dict):
        raise RunError(f"a progress entry of run {run_id!r} in {where} is not a JSON object; "
                       "it was altered — the row is left as it is")
    return value


def with_progress(recording: Recording, entries: list[dict[str, Any]]) -> Recording:
    """The recording of a run still under way (or killed): its body's log plus the records
    its progress entries carried, each position once (a record's ``idx`` is its position)."""
    log = dict(recording.log)
    records = list(_records(log))
    initial = log.get("initial")
    for entry in entries:
        if not initial and isinstance(entry.get("initial"), dict):
            initial = entry["initial"]
        for record in entry.get("records") or ():
            if isinstance(record, dict) and record.get("idx") == len(records):
                records.append(record)
    if len(records) == len(_records(log)) and initial == log.get("initial"):
        return recording
    log["records"] = records
    log["initial"] = initial or {}
    grown = recording.model_copy(update={"log": log})
    grown._log = None  # the copy's commit log is rebuilt from its own JSON
    return grown
