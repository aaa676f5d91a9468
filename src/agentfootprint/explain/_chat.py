"""Recorded chat: a conversation whose turns are frozen evidence — re-runnable, forkable.

"Why did you say that three turns ago?" has to be answered from what was recorded *then*, not
from an agent that has moved on; and "would it have said that without X?" has to replay turn
k exactly as it happened — the same history, byte for byte, the same message — changing X only.

``recorded_chat(make_agent)`` gives a ``RecordedChat``:

* ``send(message)`` runs one turn on a fresh ``make_agent(removed, seed=...)`` and freezes it as
  a ``ChatTurn``: the message, the reply, the turn's ``Recording``, and the checkpoints before
  and after it as JSON text. Every turn continues from the previous turn's frozen checkpoint.
* ``reason(k)`` is the backtrack and the ranked suspects of reply k, read from turn k's
  recording only (evidence — the proxy tier).
* ``rerun_turn(k, ignore=[...])`` replays turn k from its frozen checkpoint (earlier turns are
  never re-generated) on agents built without the ignored sources, under the verdict rules of
  ``rerun.py`` (a baseline, seeded re-runs, ``verdict_for``).
* ``fork(k, from_rerun=...)`` is a NEW session holding turns 1..k (turn k replaced by the
  re-run's answer); the original session is never rewritten.
* ``to_json()`` / ``RecordedChat.from_json()`` carry a session to another process.

``make_agent(without: frozenset[str], seed: int = 0) -> Agent`` (sync or async) builds the
agent minus the injections / tools whose ids are in ``without``. It is called for every live
turn, every re-run and every fork's turns, always with the session's removed sources included,
so a what-if differs from the record only by what it ignores. Stores it mounts are its own
business: give re-runs stores they may write to.
"""

from __future__ import annotations

import inspect
import json
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from ..agent._agent import Agent, RunResult
from ..errors import ConfigurationError
from ..flow._run import run_sync
from ..runs._recording import Recording
from ._backtrack import Backtrack, backtrack
from ._display import explanation_html, explanation_repr
from ._influence import RankedSuspect, RankingConfidence, ranking_confidence
from ._isolation import RerunLog, RerunSandbox
from ._rerun import Probe, Progress, Rerunner, Verdict, accepts_seed, verdict_for
from ._suspects import Suspect, suspects_of
from ._whatif import resolve_sources

__all__ = [
    "CHAT_FORMAT",
    "ChatRecord",
    "ChatTurn",
    "ForkOrigin",
    "RecordedChat",
    "TurnReason",
    "TurnRerun",
    "recorded_chat",
]

CHAT_FORMAT: Final = "agentfootprint.chat.v1"
MakeAgent = Callable[..., Any]
"""``make_agent(without: frozenset[str], seed: int = 0)`` → ``Agent`` (or an awaitable of one)."""
SameAnswer = Callable[[str], Any]
"""``same_answer(answer) -> bool`` (may be async): does a re-run still give the recorded reply."""


# -- frozen evidence (what crosses a process) ----------------------------------------------------


class ChatTurn(BaseModel):
    """One turn, frozen when it finished: what was sent, what came back, and its evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    """1-based position in the session."""
    message: str
    """The user's message exactly as sent; re-runs replay these bytes."""
    reply: str
    run_id: str
    removed: tuple[str, ...] = ()
    """The sources this turn's agent was built without (sorted)."""
    before_json: str | None
    """The checkpoint the turn continued from, as JSON text (``None`` for the first turn)."""
    after_json: str
    """The checkpoint after the turn, reply included, as JSON text."""
    recording: Recording
    """The turn's complete run record; ``reason`` reads nothing else."""
    _result: RunResult | None = PrivateAttr(default=None)

    def checkpoint_before(self) -> dict[str, Any] | None:
        """A fresh copy of the checkpoint the turn continued from (``None`` for turn 1)."""
        return None if self.before_json is None else _loads(self.before_json)

    def checkpoint_after(self) -> dict[str, Any]:
        """A fresh copy of the checkpoint after the turn (what the next turn continues from)."""
        return _loads(self.after_json)

    def history_before(self) -> list[dict[str, Any]]:
        """The conversation the model was given before this turn's message."""
        before = self.checkpoint_before()
        return list(before["history"]) if before is not None else []

    @property
    def result(self) -> RunResult | None:
        """The live ``RunResult``, only in the process that ran the turn (never exported)."""
        return self._result


