"""The normal form two recordings are compared in: the same work, wherever and however often
it ran, has the same normal form.

A run recovered by another process, re-delivered to another worker, or run in-process
differs from an uninterrupted run of the same work only in what says *when*, *where* and
*under which id* it ran. :func:`normal_form` removes exactly that, by these rules
(:data:`RULES`), and nothing else:

1. ``run-id`` — the run's own id becomes ``"<run>"`` wherever a string holds it (the
   recording's ``run_id``, an idempotency key ``{run_id}:{call}``, an id derived from it);
2. ``created-at`` — the recording's ``created_at`` (when it was saved) is dropped;
3. ``placement`` — ``meta["placement"]`` (hosts, pids, workers, attempts and their times,
   ``_placement.py``) and ``meta["factory"]`` (how the executor rebuilt the agent) are dropped;
4. ``timings`` — every value of a run-state key of kind ``timing`` in the trace contract
   (``runs/trace.py``, e.g. ``llm_latency_ms``) becomes ``"<timing>"``, element by element,
   so how many calls were timed still counts.

Everything else — the chart, every commit record (reads, changes, decisions, emits), the
output, the rest of ``meta`` — is compared as it is. The form is idempotent
(``normal_form(normal_form(r)) == normal_form(r)``) and plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..runs._recording import Recording

__all__ = ["RULES", "RUN", "TIMING", "normal_form", "same_work"]

RULES: Final = ("run-id", "created-at", "placement", "timings")
"""The rules :func:`normal_form` applies, in order (see the module)."""
RUN: Final = "<run>"
TIMING: Final = "<timing>"
_DROPPED_META: Final = ("placement", "factory")


def _timing_keys() -> tuple[frozenset[str], tuple[str, ...]]:
    from ..runs import trace

    return trace.keys_of_kinds(("timing",))


def normal_form(recording: Recording | Mapping[str, Any] | str) -> dict[str, Any]:
    """``recording`` (a ``Recording``, its JSON text or its dict) in the normal form."""
    if isinstance(recording, str):
        body: Any = json.loads(recording)
    elif isinstance(recording, Mapping):
        body = json.loads(json.dumps(dict(recording)))
    else:
        body = json.loads(recording.to_json())
    run_id = body.get("run_id")
    body.pop("created_at", None)
    meta = body.get("meta")
    if isinstance(meta, dict):
        for key in _DROPPED_META:
            meta.pop(key, None)
    names, prefixes = _timing_keys()
    log = body.get("log")
    if isinstance(log, dict):
        for record in log.get("records") or ():
            for change in (record.get("changes") or ()) if isinstance(record, dict) else ():
                name = change.get("key") if isinstance(change, dict) else None
                if isinstance(name, str) and (name in names or name.startswith(prefixes)) \
                        and "value" in change:
                    change["value"] = _masked(change["value"])
        initial = log.get("initial")
        if isinstance(initial, dict):
            for key in list(initial):
                if key in names or key.startswith(prefixes):
                    initial[key] = _masked(initial[key])
    if isinstance(run_id, str) and run_id and run_id != RUN:
        body = _renamed(body, run_id)
    return body  # type: ignore[no-any-return]


def same_work(first: Recording | Mapping[str, Any] | str,
              second: Recording | Mapping[str, Any] | str) -> bool:
    """True when two recordings have the same normal form (the same work was recorded)."""
    return normal_form(first) == normal_form(second)


def _masked(value: Any) -> Any:
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    return TIMING


def _renamed(value: Any, run_id: str) -> Any:
    if isinstance(value, str):
        return value.replace(run_id, RUN) if run_id in value else value
    if isinstance(value, list):
        return [_renamed(v, run_id) for v in value]
    if isinstance(value, dict):
        return {_renamed(k, run_id): _renamed(v, run_id) for k, v in value.items()}
    return value
