"""Proving a stored run's cause from another process: ``agentfootprint prove RUN_ID``.

A run in a run store has no live agent to re-run. The agent is rebuilt from an importable
factory — ``"module:function"``, recorded with the run (``meta["factory"]``) or given — that
returns it; "wrong" is a serialisable criterion (``wrong_if``). The proof is then saved beside
the run, where ``agentfootprint explain`` and the report read it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, cast

from .._refs import load_callable
from ..errors import ConfigurationError
from ..runs._recording import AgentRun, Recording
from ..runs._store import RunStorePort
from ..runs._view import RunView
from ._criterion import WrongIf
from ._localize import DEFAULT_BUDGET, ContextBugReport, localize_context_bug
from ._rerun import IsWrong, Progress
from ._verdict import DEFAULT_ALPHA

__all__ = ["StoredRun", "kept_criterion", "prove_stored_run"]


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A recorded run as an explanation sees it: its answer, its recording, and the agent
    rebuilt to re-run it."""

    content: str
    recording: Recording
    source: Any
    run_id: str


async def prove_stored_run(store: RunStorePort, run_id: str, *, is_wrong: IsWrong,
                           factory: str | None = None, budget: int | None = DEFAULT_BUDGET,
                           alpha: float = DEFAULT_ALPHA, progress: Progress | None = None
                           ) -> ContextBugReport:
    """Localize the stored run's cause with the agent rebuilt from ``factory``; keep the proof."""
    recording = store.load(run_id)
    path = factory or recording.meta.get("factory")
    if not isinstance(path, str) or not path:
        raise ConfigurationError(
            f"run {run_id} has no factory recorded with it; pass --factory module:function (a "
            "function that returns the agent), or record one with RunStore.save(result, "
            "meta={'factory': 'module:function'})")
    make = load_callable(path)
    agent = make()
    if inspect.isawaitable(agent):
        agent = await agent
    if not callable(getattr(agent, "without", None)):
        raise ConfigurationError(
            f"{path}() returned {agent!r}; it must return the Agent (or composition) that made "
            "the run")
    answer = RunView.of(recording).answer
    if answer is None:
        raise ConfigurationError(
            f"run {run_id} handed back no answer (status {recording.status}); there is nothing "
            f"to prove — `agentfootprint explain {run_id}` shows why it stopped")
    stored = cast(AgentRun, StoredRun(answer, recording, agent, run_id))  # read via log_of
    report = await localize_context_bug(stored,
                                        is_wrong=is_wrong, budget=budget, alpha=alpha,
                                        progress=progress)
    store.add_proof(run_id, report.to_proof())
    return report


def kept_criterion(store: RunStorePort, run_id: str) -> WrongIf:
    """The criterion of the run's latest kept proof, when it was kept as data."""
    for proof in reversed(store.proofs(run_id)):
        rule = {k: v for k, v in (proof.get("criterion") or {}).items()
                if k in ("contains", "matches", "predicate", "judges_result")}
        if rule:
            return WrongIf(**rule)
    raise ConfigurationError(
        f"run {run_id} has no kept criterion of what is wrong; pass --wrong-if-contains PHRASE, "
        "--wrong-if-matches REGEX or --wrong-if MODULE:FUNCTION")
