"""An explanation's re-runs on an executor: jobs out, outcomes back, the same verdicts.

With ``executor=`` (``agentfootprint.distributed``), ``Rerunner._runs`` hands the re-runs of a
probe to the executor as a batch of :class:`RerunJob` (JSON) instead of running them here, and
``find_causes`` judges the two halves of a split at once on a deterministic model. Wherever a
job lands, :func:`rerun_one` does exactly what the in-process re-run does — the agent rebuilt
by the factory, ``without`` the removed ids, isolated by the explained run's recording
(``isolation.py``) with the same seed — so the verdicts are the in-process ones.

What a job cannot carry: a ``rebuild`` function (the factory and ``agent.without`` take its
place), ``deps`` (give the tools what they need from the factory), a memory store private to
this process (a worker sees the factory's stores: share them), and the agent's ``Budget``
summed over every re-run (a worker judges each re-run's spend alone).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .._refs import callable_path
from ..errors import ConfigurationError
from ._criterion import WrongIf

if TYPE_CHECKING:
    from ._rerun import Outcome, Rerunner

__all__ = ["RerunExecutor", "RerunJob", "RerunOutcome", "both", "check_fanout", "remote_runs",
           "rerun_one"]

T = TypeVar("T")


class RerunJob(BaseModel):
    """One isolated re-run of an explanation, as another process can do it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    factory: str
    """``"module:attr"`` returning the Agent that made the explained run."""
    recording: str
    """The explained run's recording (``Recording.to_json()``): its tool calls are replayed,
    its conversation and memory identity continued."""
    removed: list[str]
    """The suspect ids the re-run goes without (sorted)."""
    seed: int
    """The re-run's index in the explanation (a sampling server is asked for that draw)."""
    message: str
    criterion: WrongIf | None = None
    """Applied on the worker when it judges the whole result (``judges_result``)."""


class RerunOutcome(BaseModel):
    """What one re-run gave: the answer, whether it completed in isolation, and its costs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answer: str = ""
    complete: bool = False
    reason: str = ""
    model_calls: int = 0
    deterministic: bool = False
    paused: bool = False
    wrong: bool | None = None
    """The criterion's judgement of the whole result, when the job carried one."""
    budget: str | None = None
    """The agent's budget stopped the re-run (the explanation stops: not an error)."""
    error: str | None = None
    """The re-run could not be judged at all (a rebuild that kept a removed source)."""
    where: dict[str, Any] = Field(default_factory=dict)


class RerunExecutor(Protocol):
    """What an explanation needs of an executor (``distributed.Executor`` is one)."""

    async def rerun_jobs(self, jobs: list[RerunJob]) -> list[RerunOutcome]: ...


def check_fanout(executor: object, factory: object, *, rebuild: object, deps: object,
                 is_wrong: object, result: object) -> str | None:
    """The factory the re-runs are rebuilt from, when an executor is given (errors name the
    fix); ``None`` without one."""
    if executor is None:
        return None
    if not callable(getattr(executor, "rerun_jobs", None)):
        raise ConfigurationError(
            f"executor={executor!r} cannot run re-runs; pass an executor from "
            "agentfootprint.distributed (InProcessExecutor(), celery_executor(...))")
    if rebuild is not None:
        raise ConfigurationError(
            "executor= re-runs the agent built by factory= without each suspect; a rebuild "
            "function cannot travel to a worker — drop rebuild= and pass factory='module:attr'")
    if deps is not None:
        raise ConfigurationError(
            "executor= cannot send deps= to a worker; have factory= build tools that reach "
            "what they need, or explain in-process (no executor=)")
    if getattr(is_wrong, "judges_result", False) and not isinstance(is_wrong, WrongIf):
        raise ConfigurationError(
            "executor= needs a criterion that judges the whole result to be wrong_if(...) data")
    recording = getattr(result, "recording", None)
    meta = getattr(recording, "meta", None)
    found = (callable_path(factory) if factory is not None
             else meta.get("factory") if isinstance(meta, dict) else None)
    if not isinstance(found, str) or ":" not in found:
        raise ConfigurationError(
            f"executor= needs factory='module:attr' (a function returning the agent that made "
            f"the run) to rebuild it on the workers; got factory={factory!r}")
    return found


def _recording_json(runner: Rerunner) -> str:
    if runner.fanout_recording is not None:
        return runner.fanout_recording
    from ..runs._recording import Recording

    result = runner.result
    recording = getattr(result, "recording", None)
    text = (recording.to_json() if isinstance(recording, Recording)
            else Recording.of(result).to_json())
    runner.fanout_recording = text
    return text


