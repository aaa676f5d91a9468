"""Re-runs without context sources, judged by one verdict rule: probes and the re-runner.

A ``Probe`` is a set of isolated re-runs of the agent rebuilt without some sources;
``verdict_for`` judges one against the shared baseline by the flip-rate rule of
``verdict.py``; the ``Rerunner`` runs them (fixed-size probes for what-ifs, adaptive ones for
``localize_context_bug``), isolated by ``isolation.py``, within a budget. The what-if
functions (``rerun_without_sources``, ``bisect_culprits``) live in ``whatif.py``.

``rebuild(without)`` builds the agent as it was, minus the injections / tools whose ids are in
``without``; without one, the agent that produced the result is rebuilt with
``agent.without(ids)``. It may be sync or async and may return an ``Agent`` or a composition
(run and isolated by us), a ``RunResult`` or the answer text (neither can be isolated: the
report says so). When it accepts a ``seed`` keyword it receives the re-run's index.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigurationError
from ..flow import FlowRun
from ..flow._commitlog import CommitLog
from ..runs import trace
from ..runs._recording import AgentRun
from ._isolation import RerunLog, RerunSandbox, run_identity
from ._suspects import Suspect, is_stage, log_of, suspects_of
from ._verdict import BASELINE_RUNS, DEFAULT_ALPHA, LOOKS, Decision, fisher_greater, look_decision

__all__ = ["Probe", "Rerunner", "Verdict", "verdict_for"]

Verdict = Literal["CAUSAL", "INCONCLUSIVE", "NOT CONFIRMED"]
Rebuild = Callable[..., Any]
"""``rebuild(without: frozenset[str][, seed=i])`` → Agent | RunResult | str (or awaitable)."""
IsWrong = Callable[[str], Any]
"""``is_wrong(answer) -> bool`` (may be async); a re-run flips when it returns false."""
Progress = Callable[[int, int, str], Any]
"""``progress(done, total, label)`` after every re-run (may be async)."""


# -- probes and verdicts -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    """Re-runs of the agent rebuilt without ``removed`` (empty = the baseline)."""

    removed: frozenset[str]
    flips: int
    """Completed re-runs whose answer was no longer wrong."""
    runs: int
    """Completed re-runs (a re-run that could not finish in isolation is not counted)."""
    answers: tuple[str, ...]
    incomplete: int = 0
    reasons: tuple[str, ...] = ()
    """Why re-runs could not complete (a tool that could not be replayed, a pause, an error)."""
    deterministic: bool = False
    """Every model of the re-run declared itself deterministic (one re-run is the whole story)."""
    p_value: float | None = None
    """Fisher's one-sided p-value against the baseline (sampling models)."""
    decision: Decision | None = None
    """The sequential rule's call for this probe; ``None`` for a fixed-size probe."""

    @property
    def flipped(self) -> bool:
        """The removal flips the answer: by the sequential rule, or (fixed probes) in a strict
        majority of the re-runs."""
        if self.decision is not None:
            return self.decision == "flipped"
        return self.runs > 0 and self.flips * 2 > self.runs

    @property
    def fraction(self) -> str:
        return f"{self.flips}/{self.runs}"

    @property
    def answer_without(self) -> str | None:
        """The answer a flipped re-run gave (what the agent said without the removed sources)."""
        return self.answers[0] if self.answers else None