class ForkOrigin(BaseModel):
    """Where a forked session branched off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parent: str
    """The parent session's id."""
    turn: int
    """The parent's turn the fork continues from."""
    via_rerun: bool
    """Turn ``turn`` of the fork is a re-run's answer, not the parent's reply."""
    ignored: tuple[str, ...] = ()
    """The sources that re-run ignored (removed from every later turn of the fork too)."""


class ChatRecord(BaseModel):
    """A whole session as JSON: ``RecordedChat.to_json()`` writes it, ``from_json`` reads it."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["agentfootprint.chat.v1"] = CHAT_FORMAT
    session_id: str
    seed: int
    removed: tuple[str, ...]
    forked_from: ForkOrigin | None = None
    turns: tuple[ChatTurn, ...]


# -- what reason() and rerun_turn() return ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnReason:
    """What influenced reply k, from turn k's recording: evidence with proxy scores, not proof."""

    turn: int
    message: str
    reply: str
    backtrack: Backtrack
    """ANSWER ← READ ← LANDED ← ALLOWED ← BORN for the best-ranked removable source."""
    confidence: RankingConfidence

    @property
    def ranked(self) -> tuple[RankedSuspect, ...]:
        """Every source that reached the reply's LLM call, best proxy score first."""
        return tuple(cast("list[RankedSuspect]", self.backtrack.ranked))

    @property
    def suspect(self) -> Suspect | None:
        """The source the backtrack followed (the best-ranked removable one)."""
        return self.backtrack.suspect

    @property
    def tier(self) -> Literal["proxy"]:
        return "proxy"

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    def __str__(self) -> str:
        head = f"Turn {self.turn}: {self.message!r} -> {self.reply!r}"
        return f"{head}\n{self.backtrack}\n{self.confidence.reason}"


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class TurnRerun:
    """Turn k replayed from its recorded history without some sources, with its verdict."""

    session_id: str
    turn: int
    original: str
    """The recorded reply the re-runs are compared with."""
    ignored: tuple[str, ...]
    """The ids this re-run left out, in rank order of the turn's suspects."""
    labels: tuple[str, ...]
    removed: frozenset[str]
    """Everything the re-run agents were built without (the session's removed + ``ignored``)."""
    probe: Probe
    baseline: Probe | None
    """The re-runs with nothing more removed (``None`` with a single re-run)."""
    verdict: Verdict | None
    """``None`` with a single re-run: one run cannot tell a cause from noise."""
    why: str
    runs: tuple[RunResult, ...] = field(repr=False)
    """The re-runs' results, seed order (``fork(k, from_rerun=...)`` continues from one)."""

    @property
    def answers(self) -> tuple[str, ...]:
        return self.probe.answers

    @property
    def flips(self) -> int:
        return self.probe.flips

    @property
    def differs(self) -> bool:
        """A strict majority of the re-runs gave something other than the recorded reply."""
        return self.probe.flipped

    @property
    def answer(self) -> str:
        """The most common re-run answer (the earliest seed wins a tie): what a fork continues."""
        return Counter(self.answers).most_common(1)[0][0]

    @property
    def tier(self) -> Literal["causal", "proxy"]:
        return "causal" if self.verdict == "CAUSAL" else "proxy"

    __repr__ = explanation_repr
    _repr_html_ = explanation_html

    def __str__(self) -> str:
        head = f"turn {self.turn} without {', '.join(self.labels)}: {self.probe.fraction} changed"
        return f"{head} (recorded {self.original!r}, now {self.answer!r})\n{self.why}"


# -- the session ---------------------------------------------------------------------------------