async def remote_runs(runner: Rerunner, removed: frozenset[str], label: str, count: int
                      ) -> list[Outcome]:
    """``count`` re-runs without ``removed`` as one batch on the runner's executor; the budget
    is taken before the batch starts (so batches in flight at once never cross it together)."""
    from ._rerun import BudgetExceeded, Outcome

    first = runner.done + runner.in_flight
    allowed = count if runner.budget is None else max(0, min(count, runner.budget - first))
    if allowed == 0 and count:
        raise BudgetExceeded
    assert runner.factory is not None and runner.executor is not None  # set together
    criterion = runner.is_wrong if runner.judges_result else None
    jobs = [RerunJob(factory=runner.factory, recording=_recording_json(runner),
                     removed=sorted(removed), seed=first + i, message=runner.message,
                     criterion=criterion if isinstance(criterion, WrongIf) else None)
            for i in range(allowed)]
    runner.in_flight += allowed
    try:
        outcomes = await runner.executor.rerun_jobs(jobs)
    finally:
        runner.in_flight -= allowed
    out = []
    for outcome in outcomes:
        if outcome.error is not None:
            raise ConfigurationError(outcome.error)
        if runner.deterministic is None:
            runner.deterministic = outcome.deterministic
        runner.model_calls += outcome.model_calls
        if outcome.budget is not None:
            raise BudgetExceeded(outcome.budget)
        out.append(Outcome(outcome.answer, outcome.complete, outcome.reason, None,
                           outcome.wrong))
        await runner._tick(label)
    if allowed < count:
        raise BudgetExceeded
    return out


async def both(runner: Rerunner, first: Callable[[], Awaitable[T]],
               second: Callable[[], Awaitable[T]]) -> tuple[T, T]:
    """Two independent probes: at once on an executor with a deterministic model (seeds do not
    matter there), else one after the other, exactly as in-process. Both finish before an
    error of either (a spent budget) is raised, so the cache holds what sequential would."""
    if runner.executor is None or not runner.deterministic:
        one = await first()
        return one, await second()
    found = await asyncio.gather(first(), second(), return_exceptions=True)
    for item in found:
        if isinstance(item, BaseException):
            raise item
    return found[0], found[1]  # type: ignore[return-value]


_runners: dict[tuple[str, str], Rerunner] = {}


async def _runner_for(job: RerunJob) -> Rerunner:
    """The re-runner of ``job``'s explanation in this process: the recording parsed, the agent
    built and the sandbox set up once, shared by its re-runs as in-process (one source agent,
    one sandbox)."""
    from .._refs import load_callable
    from ..runs._recording import Recording
    from ..runs._view import RunView
    from ._prove import StoredRun
    from ._rerun import Rerunner

    key = (job.factory, hashlib.sha256(job.recording.encode()).hexdigest())
    found = _runners.get(key)
    if found is None:
        recording = Recording.from_json(job.recording)
        agent = load_callable(job.factory)()
        if inspect.isawaitable(agent):
            agent = await agent
        answer = RunView.of(recording).answer or ""
        stored = StoredRun(answer, recording, agent, recording.run_id)
        found = Rerunner(rebuild=None, is_wrong=_never, message=job.message, reruns=1,
                         progress=None, total=1, result=stored, budget=None)
        if len(_runners) >= 8:
            _runners.pop(next(iter(_runners)))
        _runners[key] = found
    return found


async def rerun_one(job: RerunJob) -> RerunOutcome:
    """Do one re-run here, exactly as ``Rerunner`` does in-process (see the module)."""
    from ..agent._usage import UsageMeter
    from ._rerun import BudgetExceeded, _model_calls

    try:
        runner = await _runner_for(job)
        runner.message = job.message
        runner.done = job.seed  # the seed it isolates with, read before the re-run suspends
        runner.meter = UsageMeter()  # its spend judged alone
        outcome = await runner._once(frozenset(job.removed), job.seed)
    except BudgetExceeded as exc:
        return RerunOutcome(budget=str(exc) or "the agent's budget was spent")
    except ConfigurationError as exc:
        return RerunOutcome(error=str(exc))
    criterion = job.criterion
    wrong = None
    if criterion is not None and criterion.judges_result and outcome.result is not None:
        wrong = bool(criterion(outcome.result))
    return RerunOutcome(answer=outcome.answer, complete=outcome.complete, reason=outcome.reason,
                        model_calls=_model_calls(outcome.result) if outcome.result else 0,
                        deterministic=bool(runner.deterministic),
                        paused=bool(getattr(outcome.result, "paused", False)), wrong=wrong)


def _never(answer: object) -> bool:
    return False