def verdict_for(probe: Probe, baseline: Probe, label: str, *,
                alpha: float = DEFAULT_ALPHA) -> tuple[Verdict, str]:
    """The verdict of one removal probe against the shared baseline, and the sentence why."""
    if probe.runs == 0:
        reason = "; ".join(dict.fromkeys(probe.reasons)) or "no re-run completed"
        return "INCONCLUSIVE", f"INCONCLUSIVE: no re-run without {label} could complete — {reason}."
    if probe.deterministic and baseline.deterministic and baseline.flips == 0:
        if probe.flips == probe.runs:
            return "CAUSAL", (
                f"CAUSAL (deterministic model): without {label} the answer changed "
                f"({probe.fraction}); with nothing removed it did not ({baseline.fraction}).")
        if probe.flips == 0:
            return "NOT CONFIRMED", (
                f"NOT CONFIRMED: without {label} the answer stayed wrong ({probe.fraction}); "
                "its score remains a correlational proxy only.")
        return "INCONCLUSIVE", (
            f"INCONCLUSIVE: a model declared deterministic answered differently across re-runs "
            f"without {label} ({probe.fraction} flipped).")
    p = probe.p_value if probe.p_value is not None else fisher_greater(
        probe.flips, probe.runs, baseline.flips, baseline.runs)
    levels = len(LOOKS) if probe.decision is not None else 1
    if (probe.decision == "flipped") if probe.decision is not None else p <= alpha:
        return "CAUSAL", (
            f"CAUSAL at α = {alpha:g}: {probe.flips} of {probe.runs} flipped without {label}; "
            f"{baseline.flips} of {baseline.runs} with nothing removed (p = {p:.2g}"
            f"{f', judged at α/{levels} per look' if levels > 1 else ''}).")
    if probe.flips == 0 or probe.decision == "held":
        return "NOT CONFIRMED", (
            f"NOT CONFIRMED: {probe.flips} of {probe.runs} flipped without {label}; "
            f"{baseline.flips} of {baseline.runs} with nothing removed (p = {p:.2g}) — its score "
            "remains a correlational proxy only.")
    return "INCONCLUSIVE", (
        f"INCONCLUSIVE at α = {alpha:g}: {probe.flips} of {probe.runs} flipped without {label}; "
        f"{baseline.flips} of {baseline.runs} with nothing removed (p = {p:.2g}).")


def check_reruns(reruns: object) -> int:
    if isinstance(reruns, bool) or not isinstance(reruns, int) or reruns < 1:
        raise ConfigurationError(
            f"reruns={reruns!r} must be an int >= 1 (re-runs per probe)")
    return reruns


def check_alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise ConfigurationError(
            f"alpha={alpha!r} is the false-positive rate of a CAUSAL verdict; use a number in "
            "(0, 0.5), e.g. 0.01")
    return float(alpha)


def accepts_seed(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or (
        p.name == "seed" and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        inspect.Parameter.KEYWORD_ONLY))
        for p in parameters)


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class BudgetExceeded(Exception):
    """The explanation's re-run budget ran out (not an error: the report says what is left).

    Its message, when it has one, says which budget: the agent's own ``Budget`` (tokens or
    cost) also stops an explanation, as every re-run of it counts against that budget together.
    """


@dataclass(frozen=True, slots=True)
class Outcome:
    """One re-run: its answer, and whether it could complete in isolation."""

    answer: str
    complete: bool
    reason: str = ""
    result: Any = None
    wrong: bool | None = None
    """A worker's judgement of the whole result (``explain/_fanout.py``), when it made one."""