class RecordedChat:
    """A conversation recorded turn by turn; see the module docstring for the contract."""

    def __init__(self, make_agent: MakeAgent | None, *, seed: int = 0,
                 removed: Iterable[str] = (), turns: Sequence[ChatTurn] = (),
                 forked_from: ForkOrigin | None = None, session_id: str | None = None) -> None:
        if make_agent is not None and not callable(make_agent):
            raise ConfigurationError(
                f"make_agent={make_agent!r} must be a function (without: frozenset[str], "
                "seed: int) -> Agent")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigurationError(f"seed={seed!r} must be an int")
        if isinstance(removed, str):
            removed = [removed]
        ids = frozenset(removed)
        if not all(isinstance(i, str) and i for i in ids):
            raise ConfigurationError(f"removed={sorted(map(repr, ids))} must be source ids (str)")
        self._make_agent = make_agent
        self._seeded = make_agent is not None and accepts_seed(make_agent)
        self._seed = seed
        self._removed = ids
        self._turns: tuple[ChatTurn, ...] = _check_chain(tuple(turns))
        self._forked_from = forked_from
        self._id = session_id or uuid.uuid4().hex
        self._sending = False
        self._reasons: dict[tuple[int, str, str | None], TurnReason] = {}
        self._reruns: weakref.WeakSet[TurnRerun] = weakref.WeakSet()

    @property
    def id(self) -> str:
        return self._id

    @property
    def seed(self) -> int:
        """The seed every live turn's agent is built with."""
        return self._seed

    @property
    def removed(self) -> frozenset[str]:
        """Sources every agent of this session is built without (a fork inherits them)."""
        return self._removed

    @property
    def forked_from(self) -> ForkOrigin | None:
        return self._forked_from

    @property
    def turns(self) -> tuple[ChatTurn, ...]:
        """Every turn so far, in order; ``turns[0]`` is turn 1."""
        return self._turns

    def __len__(self) -> int:
        return len(self._turns)

    def __repr__(self) -> str:
        return f"RecordedChat(id={self._id!r}, turns={len(self._turns)})"

    def turn(self, k: int) -> ChatTurn:
        """Turn ``k`` (1-based); anything else is refused naming the valid range."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(self._turns):
            valid = f"1..{len(self._turns)}" if self._turns else "none yet (send a message first)"
            raise ConfigurationError(f"turn {k!r} is not in this session; turns: {valid}")
        return self._turns[k - 1]

    # -- live turns ---------------------------------------------------------------------------

    async def send(self, message: str) -> RunResult:
        """One turn: a fresh agent continues from the last frozen checkpoint; the turn is frozen.

        One send at a time (a second one while the first runs is refused); a turn that fails
        raises and records nothing, so the session never holds a half turn.
        """
        if not isinstance(message, str):
            raise ConfigurationError(f"send() takes the user's message as a str, got {message!r}")
        if self._sending:
            raise ConfigurationError(
                "send() is already running on this session; await it before sending the next "
                "message (a recorded chat is one line of turns)")
        self._sending = True
        try:
            index = len(self._turns) + 1
            before = self._turns[-1].after_json if self._turns else None
            agent = await self._build(self._removed, self._seed, "send")
            result = await agent.run(message,
                                     continue_from=None if before is None else _loads(before))
            _require_finished(result, f"turn {index}")
            turn = _freeze(index, message, result, before_json=before, removed=self._removed,
                           session_id=self._id)
            self._turns = (*self._turns, turn)
            return result
        finally:
            self._sending = False

    def send_sync(self, message: str) -> RunResult:
        return run_sync(self.send(message))

    # -- evidence ------------------------------------------------------------------------------

    def reason(self, k: int, *, strategy: str = "lexical_overlap",
               suspect: str | None = None) -> TurnReason:
        """What influenced reply ``k``: its backtrack and ranked suspects (proxy scores).

        Read from turn ``k``'s frozen recording only — later turns, forks and re-runs cannot
        change it. ``suspect`` follows a given source id instead of the best-ranked one.
        """
        turn = self.turn(k)
        key = (k, strategy, suspect)
        found = self._reasons.get(key)
        if found is None:
            trail = backtrack(turn.recording, suspect=suspect, strategy=strategy)
            found = TurnReason(k, turn.message, turn.reply, trail,
                               ranking_confidence(cast("list[RankedSuspect]", trail.ranked)))
            self._reasons[key] = found
        return found

    # -- what-ifs ------------------------------------------------------------------------------

    async def rerun_turn(self, k: int, *, ignore: Iterable[str | Suspect | RankedSuspect],
                         reruns: int = 3, same_answer: SameAnswer | None = None,
                         progress: Progress | None = None) -> TurnRerun:
        """Replay turn ``k`` from its recorded history on agents built without ``ignore``.

        Each re-run is ``make_agent(removed | ignore, seed=i)`` running turn ``k``'s exact
        message from its frozen checkpoint; turns 1..k-1 are not re-generated. A re-run
        "changes" when ``same_answer(answer)`` is false (default: not the recorded reply, byte
        for byte). With ``reruns >= 2`` a baseline (nothing more removed) runs first and
        ``verdict_for`` of ``rerun.py`` judges; a single re-run gives answers and no verdict.
        ``ignore`` takes ids of sources that reached reply ``k`` (see ``reason(k)``).
        """
        turn = self.turn(k)
        if isinstance(reruns, bool) or not isinstance(reruns, int) or reruns < 1:
            raise ConfigurationError(
                f"rerun_turn: reruns={reruns!r} must be an int >= 1 (one re-run shows an answer; "
                "2 or more, with a baseline, give a verdict)")
        if isinstance(ignore, (str, Suspect, RankedSuspect)):
            ignore = [ignore]
        suspects = suspects_of(turn.recording)
        chosen = resolve_sources(ignore, suspects, f"rerun_turn({k})")
        if not chosen:
            valid = ", ".join(dict.fromkeys(s.id for s in suspects if s.removable)) or "none"
            raise ConfigurationError(
                f"rerun_turn({k}): ignore= is empty; name the sources to leave out "
                f"(removable: {valid})")
        self._require_factory("rerun_turn")
        if same_answer is not None and not callable(same_answer):
            raise ConfigurationError(
                f"same_answer={same_answer!r} must be a function (answer: str) -> bool")

        def unchanged(answer: str) -> Any:
            return answer == turn.reply if same_answer is None else same_answer(answer)

        ignored = tuple(s.id for s in chosen)
        labels = tuple(s.label for s in chosen)
        produced: dict[frozenset[str], list[RunResult]] = {}

        sandbox = RerunSandbox(turn.recording.commit_log())

        async def replay(without: frozenset[str], seed: int = 0) -> RunResult:
            agent = await self._build(self._removed | without, seed, "rerun_turn")
            agent = sandbox.isolate(agent, RerunLog(), fork=False)  # never the user's stores
            result = await agent.run(turn.message, continue_from=turn.checkpoint_before())
            _require_finished(result, f"the re-run of turn {k}")
            produced.setdefault(without, []).append(result)
            return result

        runner = Rerunner(rebuild=replay, is_wrong=unchanged, message=turn.message, reruns=reruns,
                      progress=progress, total=reruns if reruns == 1 else 2 * reruns)
        if not await runner.wrong(turn.reply):
            raise ConfigurationError(
                f"same_answer({turn.reply!r}) is false for turn {k}'s own recorded reply; it "
                "must accept the reply being re-run")
        baseline = None
        if reruns > 1:
            baseline = await runner.probe(frozenset(), "baseline (nothing more removed)")
        probe = await runner.probe(frozenset(ignored), f"without {', '.join(labels)}")
        label = " + ".join(labels)
        if baseline is None:
            verdict: Verdict | None = None
            why = (f"ONE RE-RUN: without {label} the reply "
                   f"{'changed' if probe.flipped else 'did not change'}; one run cannot tell a "
                   "cause from noise (reruns >= 2 add a baseline and a verdict).")
        else:
            verdict, why = verdict_for(probe, baseline, label)
        rerun = TurnRerun(self._id, k, turn.reply, ignored, labels,
                          self._removed | frozenset(ignored), probe, baseline, verdict, why,
                          tuple(produced.get(frozenset(ignored), ())))
        self._reruns.add(rerun)
        return rerun

    def rerun_turn_sync(self, k: int, **options: Any) -> TurnRerun:
        return run_sync(self.rerun_turn(k, **options))

    def fork(self, k: int, *, from_rerun: TurnRerun | None = None) -> RecordedChat:
        """A new session continuing after turn ``k``: branch, never rewrite.

        It holds turns 1..k of this session (the same frozen objects). With ``from_rerun`` (a
        result of THIS session's ``rerun_turn(k)``), turn k becomes the re-run that gave its
        ``answer``, and the fork keeps the ignored sources removed from every later turn.
        """
        turn = self.turn(k)
        kept = list(self._turns[: k - 1])
        removed = self._removed
        ignored: tuple[str, ...] = ()
        if from_rerun is None:
            kept.append(turn)
        else:
            if not isinstance(from_rerun, TurnRerun) or from_rerun not in self._reruns:
                raise ConfigurationError(
                    f"fork({k}, from_rerun=...) takes a result of this session's "
                    f"rerun_turn({k}); {from_rerun!r} was made elsewhere")
            if from_rerun.turn != k:
                raise ConfigurationError(
                    f"fork({k}, from_rerun=...) got a re-run of turn {from_rerun.turn}; "
                    f"fork({from_rerun.turn}, from_rerun=...) continues from it")
            chosen = next(r for r in from_rerun.runs if r.content == from_rerun.answer)
            kept.append(_freeze(k, turn.message, chosen, before_json=turn.before_json,
                                removed=from_rerun.removed, session_id=self._id))
            removed = from_rerun.removed
            ignored = from_rerun.ignored
        origin = ForkOrigin(parent=self._id, turn=k, via_rerun=from_rerun is not None,
                            ignored=ignored)
        return RecordedChat(self._make_agent, seed=self._seed, removed=removed, turns=kept,
                            forked_from=origin)

    # -- export ----------------------------------------------------------------------------------

    def to_record(self) -> ChatRecord:
        return ChatRecord(session_id=self._id, seed=self._seed,
                          removed=tuple(sorted(self._removed)), forked_from=self._forked_from,
                          turns=self._turns)

    def to_json(self) -> str:
        """The whole session as JSON (live ``RunResult`` objects are not part of it)."""
        return self.to_record().model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes, *, make_agent: MakeAgent | None = None
                  ) -> RecordedChat:
        """A session exported by ``to_json``. Without ``make_agent`` it can be reasoned about
        and forked, but not sent to or re-run."""
        try:
            record = ChatRecord.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the top level"
            raise ConfigurationError(
                f"this is not a recorded chat ({CHAT_FORMAT}): {first['msg']} at {where}; pass "
                "the text of RecordedChat.to_json() unchanged") from exc
        return cls(make_agent, seed=record.seed, removed=record.removed, turns=record.turns,
                   forked_from=record.forked_from, session_id=record.session_id)

    # -- helpers ----------------------------------------------------------------------------------

    def _require_factory(self, what: str) -> MakeAgent:
        if self._make_agent is None:
            raise ConfigurationError(
                f"{what}() needs make_agent, and this session was loaded without one; use "
                "RecordedChat.from_json(text, make_agent=...)")
        return self._make_agent

    async def _build(self, without: frozenset[str], seed: int, what: str) -> Agent:
        make = self._require_factory(what)
        made = make(without, seed=seed) if self._seeded else make(without)
        if inspect.isawaitable(made):
            made = await made
        if not isinstance(made, Agent):
            raise ConfigurationError(
                f"make_agent({sorted(without)}, seed={seed}) returned {made!r}; it must return "
                "an Agent built without the sources whose ids are in `without`")
        return made


def recorded_chat(make_agent: MakeAgent, *, seed: int = 0,
                  removed: Iterable[str] = ()) -> RecordedChat:
    """A new recorded session; ``removed`` sources are left out of every turn it runs."""
    if make_agent is None:
        raise ConfigurationError(
            "recorded_chat(make_agent) needs a function (without: frozenset[str], seed: int) "
            "-> Agent")
    return RecordedChat(make_agent, seed=seed, removed=removed)


def _freeze(index: int, message: str, result: RunResult, *, before_json: str | None,
            removed: frozenset[str], session_id: str) -> ChatTurn:
    turn = ChatTurn(index=index, message=message, reply=result.content, run_id=result.run_id,
                    removed=tuple(sorted(removed)), before_json=before_json,
                    after_json=json.dumps(result.checkpoint, ensure_ascii=False),
                    recording=Recording.of(result, meta={"chat_session": session_id,
                                                         "chat_turn": index}))
    turn._result = result
    return turn


def _loads(text: str) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads(text))


def _require_finished(result: RunResult, what: str) -> None:
    status = result.recording.status
    if status != "done":
        raise ConfigurationError(
            f"{what} ended with status {status!r}; a recorded chat records finished turns "
            "only, so build make_agent's agent without the pause or run that turn outside it")


def _check_chain(turns: tuple[ChatTurn, ...]) -> tuple[ChatTurn, ...]:
    """Turns numbered 1..n, each continuing from exactly the checkpoint the previous one left."""
    previous: str | None = None
    for position, turn in enumerate(turns, start=1):
        if not isinstance(turn, ChatTurn):
            raise ConfigurationError(f"turn {position} is {turn!r}, not a ChatTurn")
        if turn.index != position:
            raise ConfigurationError(
                f"turn {position} is numbered {turn.index}; turns must run 1..{len(turns)}")
        if turn.before_json != previous:
            raise ConfigurationError(
                f"turn {position} does not continue from turn {position - 1}'s checkpoint; the "
                "session's history was altered, so it cannot be replayed byte for byte")
        previous = turn.after_json
    return turns