class Rerunner:
    """Runs probes of isolated re-runs, with one shared baseline and a re-run budget.

    Without ``rebuild`` the run's own agent (``result.source``) is re-run as
    ``source.without(removed)``. Either way, every Agent of the re-run is isolated by a
    :class:`RerunSandbox` (its memory on a private copy, tools answered from the recording, no
    run store) when ``result`` carries a recording; the agents of one re-run (a composition's
    members, agents used as tools) share its copies. An agent is re-run under the identity it
    recorded, a composition under the one it recorded as run under (``run_identity``); agents
    used as tools under their own.
    """

    def __init__(self, *, rebuild: Rebuild | None, is_wrong: IsWrong, message: str,
                 reruns: int, progress: Progress | None, total: int,
                 max_probes: int | None = None, result: Any = None,
                 alpha: float = DEFAULT_ALPHA, budget: int | None = None,
                 deps: object = None, executor: Any = None, factory: str | None = None
                 ) -> None:
        if rebuild is not None and not callable(rebuild):
            raise ConfigurationError(
                f"rebuild={rebuild!r} must be a function (without: frozenset[str]) -> Agent")
        if rebuild is None and not callable(getattr(getattr(result, "source", None),
                                                    "without", None)):
            raise ConfigurationError(
                "this run carries no agent to re-run (it was loaded from a store or built by "
                "hand); pass rebuild= (a function without -> Agent), or run "
                "`agentfootprint prove RUN_ID` with the factory recorded with the run")
        if not callable(is_wrong):
            raise ConfigurationError(
                f"is_wrong={is_wrong!r} must be a function (answer: str) -> bool")
        if progress is not None and not callable(progress):
            raise ConfigurationError(
                f"progress={progress!r} must be a function (done, total, label)")
        self.rebuild = rebuild
        self.source = getattr(result, "source", None)
        self.is_wrong = is_wrong
        self.judges_result = bool(getattr(is_wrong, "judges_result", False))
        self.message = message
        self.reruns = reruns
        self.progress = progress
        self.total = total
        self.max_probes = max_probes
        self.alpha = alpha
        self.budget = budget
        self.deps = deps
        """What the explained run's tools were given as ``run(..., deps=...)``: a recording
        never holds them, so a re-run has them only when the caller passes them again."""
        self.seeded = rebuild is not None and accepts_seed(rebuild)
        self.result = result
        self.executor = executor
        """Where re-runs go (``explain/_fanout.py``); ``None``: here, one after the other."""
        self.factory = factory
        self.in_flight = 0
        self.fanout_recording: str | None = None
        self.done = 0
        self.model_calls = 0
        self.cache: dict[frozenset[str], Probe] = {}
        self.order: list[Probe] = []
        self.notes: list[str] = []
        log = log_of(result) if getattr(result, "recording", None) is not None else None
        self.sandbox = RerunSandbox(log) if log is not None else None
        self.prior = prior_history(log) if log is not None else []
        self.identity = run_identity(log) if log is not None else None
        """Whose memory the run read and wrote: its agent's, or its composition's
        ``run(identity=...)`` (inferred from its members' only for an older recording)."""
        self.deterministic: bool | None = None
        self.base: Probe | None = None
        from ..agent._usage import UsageMeter

        self.meter = UsageMeter()
        """Every re-run of this explanation counts its model calls here, and the agent's
        ``Budget`` judges their sum (``agent/_usage.py``): re-runs count against it together."""

    async def wrong(self, answer: str, result: Any = None) -> bool:
        subject = result if self.judges_result and result is not None else answer
        return bool(await _settle(self.is_wrong(subject)))

    async def _tick(self, label: str) -> None:
        self.done += 1
        if self.progress is not None:
            await _settle(self.progress(self.done, max(self.total, self.done), label))

    async def _runs(self, removed: frozenset[str], label: str, count: int,
                    start: int = 0) -> list[Outcome]:
        if self.executor is not None:
            from ._fanout import remote_runs

            return await remote_runs(self, removed, label, count)
        out = []
        for seed in range(start, start + count):
            if self.budget is not None and self.done >= self.budget:
                raise BudgetExceeded
            out.append(await self._once(removed, seed))
            await self._tick(label)
        return out

    async def _probe_of(self, removed: frozenset[str], outcomes: list[Outcome], *,
                        p_value: float | None = None, decision: Decision | None = None
                        ) -> Probe:
        done = [o for o in outcomes if o.complete]
        flips = 0
        answers: list[str] = []
        flipped_answers: list[str] = []
        for outcome in done:
            flipped = (not outcome.wrong if outcome.wrong is not None
                       else not await self.wrong(outcome.answer, outcome.result))
            flips += flipped
            (flipped_answers if flipped else answers).append(outcome.answer)
        return Probe(removed, flips, len(done), tuple(flipped_answers + answers),
                     len(outcomes) - len(done),
                     tuple(dict.fromkeys(o.reason for o in outcomes if not o.complete)),
                     bool(self.deterministic), p_value, decision)

    async def probe(self, removed: frozenset[str], label: str) -> Probe:
        """A fixed-size probe of ``reruns`` re-runs (cached by the removed set)."""
        cached = self.cache.get(removed)
        if cached is not None:
            return cached
        if self.max_probes is not None and len(self.cache) >= self.max_probes:
            raise BudgetExceeded
        probe = await self._probe_of(removed, await self._runs(removed, label, self.reruns))
        self.cache[removed] = probe
        self.order.append(probe)
        return probe

    async def baseline(self) -> Probe:
        """The shared baseline: one re-run on a deterministic model; eight on a sampling one,
        sixteen when any of the first eight flipped (a noisy baseline needs a sharper rate)."""
        if self.base is not None:
            return self.base
        label = "baseline (nothing removed)"
        outcomes = await self._runs(frozenset(), label, 1)
        base = await self._probe_of(frozenset(), outcomes)
        if not self.deterministic or base.flips or not base.runs:
            if self.deterministic and base.flips:
                self.notes.append(
                    "[not-deterministic] the model declares itself deterministic, but the "
                    "unchanged agent's re-run gave a different answer; judged as a sampling "
                    "model.")
            self.deterministic = False
            outcomes += await self._runs(frozenset(), label, BASELINE_RUNS - 1, start=1)
            base = await self._probe_of(frozenset(), outcomes)
            if base.flips:
                outcomes += await self._runs(frozenset(), label, BASELINE_RUNS,
                                             start=BASELINE_RUNS)
                base = await self._probe_of(frozenset(), outcomes)
        self.base = base
        self.cache[frozenset()] = base
        self.order.append(base)
        return base

    async def judge(self, removed: frozenset[str], label: str, *, fresh: bool = False
                    ) -> Probe:
        """An adaptive probe judged against the baseline by the sequential rule (cached;
        ``fresh`` re-runs it anyway — a second opinion on a sampling model)."""
        cached = self.cache.get(removed)
        if cached is not None and not (fresh and not self.deterministic):
            return cached
        base = await self.baseline()
        if self.max_probes is not None and len(self.cache) >= self.max_probes:
            raise BudgetExceeded
        if self.deterministic:
            probe = await self._probe_of(removed, await self._runs(removed, label, 1))
            decision: Decision = ("flipped" if probe.runs and probe.flips == probe.runs
                                  else "held" if probe.runs else "undecided")
            probe = dataclasses.replace(probe, decision=decision)
        else:
            outcomes: list[Outcome] = []
            probe = await self._probe_of(removed, outcomes)
            for look in LOOKS:
                outcomes += await self._runs(removed, label, look - len(outcomes),
                                             start=len(outcomes))
                probe = await self._probe_of(removed, outcomes)
                if probe.runs == 0:
                    probe = dataclasses.replace(probe, decision="undecided")
                    break
                found = look_decision(probe.flips, probe.runs, base.flips, base.runs,
                                      alpha=self.alpha, final=look == LOOKS[-1])
                probe = dataclasses.replace(probe, p_value=found.p_value,
                                            decision=found.decision)
                if found.decision != "undecided":
                    break
        self.cache[removed] = probe
        self.order.append(probe)
        return probe

    async def _once(self, removed: frozenset[str], seed: int) -> Outcome:
        log = RerunLog()
        if self.rebuild is None:
            assert self.source is not None  # checked in __init__
            made: Any = self.source.without(removed)
        else:
            made = self.rebuild(removed, seed=seed) if self.seeded else self.rebuild(removed)
            made = await _settle(made)
        if isinstance(made, str):
            self._note_unisolated()
            return Outcome(made, True)
        run = getattr(made, "run", None)
        if callable(run):
            made = self._isolated(made, log, self.done)
            self._refuse_spent(getattr(getattr(made, "spec", None), "budget", None))
            try:
                made = await self._start(made)
            except BudgetExceeded:
                raise
            except Exception as exc:  # a re-run that fails is evidence, not a crash
                return Outcome("", False, f"a re-run raised {type(exc).__name__}: {exc}"[:300])
            if isinstance(made, str):
                return Outcome(made, log.complete, "; ".join(log.misses))
        else:  # a finished run: judge its model by the agent that made it
            if self.deterministic is None:
                self.deterministic = _all_deterministic(getattr(made, "source", None))
            self._note_unisolated()
        content = getattr(made, "content", None)
        if not isinstance(content, str):
            raise ConfigurationError(
                f"rebuild() returned {made!r}; it must return an Agent (we await "
                ".run(message)), a RunResult, or the answer text")
        self.model_calls += _model_calls(made)
        spent = getattr(made, "stopped_early", None)
        if isinstance(spent, str) and spent.startswith("budget:"):
            raise BudgetExceeded(
                f"the agent's budget ({spent.removeprefix('budget:')}) was crossed by this "
                f"explanation's re-runs after {self.done} re-run(s) ({self.meter.calls} model "
                "calls); raise it or give the explanation a smaller budget=")
        _check_left_out(made, removed)
        if getattr(made, "paused", False):
            return Outcome(content, False, "the re-run paused for a person", made)
        if not log.complete:
            return Outcome(content, False, "; ".join(dict.fromkeys(log.misses)), made)
        return Outcome(content, True, "", made)

    def _isolated(self, runner: Any, log: RerunLog, seed: int) -> Any:
        mapper = getattr(runner, "_map_agents", None)
        if self.sandbox is None or not callable(mapper):
            self._note_unisolated()
            return runner
        sandbox = self.sandbox
        isolated = mapper(lambda agent: sandbox.isolate(agent, log, seed=seed)
                          if hasattr(agent, "_init_kwargs") else agent)
        if self.deterministic is None:
            self.deterministic = _all_deterministic(isolated)
        return isolated

    def _refuse_spent(self, budget: Any) -> None:
        """Start no re-run once this explanation's re-runs together spent the agent's budget."""
        if budget is None:
            return
        meter = self.meter
        used = meter.used()
        for name, limit in budget.limits():
            if used[name] >= limit:
                raise BudgetExceeded(
                    f"the agent's budget ({name}={limit:g}) was spent by this explanation's "
                    f"re-runs after {self.done} re-run(s) ({meter.calls} model calls); raise it "
                    "or give the explanation a smaller budget=")

    async def _start(self, runner: Any) -> Any:
        from ..agent._usage import counting_together
        from ..tools._context import bound_deps

        with counting_together(self.meter), bound_deps(self.deps):
            if hasattr(runner, "_init_kwargs"):  # an Agent: same conversation, same identity
                options: dict[str, Any] = {}
                if self.prior:
                    options["continue_from"] = {"history": self.prior}
                if self.identity is not None and runner._init_kwargs.get("memory"):
                    options["identity"] = self.identity
                return await runner.run(self.message, **options)
            if self.identity is not None and _takes(runner.run, "identity"):
                # a composition: its memory members run under the identity it was run under
                return await runner.run(self.message, identity=self.identity)
            return await runner.run(self.message)

    def _note_unisolated(self) -> None:
        if self.deterministic is None:
            self.deterministic = False
        note = ("[not-isolated] rebuild() returned a finished run or an answer, so its re-runs "
                "ran outside the explanation's sandbox; return an Agent to have them isolated.")
        if note not in self.notes:
            self.notes.append(note)


def _takes(fn: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                     for p in parameters.values())


def _model_calls(result: Any) -> int:
    recording = getattr(result, "recording", None)
    if not isinstance(recording, FlowRun):
        return 0
    return sum(1 for record in recording.log.records if is_stage(record, trace.CALL_LLM))


def _all_deterministic(runner: Any) -> bool:
    found: list[bool] = []

    def look(agent: Any) -> Any:
        provider = getattr(agent, "_init_kwargs", {}).get("provider") or getattr(
            getattr(agent, "spec", None), "provider", None)
        found.append(bool(getattr(provider, "deterministic", False)))
        return agent

    mapper = getattr(runner, "_map_agents", None)
    if callable(mapper):
        mapper(look)
    return bool(found) and all(found)


def prior_history(log: CommitLog) -> list[Any]:
    """The conversation the explained run continued (its history before the user's message)."""
    for record in log.records:
        if record.ns == "" and is_stage(record, trace.SEED):
            history = log.value_at(trace.HISTORY, record.idx, default=None)
            if isinstance(history, list) and history:
                return [dict(m) for m in history[:-1]]
            return []
    return []


def _check_left_out(result: Any, removed: frozenset[str]) -> None:
    """Refuse a re-run whose model still read a context source it was meant to go without.

    A ``rebuild`` that ignores ``without`` would report every suspect NOT CONFIRMED, the
    culprit included: a false all-clear. Injections (and memory entries) are checked in the
    prompt of the call that answered; a bare answer text carries no recording to check.
    """
    if not removed or not isinstance(getattr(result, "recording", None), FlowRun):
        return
    log = log_of(result)
    if not any(is_stage(record, trace.CALL_LLM) for record in log.records):
        return
    kept = sorted(removed & {s.id for s in suspects_of(result)
                             if s.kind in ("injection", "message")})
    if kept:
        raise ConfigurationError(
            f"rebuild(without={sorted(removed)}) still gave the model {kept}; build the agent "
            "without the sources named in `without` (leave them out of context= / memory)")


def keep_proof(result: Any, proof: Mapping[str, Any]) -> bool:
    """Save ``proof`` beside the run when the agent that made it records to a run store.

    A run the agent saved (``Tracing(run_store=...)``) keeps its proofs there, so every later
    reader — ``agentfootprint explain``, the report, another process — sees the proof, not a
    proxy. A store that refuses is reported, never swallowed.
    """
    store = getattr(getattr(result, "source", None), "run_store", None)
    add = getattr(store, "add_proof", None)
    run_id = getattr(result, "run_id", None)
    if not callable(add) or not isinstance(run_id, str):
        return False
    add(run_id, proof)
    return True


def message_of(result: AgentRun, message: str | None) -> str:
    if message is not None:
        if not isinstance(message, str):
            raise ConfigurationError(f"message={message!r} must be a str")
        return message
    found = None
    if getattr(result, "recording", None) is not None:
        log = log_of(result)
        for key in (trace.USER_MESSAGE, trace.ORIGINAL, trace.MESSAGE):  # agent, composition
            found = log.value_at(key, len(log.records), default=None)
            if isinstance(found, str):
                break
    if not isinstance(found, str):
        raise ConfigurationError(
            "cannot read the original user message from result.recording.state; pass message=")
    return found


def answer_of(result: object) -> str:
    content = getattr(result, "content", None)
    if not isinstance(content, str):
        raise ConfigurationError(
            f"{result!r} has no .content answer; pass the RunResult of the run to explain")
    return content


async def require_wrong(runner: Rerunner, answer: str) -> None:
    if not await runner.wrong(answer):
        raise ConfigurationError(
            f"is_wrong(result.content) is false for {answer!r}: there is no wrong answer to "
            "explain (check is_wrong, or pass the run whose answer was wrong)")


def removable_by_id(suspects: Iterable[Suspect]) -> dict[str, Suspect]:
    out: dict[str, Suspect] = {}
    for suspect in suspects:
        if suspect.removable:
            out.setdefault(suspect.id, suspect)
    return out
